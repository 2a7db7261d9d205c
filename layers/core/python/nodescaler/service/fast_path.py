"""The fast path: a look every few seconds, between ticks, at what only needs a light read
(unschedulable pods, the policies' SQS queues and Prometheus queries, and when the groups
that keep room asked to be looked at again: `domain.ahead.recheck`), asking for an
evaluation of the groups concerned as soon as something new appears or comes due.

It brings a decision forward, never decides: the request is the tick's (the same queue, the
same evaluation), and the tick still reconciles every group each minute. Each look is
planned (`look`), then acted on (`act`). A failed look (the API server slow or down, SQS
throttling, Prometheus down or slow) backs the next one off, doubling; a queue that no
longer exists, or a query refused, is named and counted, and the others are still read.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from nodescaler.domain.cluster.predicates import NodeTemplate, live_template
from nodescaler.domain.cluster.snapshot import Pod
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import AllowedGroups
from nodescaler.domain.outside_text import outside
from nodescaler.domain.policy import (
    MetricBase,
    NodeGroupPolicy,
    PrometheusSource,
    SqsQueueSource,
)
from nodescaler.domain.policy.descriptors import backlog
from nodescaler.domain.scale_up.fast_path_rules import (
    Backoff,
    Debounce,
    fitting_groups,
    queue_need,
    request_event_id,
)
from nodescaler.errors import (
    PrometheusQueryError,
    PrometheusUnavailableError,
    QueueSendError,
    QueueUnreadableError,
    RetryableError,
    StateUnavailableError,
)
from nodescaler.events.evaluation_request import EvaluationRequest
from nodescaler.ports import (
    Clock,
    EvaluationQueue,
    NodeGroupDiscovery,
    PrometheusValues,
    QueueBacklogs,
    Rechecks,
    UnschedulablePods,
)
from nodescaler.service.policy_resolver import PolicyBook

INTERVAL_SECONDS = 5.0  # between looks: a new pod or backlog is asked about within this
MAX_CAUSE = 300  # EvaluationRequest.cause


@dataclass(frozen=True)
class QueueWatch:
    """A backlog a policy scales on, with its group: an SQS queue's, or a Prometheus
    query's (a backlog as an exporter records it)."""

    group: NodeGroup
    policy: NodeGroupPolicy
    metric: MetricBase
    source: SqsQueueSource | PrometheusSource

    @property
    def what(self) -> str:
        if isinstance(self.source, SqsQueueSource):
            return f"queue {self.source.queue}"
        return f"Prometheus query {outside(self.source.query, 80)!r}"

    @property
    def key(self) -> str:
        return f"{self.group.name}\n{self.what}"


@dataclass(frozen=True)
class Watch:
    """What the looks of one invocation watch: the groups whose policy reads pending pods
    (or counts its own: `domain.scaling.own_pods`), and each policy's queue with its group
    (sizes as discovered at the start)."""

    pending_groups: tuple[str, ...]
    queues: tuple[QueueWatch, ...]
    pending: tuple[NodeGroup, ...] = ()  # the pending-pods groups: whose nodes take what
    buffered: tuple[str, ...] = ()  # the groups whose room is watched: rechecked


@dataclass
class Look:
    """One look's findings, and the requests it plans: each group's causes, and what it is
    asked for (its new pods, its queues' needs), which makes its request's id."""

    at: datetime
    requests: dict[str, list[str]] = field(default_factory=dict)
    pods: dict[str, frozenset[str]] = field(default_factory=dict)  # group → new pods' uids
    needs: dict[str, dict[str, int]] = field(default_factory=dict)  # group → queue → nodes
    rechecked: dict[str, datetime] = field(default_factory=dict)  # group → the time come due
    next_recheck: datetime | None = None  # the soonest still to come, as read
    resting: list[str] = field(default_factory=list)  # groups asked within the slot: wait
    kubernetes_error: str | None = None
    queues_gone: list[str] = field(default_factory=list)  # and Prometheus queries refused
    queue_errors: list[str] = field(default_factory=list)  # throttled, unreachable
    # the groups' recheck times could not be read: said and counted, and the tick looks;
    # not a reason to back off the pods' and queues' looks
    state_error: str | None = None
    send_error: str | None = None
    unqueued: frozenset[str] = frozenset()  # the groups SQS did not take: asked again
    unschedulable: int = 0
    # a need's request is told apart from the same need asked in another look: unguessable
    nonce: str = field(default_factory=lambda: secrets.token_hex(16))

    @property
    def failed(self) -> bool:
        """Worth backing off: the API server or SQS failed (a deleted queue is not, nor a
        failed read of the recheck times, which the tick stands in for)."""
        return bool(self.kubernetes_error or self.queue_errors or self.send_error)

    def ask(self, group: str, why: str) -> None:
        self.requests.setdefault(group, []).append(why)

    def ask_pods(self, group: str, uids: frozenset[str]) -> None:
        self.pods[group] = uids
        self.ask(group, f"{len(uids)} new unschedulable pods")

    def ask_need(self, queue: QueueWatch, need: int, backlog: float) -> None:
        group = queue.group.name
        self.needs.setdefault(group, {})[queue.key] = need
        self.ask(
            group,
            f"{queue.what} holds {backlog:g}, asks for {need} nodes "
            f"(desired {queue.group.desired})",
        )

    def ask_recheck(self, group: str, due: datetime) -> None:
        self.rechecked[group] = due
        at = due.astimezone(UTC)
        self.ask(group, f"its last evaluation asked for a look by {at:%H:%M:%S}Z")

    def asked(self, group: str) -> list[str]:
        """What the group's request asks: its pods' uids, its queues' needs (with the look's
        nonce: a need asked again later is a new request), the recheck come due."""
        needs = [f"{q}\n{n}\n{self.nonce}" for q, n in self.needs.get(group, {}).items()]
        due = self.rechecked.get(group)
        recheck = [] if due is None else [f"recheck\n{due.isoformat()}"]
        return [*self.pods.get(group, ()), *needs, *recheck]

    def evaluation_requests(self) -> list[EvaluationRequest]:
        return [
            EvaluationRequest(
                node_group=group,
                event_id=request_event_id(group, self.asked(group)),
                cause=f"fast path: {'; '.join(why)}"[:MAX_CAUSE],
                requested_at=self.at,
            )
            for group, why in sorted(self.requests.items())
        ]


@dataclass
class FastPath:
    node_groups: NodeGroupDiscovery
    queue: EvaluationQueue
    policies: PolicyBook
    pods: UnschedulablePods | None  # None: no cluster to read
    backlogs: QueueBacklogs
    prometheus: PrometheusValues
    clock: Clock
    sleep: Callable[[float], None]
    rechecks: Rechecks | None = None  # None: no recheck times to read
    report: Callable[[Look, float], None] = lambda look, wait: None  # after each look
    allowed: AllowedGroups = field(default_factory=AllowedGroups)
    interval_seconds: float = INTERVAL_SECONDS
    backoff: Backoff = field(default_factory=Backoff)
    debounce: Debounce = field(default_factory=Debounce)  # kept while the container is warm
    _templates: Mapping[str, NodeTemplate] | None = field(default=None, init=False)
    _fitting: dict[str, tuple[str, ...]] = field(default_factory=dict, init=False)

    def run(self, until: datetime) -> list[Look]:
        """Look every `interval_seconds` (longer after failures) until `until`."""
        watch, looks, failures = self.watch(), [], 0
        while True:
            look = self.act(self.look(watch))
            looks.append(look)
            failures = failures + 1 if look.failed else 0
            wait = max(self.interval_seconds, self.backoff.delay(failures))
            self.report(look, wait if failures else 0.0)
            if self.clock.now() + timedelta(seconds=wait) >= until:
                return looks
            self.sleep(wait)

    def watch(self) -> Watch:
        groups = [g for g in self.node_groups.discover() if self.allowed.allows(g.name)]
        pending = tuple(g for g in groups if self.policies.takes_pending_pods(g))
        buffered = tuple(
            g.name
            for g in pending
            if (policy := self.policies.policy_of(g)) is not None and policy.room_watched
        )
        queues = tuple(
            QueueWatch(group, policy, metric, source)
            for group in groups
            if (policy := self.policies.policy_of(group)) is not None
            for metric in policy.spec.metrics
            if (source := backlog(metric)) is not None
        )
        self._templates = None  # the groups' nodes: read again, at the first new pod
        self._fitting = {}
        return Watch(tuple(g.name for g in pending), queues, pending, buffered)

    def look(self, watch: Watch) -> Look:
        """What is new since the last look, and the requests it calls for: the plan."""
        look = Look(self.clock.now())
        if self.pods is not None and watch.pending_groups:
            self._look_at_pods(look, watch, self.pods)
        for queue in watch.queues:
            self._look_at_queue(look, queue)
        # the groups asked to be looked at again: those keeping room; and, while pods
        # wait, every pending-pods group (its coming nodes due Ready with pods counted
        # onto them: `domain.scaling.plan_recheck`)
        rechecked = watch.pending_groups if look.unschedulable else watch.buffered
        if self.rechecks is not None and rechecked:
            self._look_at_rechecks(look, rechecked, self.rechecks)
        return look

    def act(self, look: Look) -> Look:
        """The plan's requests sent; what SQS took is taken as asked, the rest asked again
        at the next look (the tick still runs)."""
        requests = look.evaluation_requests()
        if not requests:
            return look
        try:
            self.queue.send(requests)
        except QueueSendError as error:
            look.send_error = str(error)
            look.unqueued = error.unqueued or frozenset(look.requests)
        for group in look.requests.keys() - look.unqueued:
            self.debounce.accepted(
                group,
                look.pods.get(group, ()),
                look.needs.get(group, {}),
                look.at,
                look.rechecked.get(group),
            )
        return look

    def _look_at_pods(self, look: Look, watch: Watch, source: UnschedulablePods) -> None:
        """Each new unschedulable pod asked of the groups whose nodes could take it, one
        request a group for all its new pods; a group asked within the slot waits."""
        try:
            # a DaemonSet's pod waits for its one node: no group's new node helps it
            listed = source.unschedulable_pods()
            pods = {uid: pod for uid, pod in listed.items() if not pod.daemon_set}
            templates = self._group_templates(watch, source) if pods else {}
        except RetryableError as error:  # slow, down, refused: nothing asked, backed off
            look.kubernetes_error = str(error)
            return
        look.unschedulable = len(pods)
        fits = self._fits(pods, templates, watch.pending_groups)
        for group, uids in sorted(self.debounce.new_pods(fits).items()):
            if self.debounce.resting(group, look.at):
                look.resting.append(group)
            else:
                look.ask_pods(group, uids)

    def _group_templates(
        self, watch: Watch, source: UnschedulablePods
    ) -> Mapping[str, NodeTemplate]:
        """A template of each pending-pods group's nodes, from a live node of it (DaemonSets
        not taken off: it may only ask a group more), read once an invocation."""
        if self._templates is None:
            nodes = source.nodes()
            self._templates = {
                group.name: template
                for group in watch.pending
                if (template := live_template(group, nodes, {})) is not None
            }
        return self._templates

    def _fits(
        self, pods: Mapping[str, Pod], templates: Mapping[str, NodeTemplate], groups: Sequence[str]
    ) -> dict[str, tuple[str, ...]]:
        """uid → the groups that could take the pod, worked out once a pod and invocation."""
        known = self._fitting
        if known.keys() - pods.keys():
            known = self._fitting = {uid: g for uid, g in known.items() if uid in pods}
        for uid, pod in pods.items():
            if uid not in known:
                known[uid] = fitting_groups(pod, templates, groups)
        return known

    def _look_at_rechecks(self, look: Look, groups: Sequence[str], source: Rechecks) -> None:
        """Each group whose last evaluation asked for a look by now, asked once for that
        time; a group asked within the slot waits (its evaluation is coming)."""
        try:
            due = source.rechecks(groups)
        except StateUnavailableError as error:  # throttled, refused, unreachable
            look.state_error = f"the groups' recheck times: {outside(str(error), 300)}"
            return
        for group, at in sorted(due.items()):
            if at > look.at:
                look.next_recheck = min(at, look.next_recheck or at)
            elif not self.debounce.rechecked_at(group, at):
                if self.debounce.resting(group, look.at):
                    look.resting.append(group)
                else:
                    look.ask_recheck(group, at)

    def _look_at_queue(self, look: Look, queue: QueueWatch) -> None:
        backlog = self._backlog(look, queue)
        if backlog is None:
            return
        need = queue_need(queue.metric, backlog, queue.group, queue.policy)
        if self.debounce.need_rose(queue.key, need):
            look.ask_need(queue, need, backlog)

    def _backlog(self, look: Look, queue: QueueWatch) -> float | None:
        """The backlog, or None with the failure recorded: a queue gone or a query refused
        is named (no reason to back off), SQS or Prometheus failing backs the look off."""
        group, source = queue.group.name, queue.source
        if not isinstance(source, SqsQueueSource):
            return self._query(look, queue, source)
        try:
            return self.backlogs.backlog(source)
        except QueueUnreadableError as error:
            (look.queues_gone if error.gone else look.queue_errors).append(
                f"node group {group}: {error}"
            )
        return None

    def _query(self, look: Look, queue: QueueWatch, source: PrometheusSource) -> float | None:
        try:
            return self.prometheus.query(source)[0]
        except (PrometheusQueryError, PrometheusUnavailableError) as error:
            refused = isinstance(error, PrometheusQueryError)  # its query, not the server
            (look.queues_gone if refused else look.queue_errors).append(
                f"node group {queue.group.name}: {queue.what} at {source.endpoint}: {error}"
            )
        return None

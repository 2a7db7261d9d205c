"""Which instances leave on a scale-in: the group's custom termination policy asks, and
nodescaler answers from the cluster, as Cluster Autoscaler chooses its nodes.

The group stays in charge of when and how much to remove (the desired capacity nodescaler
set); this says which. In order: instances that never became Ready nodes, then empty nodes
(only DaemonSet and mirror pods), then one node whose pods fit on the nodes that stay and
whose disruption budgets allow their eviction (`scale_down.leaving.removable`: cheapest to
move first; one at a time, as Cluster Autoscaler drains them; none a Job is at work on,
which goes once its Jobs end), and that only from a group
carrying the deployment's drain hook: without it nothing would evict those pods before the
instance ends them, where Cluster Autoscaler evicts before it deletes. Never a node kept by
annotation, one holding a pod that may not move (`domain.scale_down.pod_rules`), one whose pods
would not fit elsewhere or whose budget allows no more disruptions: the answer then holds fewer
instances than asked (possibly none), the reason names the pods, and the group asks again
later. When nodescaler cannot tell (a group it does not manage,
no cluster, the cluster unreadable) it does not guess: it offers back every instance the
group offered, and the group chooses by its next termination policy.

A scale-in (`Cause` SCALE_IN) is nodescaler's own and waits as long as its pods need. Any
other cause (an instance refresh, a maximum instance lifetime, a rebalance across zones, or
one AWS does not document) is chosen for by the same rules, but never refused for good
(`domain.scale_down.termination_policy`): while the rules let none go it is answered none,
for at most `PATIENCE` from its first such ask (kept in the state table); past that, the least-bad
offered instance goes (`scale_down.least_bad`), one an ask, and the log says why. When how
long it waited cannot be read it is answered none for now, saying so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from nodescaler.domain.cluster.snapshot import Snapshot
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.scale_down.leaving import Removable, least_bad, removable
from nodescaler.domain.scale_down.pod_rules import CA_DEFAULTS, DrainRules
from nodescaler.domain.scale_down.termination_policy import Cause, Wait, known_cause
from nodescaler.errors import (
    DrainHookUnreadError,
    KubernetesUnavailableError,
    StateCorruptError,
    StateUnavailableError,
)
from nodescaler.events.termination_policy import TerminationRequest
from nodescaler.ports import (
    Clock,
    DrainHooks,
    NodeGroupDiscovery,
    SnapshotSource,
    TerminationWaits,
)

DOCUMENTED = ", ".join(Cause)


@dataclass(frozen=True)
class TerminationChoice:
    group: str
    instance_ids: tuple[str, ...]
    chosen: bool  # False: every offered instance given back, the group decides
    reason: str  # for the log: why these, or why the group decides
    not_nodes: tuple[str, ...] = ()  # offered instances no node stands for
    forced: bool = False  # the least-bad instance, past the cause's patience
    problem: str = ""  # bad input (an unknown Cause): logged as an error, counted
    unkept: str = ""  # why how long a cause waited could not be read or written
    hook_unread: str = ""  # why whether the group drains could not be read: its node stays
    undrained: tuple[str, ...] = ()  # busy nodes' instances that stay: no drain hook


class TerminationChooser:
    def __init__(
        self,
        node_groups: NodeGroupDiscovery,
        cluster: SnapshotSource | None,
        clock: Clock,
        waits: TerminationWaits | None = None,
        rules: DrainRules = CA_DEFAULTS,
        *,
        drain_hooks: DrainHooks | None = None,
    ) -> None:
        """Without `waits`, how long a cause waited is never known: any cause but a
        scale-in is then answered as if the wait could not be read. Without `drain_hooks`,
        whether a group drains is never known: a node with pods to move then stays."""
        self._node_groups = node_groups
        self._cluster = cluster
        self._clock = clock
        self._waits = waits
        self._rules = rules  # which pods keep their node
        self._drain_hooks = drain_hooks

    def choose(self, request: TerminationRequest) -> TerminationChoice:
        group = next((g for g in self._node_groups.discover() if g.name == request.group), None)
        if group is None:
            return self._group_decides(request, "not an opted-in node group")
        if self._cluster is None:
            return self._group_decides(request, "no cluster to read")
        now = self._clock.now()  # also what a kube-system pod's timeout counts to
        try:
            snapshot = self._cluster.snapshot().at(now)
        except KubernetesUnavailableError as error:
            return self._group_decides(request, f"the cluster cannot be read ({error})")
        return self._from_the_cluster(request, group, snapshot, now)

    @staticmethod
    def _group_decides(request: TerminationRequest, why: str) -> TerminationChoice:
        return TerminationChoice(request.group, request.offered, False, f"{why}: the group decides")

    def _from_the_cluster(
        self, request: TerminationRequest, group: NodeGroup, snapshot: Snapshot, now: datetime
    ) -> TerminationChoice:
        wanted = removable(group, request.offered, request.wanted, snapshot, self._rules, now=now)
        found, hook_unread, no_hook = self._drained(request.group, wanted)
        choice = TerminationChoice(
            request.group,
            found.instance_ids,
            True,
            found.reason,
            found.not_nodes,
            hook_unread=hook_unread,
            undrained=wanted.busy if no_hook else (),
        )
        cause = known_cause(request.cause)
        if cause is Cause.SCALE_IN or not request.wanted:
            return choice
        if cause is None:
            given = f"Cause {request.cause!r}" if request.cause else "no Cause"
            problem = (
                f"termination policy request for group {request.group!r}: {given}, not one "
                f"AWS documents ({DOCUMENTED}): answered as a cause that cannot wait"
            )
            choice = replace(choice, problem=problem)
        reason = f"{request.cause or 'no Cause'}: {found.reason}"
        return self._cannot_wait(request, replace(choice, reason=reason), group, snapshot)

    def _drained(self, group: str, found: Removable) -> tuple[Removable, str, bool]:
        """A node with pods to move goes only from a group whose drain hook evicts them
        first, as Cluster Autoscaler evicts before it deletes: else its instance would end
        with them running, past their disruption budgets. The hook is asked only then; when
        Auto Scaling cannot say, the node stays, and why it could not is returned; when the
        group has no hook, that is said too (True): it sheds only empty nodes."""
        if not found.busy:
            return found, "", False
        if self._drain_hooks is None:
            return found.undrained("no drain hook known to this deployment"), "", True
        try:
            if self._drain_hooks.drains(group):
                return found, "", False
        except DrainHookUnreadError as error:
            return found.undrained("its drain hook unread"), str(error), False
        return found.undrained("no drain hook on the group"), "", True

    def _cannot_wait(
        self,
        request: TerminationRequest,
        choice: TerminationChoice,
        group: NodeGroup,
        snapshot: Snapshot,
    ) -> TerminationChoice:
        """The rules' choice; when they let none go, none for now, else the least-bad."""
        try:
            if choice.instance_ids:
                self._clear(request)
                return choice
            now, wait, unread = self._asked(request)
        except StateUnavailableError as error:
            what = "its wait's end" if choice.instance_ids else "none for now: how long it waited"
            unkept = f"{request.cause or 'no Cause'}: {what} not kept ({error})"
            return replace(choice, unkept=unkept)
        choice = replace(choice, unkept=unread)
        if not wait.patience_spent(now):
            return replace(
                choice,
                reason=f"{choice.reason}; none for now, asked since {wait.since:%H:%M:%SZ}: "
                f"the least-bad instance goes from {wait.until:%H:%M:%SZ}",
            )
        worst = least_bad(group, request.offered, snapshot, self._rules, now=now)[:1]
        return replace(
            choice,
            instance_ids=worst,
            forced=bool(worst),
            undrained=tuple(i for i in choice.undrained if i not in worst),  # it goes
            reason=f"{choice.reason}; asked since {wait.since:%H:%M:%SZ}, past its patience "
            f"({wait.until:%H:%M:%SZ}): the least-bad instance goes, {', '.join(worst)}",
        )

    def _clear(self, request: TerminationRequest) -> None:
        if self._waits is not None:
            self._waits.clear(request.group, request.cause)

    def _asked(self, request: TerminationRequest) -> tuple[datetime, Wait, str]:
        """Now, the wait with this ask, and why an earlier one was not read (an unreadable
        item: the wait begins afresh, never stuck on it)."""
        if self._waits is None:
            raise StateUnavailableError("no state table to keep it in")
        now = self._clock.now()
        try:
            previous, unread = self._waits.load(request.group, request.cause), ""
        except StateCorruptError as error:
            previous, unread = None, f"{request.cause or 'no Cause'}: {error}; it waits afresh"
        wait = previous.asked(now) if previous else Wait(now, now)
        self._waits.save(request.group, request.cause, wait)
        return now, wait, unread

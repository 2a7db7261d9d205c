"""The fast path's rules, pure: when a queue is past its target, which groups a new pod
concerns, what is new since the last look, and the id of a request.

The fast path only brings a decision forward: it asks for an evaluation, never decides.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodescaler.domain.cluster.predicates import NodeTemplate, why_not
from nodescaler.domain.cluster.snapshot import Pod
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.policy import MetricBase, NodeGroupPolicy
from nodescaler.domain.scaling.proportional import Tolerances, recommend

# A group is asked at most once in this long: what is new meanwhile waits for the first
# look after it, and goes in one request (a pod every 5 s asks a group 6 times a minute).
SLOT_SECONDS = 10


def request_event_id(group: str, asked: Iterable[str]) -> str:
    """A request's id, a digest of what it asks (the group, and its new pods' uids or its
    queues' needs): the same pods asked again (a retried send, a container started afresh)
    make the same request, which the FIFO queue drops for five minutes; new pods make a new
    one, never dropped for sharing a time slot. Only whoever knows the pods' uids can
    send a message that takes the id first."""
    digest = hashlib.sha256("\n".join([group, *sorted(asked)]).encode()).hexdigest()
    return f"fast-{digest[:40]}"


def fitting_groups(
    pod: Pod, templates: Mapping[str, NodeTemplate], groups: Sequence[str]
) -> tuple[str, ...]:
    """The groups of `groups` whose new nodes could take `pod`, by the planner's own test
    (`scheduling.why_not`); a group with no template (no live node to copy) is kept on
    doubt: its evaluation will tell. None for a DaemonSet's pod (`predicates.pending`)."""
    if pod.daemon_set:
        return ()
    return tuple(
        group
        for group in groups
        if (template := templates.get(group)) is None or why_not(pod, template) is None
    )


def queue_need(
    metric: MetricBase, backlog: float, group: NodeGroup, policy: NodeGroupPolicy
) -> int:
    """The nodes `backlog` asks for when it is past the policy's target beyond the HPA's
    tolerance (above the group's desired size), else 0."""
    up, down = policy.spec.behavior.up, policy.spec.behavior.down
    asked = recommend(metric, backlog, group.desired, Tolerances(up.tolerance, down.tolerance))
    if asked.replicas is None or asked.held_by_tolerance or asked.replicas <= group.desired:
        return 0
    return asked.replicas


@dataclass
class Debounce:
    """What the looks asked and SQS accepted: a group is asked again only for something new
    (a pod that could go to it, not asked of it before; a queue asking for more than it
    last did), and not within `SLOT_SECONDS` of its last request. Nothing is taken as asked
    before SQS accepts it (`accepted`): a request refused is asked again at the next look."""

    asked: dict[str, frozenset[str]] = field(default_factory=dict)  # pod uid → groups asked
    needs: dict[str, int] = field(default_factory=dict)  # queue → the most nodes asked for
    last_asked: dict[str, datetime] = field(default_factory=dict)  # group → its last request
    rechecks: dict[str, datetime] = field(default_factory=dict)  # group → the last asked

    def new_pods(self, fits: Mapping[str, Collection[str]]) -> dict[str, frozenset[str]]:
        """Per group, the pods of `fits` (uid → the groups that could take it) it was not
        asked for yet; pods no longer pending are forgotten."""
        self.asked = {uid: groups for uid, groups in self.asked.items() if uid in fits}
        new: dict[str, set[str]] = {}
        for uid, groups in fits.items():
            for group in set(groups) - self.asked.get(uid, frozenset()):
                new.setdefault(group, set()).add(uid)
        return {group: frozenset(uids) for group, uids in new.items()}

    def need_rose(self, queue: str, need: int) -> bool:
        """Whether `need` is more than the queue asked for since it was last on target; back
        on target (0), the need is forgotten, so a new rise is asked again."""
        if not need:
            self.needs.pop(queue, None)
        return need > self.needs.get(queue, 0)

    def resting(self, group: str, now: datetime) -> bool:
        """Whether the group was asked less than `SLOT_SECONDS` ago: what is new waits."""
        last = self.last_asked.get(group)
        return last is not None and now - last < timedelta(seconds=SLOT_SECONDS)

    def rechecked_at(self, group: str, due: datetime) -> bool:
        """Whether the group was asked for this recheck already (an evaluation that asks
        for another writes another time)."""
        return self.rechecks.get(group) == due

    def accepted(
        self,
        group: str,
        pods: Iterable[str],
        needs: Mapping[str, int],
        at: datetime,
        recheck: datetime | None = None,
    ) -> None:
        """SQS took the group's request, asked at `at` for `pods`, `needs` (queue → nodes)
        and the `recheck` come due."""
        if recheck is not None:
            self.rechecks[group] = recheck
        for uid in pods:
            self.asked[uid] = self.asked.get(uid, frozenset()) | {group}
        for queue, need in needs.items():
            self.needs[queue] = max(self.needs.get(queue, 0), need)
        self.last_asked[group] = at


@dataclass(frozen=True)
class Backoff:
    """Seconds to wait after consecutive failed looks: doubling from `initial` to `maximum`."""

    initial: float = 1.0
    maximum: float = 30.0

    def delay(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        return float(min(self.initial * 2 ** min(failures - 1, 20), self.maximum))

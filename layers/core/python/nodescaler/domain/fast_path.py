"""The fast path's rules, pure: when a queue is past its target, what is new since the last
look, and which time slot a request belongs to.

The fast path only brings a decision forward: it asks for an evaluation, never decides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from nodescaler.domain.node_group import NodeGroup
from nodescaler.domain.policy import MetricBase, NodeGroupPolicy
from nodescaler.domain.proportional import Tolerances, recommend

# Requests of one slot share an event id, so the FIFO queue drops a repeat across
# invocations (its five-minute deduplication); a group is asked at most once a slot.
SLOT_SECONDS = 10


def slot_event_id(now: datetime, slot_seconds: int = SLOT_SECONDS) -> str:
    return f"fast-{int(now.timestamp()) // slot_seconds}"


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
    """What the last looks saw: a group is asked again only when something new appears (an
    unschedulable pod not seen before, a queue asking for more than it last did)."""

    pods: frozenset[str] = frozenset()
    needs: dict[str, int] = field(default_factory=dict)  # queue → the most nodes asked for

    def new_pods(self, seen: Iterable[str]) -> frozenset[str]:
        """The pods of `seen` not seen the last time; gone ones are forgotten."""
        current = frozenset(seen)
        new, self.pods = current - self.pods, current
        return new

    def need_rose(self, queue: str, need: int) -> bool:
        """Whether `need` is more than the queue asked for since it was last on target; back
        on target (0), the need is forgotten, so a new rise is asked again."""
        before = self.needs.get(queue, 0)
        self.needs[queue] = max(before, need) if need else 0
        return need > before


@dataclass(frozen=True)
class Backoff:
    """Seconds to wait after consecutive failed looks: doubling from `initial` to `maximum`."""

    initial: float = 1.0
    maximum: float = 30.0

    def delay(self, failures: int) -> float:
        if failures <= 0:
            return 0.0
        return float(min(self.initial * 2 ** min(failures - 1, 20), self.maximum))

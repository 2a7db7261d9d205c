"""The recheck a group's plan records: when the fast path is to ask for its evaluation
again. Its buffer's or its reservation's room eaten before the tick would buy in time
(`domain.ahead.recheck`);
or pending pods counted onto its nodes on their way, once those nodes should be Ready:
the count is an estimate of packing, and a pod the scheduler then finds no room for is
no longer new to the fast path, so without this it waits for the tick (Cluster
Autoscaler's loop sees it within 10 s). Never where that evaluation could buy nothing:
the group has the most nodes it may have (its maximum, or all the cluster's limits leave
it), its scale-out is paused then, or it runs as a dry run. The count of its room is kept
either way: the next evaluation measures from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.recheck import (
    Recheck,
    Room,
    SpareSeen,
    buffer_recheck,
    reserved_room,
)
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.pause import Pause
from nodescaler.domain.scaling.readings import MetricReading, Reading

# After the nodes should be Ready: the scheduler binds what fits on a node just Ready
# within a second or two, so a pod still pending then needs another node.
LANDED = timedelta(seconds=10)


@dataclass(frozen=True)
class Buying:
    """What says whether an evaluation could buy the group a node."""

    size: int  # the nodes it has, or this plan gives it (a scale-up to the limit: none)
    planned: int  # the nodes this plan gives it: the next evaluation's current count
    most: int  # its maximum, the policy's, or what the cluster's limits leave it (read
    # only for a plan that grows: `Actuator.claim_limits`)
    pauses: Sequence[Pause] = ()
    dry_run: bool = False

    @classmethod
    def of(
        cls,
        group: NodeGroup,
        policy: NodeGroupPolicy,
        ceiling: Ceiling | None,
        desired: int,
        *,
        pauses: Sequence[Pause] = (),
        dry_run: bool = False,
    ) -> Buying:
        """The group's size once planned (`desired`), the most it may have, and what holds
        it."""
        most = min(group.max_size, policy.spec.max_replicas)
        if ceiling is not None:
            most = min(most, ceiling.nodes)
        return cls(max(group.desired, desired), desired, most, pauses, dry_run)

    def could_buy(self, at: datetime) -> bool:
        """Not a dry run, nor its scale-out held by a pause still in force `at`, and room
        for one more node."""
        paused = any(p.direction.holds(1) and p.active(at) for p in self.pauses)
        return not self.dry_run and not paused and self.size < self.most


def plan_recheck(
    readings: Mapping[str, Reading],
    policy: NodeGroupPolicy,
    seen: SpareSeen | None,
    *,
    arrivals: Arrivals,
    boot: timedelta,
    now: datetime,
    buying: Buying,
    grown_at: datetime | None = None,
) -> Recheck:
    """The recheck for a group of `policy`, its room last counted as `seen`, a node a
    `boot` away, its last scale-up asked `grown_at` (None: none in flight)."""
    pending = [r for r in readings.values() if isinstance(r, MetricReading)]
    room = _room(readings, policy, buying.planned)
    found = Recheck(None, None)
    if room is not None:  # room kept whole: how fast it goes
        found = buffer_recheck(room.kept, room.spare, seen, arrivals=arrivals, boot=boot, now=now)
    landed = None
    if grown_at is not None and any(r.pending_pods for r in pending):
        landed = grown_at + boot + LANDED  # the pods its coming nodes are to take
    times = [t for t in (found.at, landed) if t is not None and t > now and buying.could_buy(t)]
    return Recheck(min(times, default=None), found.seen)


def _room(readings: Mapping[str, Reading], policy: NodeGroupPolicy, desired: int) -> Room | None:
    """The room its buffers keep, its policy's or the cluster's (their least, and the room
    beyond the fullest), else its reservations' (the least of each, `desired` nodes
    planned); None where none is whole."""
    read = [r for r in readings.values() if isinstance(r, MetricReading)]
    spare = min((r.buffer_spare for r in read if r.buffer_spare is not None), default=None)
    if spare is not None or policy.buffers:
        return None if spare is None else Room(sum(b.least for b in policy.buffers), spare)
    tolerance = policy.spec.behavior.up.tolerance
    rooms = [
        reserved_room(metric.target.amount, reading, desired, tolerance)
        for metric in policy.reserved_shares
        if isinstance(reading := readings.get(metric.key), MetricReading)
    ]
    whole = [r for r in rooms if r is not None]
    if not whole or len(whole) < len(rooms):  # one short: this evaluation buys
        return None
    spare = min(r.spare for r in whole)
    return Room(min(r.kept + r.spare for r in whole) - spare, spare)

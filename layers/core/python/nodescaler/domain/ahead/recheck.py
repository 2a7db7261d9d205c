"""When to look again at a group whose buffer the arriving pods will eat into before its
next evaluation, if waiting for that evaluation would make them wait.

A buffer's room is checked when the group is evaluated: at each tick, and when the fast
path brings an evaluation forward for an unschedulable pod. Pods that land in the room
make no pod unschedulable, so a buffer used up just after a tick is seen a tick later:
Cluster Autoscaler's placeholder pods, preempted, are pending pods it acts on within its
10-second loop. So each evaluation that finds the buffer whole counts the room beyond it,
in pods of the buffer's largest shape, and whether pods keep coming: the room went down,
or the group's pods rose, since a count at least a minute before (over seconds they may
not have: an evaluation 5 s after the tick would see none come, and forget a look to
come). While they come, at the faster of the rate the room goes and the group's pods'
arrival rate (the highest lately, `domain.ahead.arrivals`: a minute's count alone is
noise, three pods one minute and five the next), it works out when the pod past that
room arrives (the buffer then runs short) and when the pod past all the room does (one
then waits). If the buffer runs short before the next look, and a node asked for at that
look would be Ready only after all the room is gone, the group's state says when it runs
short, and the fast path asks for an evaluation then, which buys the node the shortfall
calls for. Nothing is bought ahead of need, the look is only brought forward. Where the
buffer covers a boot and a tick at that rate, or no pod comes (a burst over, a quiet
hour), nothing changes.

A reservation's `Utilization` target keeps room the same way, and is used up the same
way between looks: its room is counted in pods of the group's average shape
(`reserved_room`), the pods its Ready nodes take before an evaluation would buy a node
standing for the room beyond a buffer, and the rest, until they are full, for the buffer
itself; of several reservations (CPU and memory), the least of each. A group that keeps
a buffer too is watched by its buffer's room: one count, in one shape, is measured from
one evaluation to the next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.scaling.readings import MetricReading

SOONEST = timedelta(seconds=10)  # the fast path's slot: a group is not asked more often
MEASURED_OVER = timedelta(minutes=1)  # the least time the room's use is measured over
STALE = timedelta(minutes=15)  # a count older than this measures nothing
COUNTED_UP_TO = 64  # pods beyond the buffer counted: more room than that needs no look


@dataclass(frozen=True)
class SpareSeen:
    """The room beyond a whole buffer, in pods of its largest shape (a reservation's: in
    its average pod, `reserved_room`), counted at `at`, with the group's pods then: what
    later counts tell whether pods keep coming from; and the rate the room went at then,
    which stands until a count a minute on can tell anew."""

    pods: int
    at: datetime
    group_pods: int | None = None
    per_minute: float = 0.0


@dataclass(frozen=True)
class Recheck:
    at: datetime | None  # when the fast path is to ask for an evaluation
    seen: SpareSeen | None  # the count the next evaluation measures from


@dataclass(frozen=True)
class Room:
    """Room a group keeps, in pods: `kept` of it what its policy holds (a buffer's pods, or
    a reservation's share from its target until its nodes are full), `spare` beyond it."""

    kept: int
    spare: int


def reserved_room(
    target: float, reading: MetricReading, desired: int, tolerance: float
) -> Room | None:
    """A reservation's room at `target` % in pods of its average shape: beyond the kept
    room, those its Ready nodes take before an evaluation would buy a node (the value past
    the target by the scale-up `tolerance`, and past what the `desired` nodes hold); kept,
    the rest until those nodes are full. None when no pod or node was measured, or an
    evaluation would buy now (the reservation is short already)."""
    share, measured = reading.pod_share, reading.measured_nodes
    if not share or not measured:
        return None
    buys_past = target * max(1 + tolerance, desired / measured)
    if reading.value > buys_past:
        return None
    full = max(math.floor((100 - reading.value) / share), 0)
    spare = min(math.floor((buys_past - reading.value) / share), full)
    return Room(full - spare, spare)


def buffer_recheck(
    buffer: int,
    spare: int | None,
    before: SpareSeen | None,
    *,
    arrivals: Arrivals,
    boot: timedelta,
    now: datetime,
) -> Recheck:
    """When the room beyond the `buffer` (`spare` pods now, `before` at an earlier count)
    will be gone while pods keep coming (the room went down, or the group's pods as
    `arrivals` counted them now rose, since `before`), at the faster of the rate the room
    went and the pods' arrival rate; if that comes before the next look and a node asked
    for then would be Ready (a `boot` later) only after all the room is gone. None when
    the buffer is not whole (this evaluation buys for it), no pod came, or the next look
    is in time."""
    if spare is None:
        return Recheck(None, None)
    group_pods, arriving, look = arrivals.pods, arrivals.per_minute, arrivals.between_looks(now)
    rate = _coming(before, spare, group_pods, arriving, now)
    seen = SpareSeen(spare, now, group_pods, rate)
    if before is not None and before.pods >= spare and before.at <= now < before.at + MEASURED_OVER:
        seen = before  # measured from until a minute old, while the room does not grow
        rate = rate or before.per_minute  # too soon to tell none came: its rate stands
    if rate <= 0:
        return Recheck(None, seen)
    short = timedelta(minutes=(spare + 1) / rate)
    waits = timedelta(minutes=(buffer + spare + 1) / rate)
    if short >= look or waits >= look + boot:
        return Recheck(None, seen)
    return Recheck(now + max(short, SOONEST), seen)


def _coming(
    before: SpareSeen | None, spare: int, group_pods: int | None, arriving: float, now: datetime
) -> float:
    """Pods of room going a minute, while pods come since `before`: the faster of the
    room's own rate and the pods `arriving`; none when no pod came (or no count to tell
    by, or one too old)."""
    if before is None or not timedelta(0) < now - before.at <= STALE:
        return 0.0
    going = max(before.pods - spare, 0) / ((now - before.at) / timedelta(minutes=1))
    counted = before.group_pods
    rose = group_pods is not None and counted is not None and group_pods > counted
    return max(going, arriving) if going > 0 or rose else 0.0

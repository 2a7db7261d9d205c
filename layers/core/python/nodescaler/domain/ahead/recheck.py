"""When to look again at a group whose buffer the arriving pods will eat into before its
next evaluation.

A buffer's room is checked when the group is evaluated: at each tick, and when the fast
path brings an evaluation forward for an unschedulable pod. Pods that land in the room
make no pod unschedulable, so a buffer used up just after a tick is seen a tick later:
Cluster Autoscaler's placeholder pods, preempted, are pending pods it acts on within its
10-second loop. So each evaluation that finds the buffer whole works out how long the room
beyond it lasts at the group's arrival rate (`domain.ahead.arrivals`): the (spare + 1)th
pod to arrive eats into it. When that comes before the next look, the group's state says
when, and the fast path asks for an evaluation then, which buys the node a shortfall
calls for, as the tick would a minute later. Nothing is bought ahead of need: the look
is brought forward, not the node.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from nodescaler.domain.ahead.arrivals import Arrivals

SOONEST = timedelta(seconds=10)  # the fast path's slot: a group is not asked more often


def buffer_recheck(spare: int | None, arrivals: Arrivals, now: datetime) -> datetime | None:
    """When the pods arriving at the group's rate will have eaten into its buffer, if that
    comes before its next look; None when the buffer is not whole (the evaluation is
    buying for it), no pods arrive, or the next look comes first."""
    if spare is None or arrivals.per_minute <= 0:
        return None
    lasts = timedelta(minutes=(spare + 1) / arrivals.per_minute)
    if lasts >= arrivals.between_looks(now):
        return None
    return now + max(lasts, SOONEST)

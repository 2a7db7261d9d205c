"""When to look again at a group whose buffer the arriving pods will eat into before its
next evaluation, if waiting for that evaluation would make them wait.

A buffer's room is checked when the group is evaluated: at each tick, and when the fast
path brings an evaluation forward for an unschedulable pod. Pods that land in the room
make no pod unschedulable, so a buffer used up just after a tick is seen a tick later:
Cluster Autoscaler's placeholder pods, preempted, are pending pods it acts on within its
10-second loop. So each evaluation that finds the buffer whole works out, at the group's
arrival rate (`domain.ahead.arrivals`), when the pod past the room beyond it arrives (the
buffer then runs short) and when the pod past all the room arrives (one then waits). If a
node asked for at the next look would be Ready only after that, and the buffer runs short
before that look, the group's state says when it runs short, and the fast path asks for an
evaluation then, which buys the node its shortfall calls for. Nothing is bought ahead of
need, the look is only brought forward; and where the buffer covers a boot and a tick at
the rate the pods come, nothing changes: its node would be in time anyway.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from nodescaler.domain.ahead.arrivals import Arrivals

SOONEST = timedelta(seconds=10)  # the fast path's slot: a group is not asked more often


def buffer_recheck(
    buffer: int, spare: int | None, arrivals: Arrivals, boot: timedelta, now: datetime
) -> datetime | None:
    """When the pods arriving at the group's rate will have eaten into its `buffer` (with
    `spare` pods' room beyond it), if that comes before its next look and a node asked for
    then would come after the room is gone; None when the buffer is not whole (the
    evaluation is buying for it), no pods arrive, or the next look is in time."""
    if spare is None or arrivals.per_minute <= 0:
        return None
    short = timedelta(minutes=(spare + 1) / arrivals.per_minute)  # the buffer runs short
    waits = timedelta(minutes=(buffer + spare + 1) / arrivals.per_minute)  # a pod finds none
    look = arrivals.between_looks(now)
    if short >= look or waits >= look + boot:
        return None
    return now + max(short, SOONEST)

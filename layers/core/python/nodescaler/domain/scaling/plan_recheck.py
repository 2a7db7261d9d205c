"""The recheck a group's plan records: when the fast path is to ask for its evaluation
again, its buffer's room eaten before the tick would buy in time (`domain.ahead.recheck`),
and never where that evaluation could buy nothing: the group has the most nodes it may
have (its maximum, or all the cluster's limits leave it), its scale-out is paused then,
or it runs as a dry run. The count of its room is kept either way: the next evaluation
measures from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.recheck import Recheck, SpareSeen, buffer_recheck
from nodescaler.domain.scaling.pause import Pause
from nodescaler.domain.scaling.readings import MetricReading, Reading


@dataclass(frozen=True)
class Buying:
    """What says whether an evaluation could buy the group a node."""

    size: int  # the nodes it has, or this plan gives it (a scale-up to the limit: none)
    most: int  # its maximum, the policy's, or what the cluster's limits leave it (read
    # only for a plan that grows: `Actuator.claim_limits`)
    pauses: Sequence[Pause] = ()
    dry_run: bool = False

    def could_buy(self, at: datetime) -> bool:
        """Not a dry run, nor its scale-out held by a pause still in force `at`, and room
        for one more node."""
        paused = any(p.direction.holds(1) and p.active(at) for p in self.pauses)
        return not self.dry_run and not paused and self.size < self.most


def plan_recheck(
    readings: Mapping[str, Reading],
    buffered: int,
    seen: SpareSeen | None,
    *,
    arrivals: Arrivals,
    boot: timedelta,
    now: datetime,
    buying: Buying,
) -> Recheck:
    """The recheck for a group keeping `buffered` pods of room (its buffers' least), its
    room last counted as `seen`, a node a `boot` away."""
    spares = [r.buffer_spare for r in readings.values() if isinstance(r, MetricReading)]
    spare = min((s for s in spares if s is not None), default=None)
    if spare is None:  # no buffer kept whole: nothing to measure
        return Recheck(None, None)
    found = buffer_recheck(buffered, spare, seen, arrivals=arrivals, boot=boot, now=now)
    if found.at is None or buying.could_buy(found.at):
        return found
    return Recheck(None, found.seen)

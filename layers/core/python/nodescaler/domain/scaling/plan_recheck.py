"""The recheck a group's plan records: when the fast path is to ask for its evaluation
again, its buffer's room eaten before the tick would buy in time (`domain.ahead.recheck`),
and never where that evaluation could buy nothing: the group has the most nodes it may
have (its maximum, or all the cluster's limits leave it), its scale-out is paused then,
or it runs as a dry run. The count of its room is kept either way: the next evaluation
measures from it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.recheck import Recheck, buffer_recheck
from nodescaler.domain.scaling.readings import MetricReading

if TYPE_CHECKING:  # the plan imports this module
    from nodescaler.domain.scaling.plan import Facts


def plan_recheck(facts: Facts, arrivals: Arrivals, *, boot: timedelta, desired: int) -> Recheck:
    """The recheck for the group, `desired` nodes once planned, a node a `boot` away."""
    spares = [r.buffer_spare for r in facts.readings.values() if isinstance(r, MetricReading)]
    spare = min((s for s in spares if s is not None), default=None)
    if spare is None:  # no buffer kept whole: nothing to measure
        return Recheck(None, None)
    found = buffer_recheck(
        sum(b.least for b in facts.policy.buffers),
        spare,
        facts.state.spare_seen,
        arrivals=arrivals,
        boot=boot,
        now=facts.now,
    )
    if found.at is None or could_buy(facts, desired, found.at):
        return found
    return Recheck(None, found.seen)


def could_buy(facts: Facts, desired: int, at: datetime) -> bool:
    """Whether an evaluation `at` could buy the group a node: not a dry run, nor with its
    scale-out held by a pause still in force then, and room for one more node above the
    `desired` it has (or this plan gives it: a scale-up to the limit leaves none)."""
    group, ceiling = facts.group, facts.ceiling
    most = min(group.max_size, facts.policy.spec.max_replicas)
    if ceiling is not None:  # read only for a plan that grows (`Actuator.claim_limits`)
        most = min(most, ceiling.nodes)
    paused = any(p.direction.holds(1) and p.active(at) for p in facts.pauses)
    return not facts.dry_run and not paused and max(group.desired, desired) < most

"""How many pre-initialised instances a group's warm pool keeps: what its forecast
expects the group to grow by, beyond the size just decided.

A warm instance has booted once and been stopped: it joins the group in about a minute
instead of a cold boot, and costs its volumes while it waits. A `ForecastAndScale`
forecast with `warmPool` raises the group one lead time ahead, as any forecast does, and
keeps warm the nodes it expects over the next warm-up window (`forecast.WARM_UP_WINDOW`):
the scale-ups that take them are fast, so the forecast need not bring nodes as early,
and what they take is prepared again before it is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodescaler.domain.groups.node_group import NodeGroup, WarmPool
from nodescaler.domain.policy import NodeGroupPolicy, PredictiveMetric
from nodescaler.domain.scaling.decision import Decision
from nodescaler.domain.scaling.readings import MetricReading, Reading


@dataclass(frozen=True)
class WarmPoolPlan:
    size: int | None  # the pool to keep; None: leave it as it is
    note: str  # why, for the decision and `explain` ("" when no forecast sizes a pool)

    def changes(self, pool: WarmPool | None) -> bool:
        return self.size is not None and pool is not None and not pool.holds(self.size)


NOT_SIZED = WarmPoolPlan(None, "")


def plan_warm_pool(
    policy: NodeGroupPolicy,
    decision: Decision,
    readings: Mapping[str, Reading],
    pool: WarmPool | None,
) -> WarmPoolPlan:
    """The warm pool for the growth the policy's `warmPool` forecasts expect."""
    keys = [
        m.key
        for m in policy.spec.metrics
        if isinstance(m, PredictiveMetric) and m.predictive.warm_pool
    ]
    if not keys:
        return NOT_SIZED
    if pool is None:
        return WarmPoolPlan(
            None,
            "the group has no warm pool to size: create one (aws autoscaling put-warm-pool) "
            "or drop warmPool",
        )
    if pool.problem:
        return WarmPoolPlan(None, f"warm pool left as it is: {pool.problem}")
    forecasts = [readings.get(key) for key in keys]
    if missing := [r for r in forecasts if not isinstance(r, MetricReading)]:
        why = getattr(missing[0], "reason", "no forecast")
        return WarmPoolPlan(None, f"warm pool left as it is: {why}")
    peak = max(
        int(r.peak if r.peak is not None else r.value)
        for r in forecasts
        if isinstance(r, MetricReading)
    )
    growth = max(peak - decision.desired, 0)
    size = min(growth, max(decision.max_replicas - decision.desired, 0))
    capped = f", capped by the group's max of {decision.max_replicas}" if size < growth else ""
    return WarmPoolPlan(
        size,
        f"warm pool {size}: forecast up to {peak} in the next warm-up − {decision.desired} "
        f"desired{capped}",
    )


def usable_pool(group: NodeGroup) -> WarmPool | None:
    """The group's warm pool, when it has one whose configuration reads as Auto Scaling's."""
    pool = group.warm_pool
    return pool if pool is not None and not pool.problem else None


def warm_launch(group: NodeGroup, current: int, desired: int) -> bool:
    """Whether growing the group from `current` to `desired` is covered by its warm pool:
    Auto Scaling keeps max(maxPrepared − desired, minSize) instances warm (maxPrepared
    unset: the group's MaxSize), and a scale-up takes them before it boots any cold. One
    only partly covered waits for its cold instances, so it counts as cold."""
    pool = usable_pool(group)
    if pool is None or desired <= current:
        return False
    prepared = group.max_size if pool.max_prepared is None else pool.max_prepared
    return desired - current <= max(prepared - current, pool.min_size)

"""How many pre-initialised instances a group's warm pool keeps: the growth its forecast
expects one lead time ahead, beyond the size just decided.

A warm instance has booted once and been stopped: it joins the group in about a minute
instead of a cold boot, and costs its volumes while it waits. So a `ForecastAndWarm`
forecast never changes the group's size (the live metrics set it, as reactive as they
are); it only keeps ready the nodes the next lead time is expected to ask for, and the
scale-up that asks for them gets them at once from the pool.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodescaler.domain.decision import Decision
from nodescaler.domain.node_group import WarmPool
from nodescaler.domain.policy import ForecastMode, NodeGroupPolicy, PredictiveMetric


@dataclass(frozen=True)
class WarmPoolPlan:
    size: int | None  # the pool to keep; None: leave it as it is
    note: str  # why, for the decision and `explain` ("" when no forecast sizes a pool)

    def changes(self, pool: WarmPool | None) -> bool:
        return self.size is not None and pool is not None and not pool.holds(self.size)


NOT_SIZED = WarmPoolPlan(None, "")


def plan_warm_pool(
    policy: NodeGroupPolicy, decision: Decision, pool: WarmPool | None
) -> WarmPoolPlan:
    """The warm pool for the growth the policy's `ForecastAndWarm` forecasts expect."""
    warm = {
        m.key
        for m in policy.spec.metrics
        if isinstance(m, PredictiveMetric) and m.predictive.mode is ForecastMode.FORECAST_AND_WARM
    }
    forecasts = [o for o in decision.metrics if o.name in warm]
    if not forecasts:
        return NOT_SIZED
    if pool is None:
        return WarmPoolPlan(
            None,
            "the group has no warm pool to size: create one (aws autoscaling put-warm-pool) "
            "or forecast with ForecastAndScale",
        )
    if abstaining := [o for o in forecasts if o.recommendation is None]:
        return WarmPoolPlan(None, f"warm pool left as it is: {abstaining[0].detail}")
    forecast = max(o.recommendation or 0 for o in forecasts)
    growth = max(forecast - decision.desired, 0)
    size = min(growth, max(decision.max_replicas - decision.desired, 0))
    capped = f", capped by the group's max of {decision.max_replicas}" if size < growth else ""
    return WarmPoolPlan(
        size, f"warm pool {size}: forecast {forecast} − {decision.desired} desired{capped}"
    )

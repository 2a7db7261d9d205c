"""A warm pool sized from the forecast: the growth one lead time ahead, never the group's
size, and a group without a pool told so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nodescaler.domain.decision import MetricStatus
from nodescaler.domain.forecast import DemandHistory, forecast_readings
from nodescaler.domain.history import History
from nodescaler.domain.node_group import WarmPool
from nodescaler.domain.readings import MetricReading
from nodescaler.domain.warm_pool import plan_warm_pool

from tests.builders import T0, policy, queue_metric, run
from tests.unit.test_forecast import MONDAY, office_hours, predictive, recorded

POOL = WarmPool(min_size=0, max_prepared=None, pool_state="Stopped")
BEFORE_NINE = MONDAY + timedelta(days=1, hours=8, minutes=55)  # Tuesday 08:55


def decided(mode: str, current: int, jobs: float, history: DemandHistory, max_replicas: int = 50):  # type: ignore[no-untyped-def]
    the_policy = policy(
        queue_metric("jobs", per_node=4),
        predictive(mode),
        min_replicas=1,
        max_replicas=max_replicas,
    )
    readings = {"jobs": MetricReading(value=jobs, at=BEFORE_NINE)}
    readings |= forecast_readings(the_policy, history, BEFORE_NINE)
    return the_policy, run(the_policy, current, readings, History(), BEFORE_NINE).decision


def test_a_warm_forecast_never_changes_the_size_and_keeps_its_growth_warm() -> None:
    # Given Monday's office hours learnt, and the queue asking for 2 nodes at 08:55
    the_policy, decision = decided("ForecastAndWarm", 2, 8, recorded(1, office_hours))
    # Then the group stays at what the live metrics ask: the forecast is not a floor
    assert decision.desired == 2
    (outcome,) = [m for m in decision.metrics if m.name == "predictive"]
    assert (outcome.status, outcome.recommendation) == (MetricStatus.FORECAST_WARM, 10)
    # And the pool keeps the 8 more nodes 09:00 is expected to need
    plan = plan_warm_pool(the_policy, decision, POOL)
    assert (plan.size, plan.note) == (8, "warm pool 8: forecast 10 − 2 desired")
    assert plan.changes(POOL)
    assert not plan.changes(WarmPool(min_size=8, max_prepared=8, pool_state="Stopped"))
    assert plan.changes(WarmPool(min_size=8, max_prepared=None, pool_state="Stopped"))


def test_the_pool_is_empty_when_the_group_already_has_what_the_forecast_expects() -> None:
    the_policy, decision = decided("ForecastAndWarm", 12, 48, recorded(1, office_hours))
    assert plan_warm_pool(the_policy, decision, POOL).size == 0


def test_the_pool_never_holds_more_than_the_group_could_grow_to() -> None:
    the_policy, decision = decided(
        "ForecastAndWarm", 2, 8, recorded(1, office_hours), max_replicas=6
    )
    plan = plan_warm_pool(the_policy, decision, POOL)
    assert plan.size == 4
    assert plan.note.endswith("capped by the group's max of 6")


def test_a_group_without_a_warm_pool_is_told_and_nothing_is_sized() -> None:
    the_policy, decision = decided("ForecastAndWarm", 2, 8, recorded(1, office_hours))
    plan = plan_warm_pool(the_policy, decision, None)
    assert plan.size is None
    assert plan.note.startswith("the group has no warm pool to size: create one")
    assert not plan.changes(None)


def test_an_abstaining_forecast_leaves_the_pool_as_it_is_and_says_why() -> None:
    the_policy, decision = decided("ForecastAndWarm", 2, 8, recorded(0.5, office_hours))
    plan = plan_warm_pool(the_policy, decision, POOL)
    assert plan.size is None
    assert plan.note.startswith("warm pool left as it is: needs 24 h of history")


@pytest.mark.parametrize("mode", ["ForecastOnly", "ForecastAndScale"])
def test_other_forecast_modes_and_policies_without_a_forecast_size_no_pool(mode: str) -> None:
    the_policy, decision = decided(mode, 2, 8, recorded(1, office_hours))
    assert plan_warm_pool(the_policy, decision, POOL).note == ""
    plain = policy(queue_metric("jobs", per_node=4))
    no_forecast = run(plain, 2, {"jobs": MetricReading(value=8, at=T0)}, History(), T0).decision
    assert plan_warm_pool(plain, no_forecast, POOL).note == ""

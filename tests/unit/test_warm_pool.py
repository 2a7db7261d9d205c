"""A warm pool sized from the forecast: what it expects over the next warm-up window
beyond the size just decided, and a group without a pool told so."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nodescaler.domain.ahead.forecast import DemandHistory, forecast_readings
from nodescaler.domain.ahead.warm_pool import plan_warm_pool
from nodescaler.domain.groups.node_group import WarmPool
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.readings import MetricReading
from pydantic import ValidationError

from tests.builders import T0, policy, queue_metric, run
from tests.unit.test_forecast import MONDAY, office_hours, predictive, recorded

POOL = WarmPool(min_size=0, max_prepared=None, pool_state="Stopped")
EARLY = MONDAY + timedelta(days=1, hours=8, minutes=40)  # Tuesday 08:40, the ramp at 09:00


def decided(current: int, jobs: float, history: DemandHistory, max_replicas: int = 50):  # type: ignore[no-untyped-def]
    the_policy = policy(
        queue_metric("jobs", per_node=4),
        predictive("ForecastAndScale", warmPool=True),
        min_replicas=1,
        max_replicas=max_replicas,
    )
    readings = {"jobs": MetricReading(value=jobs, at=EARLY)}
    readings |= forecast_readings(the_policy, history, EARLY)
    decision = run(the_policy, current, readings, History(), EARLY).decision
    return the_policy, decision, readings


def test_the_pool_keeps_what_the_warm_up_window_is_forecast_to_add() -> None:
    # Given Monday's office hours learnt, and the queue asking for 2 nodes at 08:40
    the_policy, decision, readings = decided(2, 8, recorded(1, office_hours))
    # Then 08:45's forecast is 2, the group stays at 2, and the 8 more 09:00 is expected
    # to need (within the quarter hour after the lead time) are kept warm
    assert decision.desired == 2
    assert readings["predictive"].peak == 10  # type: ignore[union-attr]
    plan = plan_warm_pool(the_policy, decision, readings, POOL)
    assert (plan.size, plan.note) == (
        8,
        "warm pool 8: forecast up to 10 in the next warm-up − 2 desired",
    )
    assert plan.changes(POOL)
    assert not plan.changes(WarmPool(min_size=8, max_prepared=8, pool_state="Stopped"))
    assert plan.changes(WarmPool(min_size=8, max_prepared=None, pool_state="Stopped"))


def test_the_pool_is_empty_when_the_group_already_has_what_the_forecast_expects() -> None:
    the_policy, decision, readings = decided(12, 48, recorded(1, office_hours))
    assert plan_warm_pool(the_policy, decision, readings, POOL).size == 0


def test_the_pool_never_holds_more_than_the_group_could_grow_to() -> None:
    the_policy, decision, readings = decided(2, 8, recorded(1, office_hours), max_replicas=6)
    plan = plan_warm_pool(the_policy, decision, readings, POOL)
    assert plan.size == 4
    assert plan.note.endswith("capped by the group's max of 6")


def test_a_group_without_a_warm_pool_is_told_and_nothing_is_sized() -> None:
    the_policy, decision, readings = decided(2, 8, recorded(1, office_hours))
    plan = plan_warm_pool(the_policy, decision, readings, None)
    assert plan.size is None
    assert plan.note.startswith("the group has no warm pool to size: create one")
    assert not plan.changes(None)


def test_an_abstaining_forecast_leaves_the_pool_as_it_is_and_says_why() -> None:
    the_policy, decision, readings = decided(2, 8, recorded(0.5, office_hours))
    plan = plan_warm_pool(the_policy, decision, readings, POOL)
    assert plan.size is None
    assert plan.note.startswith("warm pool left as it is: needs 24 h of history")


def test_a_forecast_without_warm_pool_sizes_none_and_computes_no_peak() -> None:
    plain_forecast = policy(queue_metric("jobs", per_node=4), predictive("ForecastAndScale"))
    readings = forecast_readings(plain_forecast, recorded(1, office_hours), EARLY)
    assert readings["predictive"].peak is None  # type: ignore[union-attr]
    decision = run(plain_forecast, 2, readings, History(), EARLY).decision
    assert plan_warm_pool(plain_forecast, decision, readings, POOL).note == ""
    plain = policy(queue_metric("jobs", per_node=4))
    no_forecast = run(plain, 2, {"jobs": MetricReading(value=8, at=T0)}, History(), T0).decision
    assert plan_warm_pool(plain, no_forecast, {}, POOL).note == ""


def test_a_warm_pool_on_a_forecast_that_is_never_acted_on_is_refused_naming_why() -> None:
    with pytest.raises(
        ValidationError, match="warmPool sizes the group's warm pool, which a ForecastOnly"
    ):
        policy(predictive("ForecastOnly", warmPool=True))
    with pytest.raises(ValidationError, match="valid boolean"):
        policy(predictive("ForecastAndScale", warmPool="yes"))


def test_a_pool_whose_configuration_could_not_be_read_is_left_as_it_is_saying_why() -> None:
    the_policy, decision, readings = decided(2, 8, recorded(1, office_hours))
    odd = WarmPool(0, None, "Stopped", problem="its warm pool's MinSize -2 is negative")
    plan = plan_warm_pool(the_policy, decision, readings, odd)
    assert (plan.size, plan.note) == (
        None,
        "warm pool left as it is: its warm pool's MinSize -2 is negative",
    )


def test_a_missing_forecast_leaves_the_pool_as_it_is_saying_no_forecast() -> None:
    the_policy, decision, _ = decided(2, 8, recorded(1, office_hours))
    plan = plan_warm_pool(the_policy, decision, {}, POOL)
    assert (plan.size, plan.note) == (None, "warm pool left as it is: no forecast")


def test_a_group_without_a_pool_is_told_both_ways_out() -> None:
    the_policy, decision, readings = decided(2, 8, recorded(1, office_hours))
    assert plan_warm_pool(the_policy, decision, readings, None).note == (
        "the group has no warm pool to size: create one (aws autoscaling put-warm-pool) "
        "or drop warmPool"
    )


def test_a_forecast_without_a_peak_sizes_the_pool_from_its_value() -> None:
    the_policy, decision, _ = decided(2, 8, recorded(1, office_hours))
    readings = {"predictive": MetricReading(value=5, at=EARLY)}
    assert plan_warm_pool(the_policy, decision, readings, POOL).size == 3


def test_a_group_at_its_max_keeps_no_warm_pool() -> None:
    the_policy, decision, readings = decided(2, 8, recorded(1, office_hours), max_replicas=2)
    plan = plan_warm_pool(the_policy, decision, readings, POOL)
    assert (decision.desired, plan.size) == (2, 0)

"""The decision at its edges: which limit it names and when, the group's own bounds, what
a forecast or a failing metric may hold, and the one line `explain` gives."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from nodescaler.domain.scale_up.backoff import Backoff
from nodescaler.domain.scaling.autoscaler import Evaluation, GroupSize
from nodescaler.domain.scaling.decision import Limit, MetricStatus
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.readings import MetricReading, Reading

from tests.builders import EXACT, T0, UNLIMITED, act, policy, queue_metric, readings, run
from tests.unit.test_forecast import predictive
from tests.unit.test_windows import with_windows

EKS = "EKS scalingConfig"


def outcome(evaluation: Evaluation, name: str) -> Any:
    (found,) = [o for o in evaluation.decision.metrics if o.name == name]
    return found


# --- the group's own bounds ----------------------------------------------------------------


def test_a_group_bound_below_the_policys_caps_the_scale_up_and_is_named() -> None:
    the_policy = policy(queue_metric("jobs", 4), max_replicas=10, behavior=UNLIMITED)
    size = GroupSize(current=3, max_size=5, bounds_from=EKS)
    decision = run(the_policy, 3, readings(jobs=20), size=size).decision  # asks exactly 5
    assert (decision.desired, decision.limited_by, decision.group_bounds) == (5, (Limit.MAX,), EKS)
    assert decision.reason == (
        "scale up 3 → 5 | jobs: 20 against 4/replica → 5 | at the maximum 5 (EKS scalingConfig)"
    )


def test_a_group_bound_equal_to_the_policys_is_not_named_as_the_source() -> None:
    the_policy = policy(queue_metric("jobs", 4), max_replicas=5, behavior=UNLIMITED)
    size = GroupSize(current=3, max_size=5, bounds_from=EKS)
    decision = run(the_policy, 3, readings(jobs=32), size=size).decision
    assert (decision.desired, decision.group_bounds) == (5, "")
    assert decision.reason == "scale up 3 → 5 | jobs: 32 against 4/replica → 8 | at the maximum 5"


@pytest.mark.parametrize(("current", "jobs", "desired"), [(5, 20, 5), (3, 16, 4)])
def test_below_or_at_a_group_bound_it_is_not_named_as_a_limit(
    current: int, jobs: float, desired: int
) -> None:
    the_policy = policy(queue_metric("jobs", 4), max_replicas=10, behavior=UNLIMITED)
    size = GroupSize(current=current, max_size=5, bounds_from=EKS)
    decision = run(the_policy, current, readings(jobs=jobs), size=size).decision
    assert (decision.desired, decision.limited_by) == (desired, ())


def test_a_group_outside_its_bounds_keeps_its_history() -> None:
    the_policy = policy(queue_metric("jobs", 4), min_replicas=3)
    history = History().with_recommendation(T0 - timedelta(seconds=30), 2, 300)
    evaluation = run(the_policy, 1, readings(jobs=4), history=history)
    assert (evaluation.decision.desired, evaluation.history) == (3, history)


# --- what the instances allow --------------------------------------------------------------


def test_a_cluster_limit_that_is_reached_but_not_passed_is_not_named() -> None:
    the_policy = policy(queue_metric("jobs", 4), behavior=UNLIMITED)
    ceiling = Ceiling(6, "maximum of 6 nodes")
    decision = run(the_policy, 3, readings(jobs=24), ceiling=ceiling).decision
    assert (decision.desired, decision.limited_by, decision.cluster_limit) == (6, (), "")


def test_a_rate_and_a_cluster_limit_are_both_named_in_order() -> None:
    up = {"scaleUp": {"policies": [{"type": "Replicas", "value": 4, "periodSeconds": 60}]}}
    the_policy = policy(queue_metric("jobs", 4), behavior=up)
    ceiling = Ceiling(6, "maximum of 6 nodes")
    decision = run(the_policy, 3, readings(jobs=80), ceiling=ceiling).decision
    assert decision.desired == 6
    assert decision.reason.endswith(
        " | limited by the scale-up rate, capped by the cluster's maximum of 6 nodes"
    )


def test_protection_never_raises_a_group_above_its_size() -> None:
    the_policy = policy(queue_metric("jobs", 4), behavior=UNLIMITED)
    size = GroupSize(current=2, protected=3)  # more protected than the group has asked for
    decision = run(the_policy, 2, readings(jobs=4), size=size).decision
    assert (decision.desired, decision.limited_by) == (2, (Limit.PROTECTED,))


def test_a_scale_in_that_stops_exactly_at_the_protected_instances_is_not_held() -> None:
    the_policy = policy(queue_metric("jobs", 4), behavior=UNLIMITED)
    size = GroupSize(current=4, protected=2)
    decision = run(the_policy, 4, readings(jobs=8), size=size).decision
    assert (decision.desired, decision.limited_by) == (2, ())


def backoff() -> Backoff:
    return Backoff(
        until=T0 + timedelta(minutes=5),
        seconds=300,
        last_failure=T0,
        reason="InsufficientInstanceCapacity",
    )


def test_a_backed_off_group_at_its_size_holds_it_and_aborts_nothing() -> None:
    the_policy = policy(queue_metric("jobs", 4), behavior=UNLIMITED)
    decision = run(the_policy, 3, readings(jobs=32), backoff=backoff()).decision
    assert decision.desired == 3
    assert decision.reason.startswith("hold at 3 | jobs: 32 against 4/replica → 8 | backed off")


def test_a_backoff_does_not_name_another_limit_with_its_own_words() -> None:
    the_policy = policy(queue_metric("jobs", 4))  # a 600 s scale-down window
    decision = run(the_policy, 5, readings(jobs=8), backoff=backoff()).decision
    assert decision.limited_by == (Limit.STABILIZATION,)
    assert decision.reason == (
        "hold at 5 | jobs: 8 against 4/replica → 2 | recommendation 2 must hold for 600s first"
    )


def test_a_rate_limited_scale_in_is_named_as_the_rate_not_the_window() -> None:
    down = {
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Replicas", "value": 1, "periodSeconds": 60}],
        }
    }
    decision = run(policy(queue_metric("jobs", 4), behavior=down), 5, readings(jobs=8)).decision
    assert decision.reason == (
        "scale down 5 → 4 | jobs: 8 against 4/replica → 2 | limited by the scale-down rate"
    )


@pytest.mark.parametrize(
    ("direction", "current", "jobs", "then"),
    [("scaleUp", 3, 32, 4), ("scaleDown", 5, 4, 4)],
)
def test_a_scale_counts_against_the_rate_for_the_longest_period_of_either_direction(
    direction: str, current: int, jobs: float, then: int
) -> None:
    slow = {
        direction: {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Replicas", "value": 1, "periodSeconds": 600}],
        }
    }
    the_policy = policy(queue_metric("jobs", 4), behavior=slow)
    history = act(the_policy, run(the_policy, current, readings(jobs=jobs)))
    later = T0 + timedelta(seconds=500)
    decision = run(
        the_policy, 4, readings(at=later, jobs=jobs), history=history, now=later
    ).decision
    assert decision.desired == then  # the first step's node still counts 500 s later


# --- combining metrics ---------------------------------------------------------------------


def test_a_missing_metric_beside_one_asking_for_the_size_holds_without_naming_it() -> None:
    the_policy = policy(queue_metric("jobs", 4), queue_metric("more", 4), behavior=UNLIMITED)
    decision = run(the_policy, 10, readings(jobs=40)).decision
    assert (decision.desired, decision.limited_by) == (10, ())


def test_a_metric_within_tolerance_is_not_named_when_another_scales_up() -> None:
    the_policy = policy(queue_metric("jobs", 4), queue_metric("more", 4), behavior=UNLIMITED)
    decision = run(the_policy, 10, readings(jobs=41, more=60)).decision
    assert (decision.desired, decision.limited_by) == (15, ())
    assert decision.reason == "scale up 10 → 15 | more: 60 against 4/replica → 15"


def test_a_metric_held_by_tolerance_records_the_demand_it_saw() -> None:
    decision = run(policy(queue_metric("jobs", 4)), 10, readings(jobs=41)).decision
    assert (decision.desired, decision.limited_by, decision.demand) == (10, (Limit.TOLERANCE,), 11)


def test_a_driver_is_the_metric_with_the_highest_recommendation_even_against_zero() -> None:
    the_policy = policy(queue_metric("jobs", 4), queue_metric("more", 4), behavior=EXACT)
    decision = run(the_policy, 1, readings(jobs=0, more=4)).decision
    assert decision.reason == "hold at 1 | more: 4 against 4/replica → 1"


def test_with_every_metric_missing_no_metric_is_named_as_the_driver() -> None:
    decision = run(policy(queue_metric("jobs", 4)), 3, {}).decision
    assert decision.reason == (
        "hold at 3 | jobs missing: no reading was produced | a metric is missing, stale or "
        "invalid, so no scale-in"
    )


def test_an_invalid_value_keeps_when_it_was_read() -> None:
    evaluation = run(policy(queue_metric("jobs", 4)), 3, readings(jobs=float("nan")))
    found = outcome(evaluation, "jobs")
    assert (found.status, found.at) == (MetricStatus.INVALID, T0)


def test_a_reading_keeps_who_waits_and_the_nodes_they_need() -> None:
    reading = MetricReading(value=2, at=T0, needed_nodes=5, waiting={"web-1": "no room"})
    the_policy = policy({"type": "PendingPods"}, behavior=UNLIMITED)
    evaluation = run(the_policy, 3, {"pending-pods": reading})
    found = outcome(evaluation, "pending-pods")
    assert (found.needed, found.waiting) == (5, {"web-1": "no room"})
    assert evaluation.decision.demand == 5


# --- forecasts -----------------------------------------------------------------------------


def test_a_forecast_alone_with_no_reading_abstains_and_holds_nothing() -> None:
    evaluation = run(policy(predictive(), behavior=UNLIMITED), 2, {})
    found = outcome(evaluation, "predictive")
    assert (found.status, found.detail) == (MetricStatus.ABSTAINED, "no forecast")
    assert (evaluation.decision.desired, evaluation.decision.limited_by) == (2, ())


def test_a_forecast_only_metric_alone_never_sizes_the_group() -> None:
    the_policy = policy(predictive("ForecastOnly"), behavior=UNLIMITED)
    decision = run(the_policy, 2, {"predictive": MetricReading(value=10, at=T0)}).decision
    assert (decision.desired, decision.reason) == (2, "hold at 2")


def test_a_forecast_only_metric_is_never_named_as_the_driver() -> None:
    the_policy = policy(queue_metric("jobs", 4), predictive("ForecastOnly"), behavior=UNLIMITED)
    values: dict[str, Reading] = {**readings(jobs=16), "predictive": MetricReading(value=10, at=T0)}
    decision = run(the_policy, 2, values).decision
    assert decision.reason == "scale up 2 → 4 | jobs: 16 against 4/replica → 4"


def test_a_forecast_without_words_keeps_its_value_and_time() -> None:
    the_policy = policy(queue_metric("jobs", 4), predictive(), behavior=UNLIMITED)
    values: dict[str, Reading] = {**readings(jobs=4), "predictive": MetricReading(value=7, at=T0)}
    evaluation = run(the_policy, 2, values)
    found = outcome(evaluation, "predictive")
    assert (found.value, found.at, found.detail, found.recommendation) == (7, T0, "", 7)
    assert evaluation.decision.desired == 7


def test_a_forecast_of_zero_is_no_floor() -> None:
    the_policy = policy(queue_metric("jobs", 4), predictive(), behavior=EXACT)
    values: dict[str, Reading] = {**readings(jobs=0), "predictive": MetricReading(value=0, at=T0)}
    decision = run(the_policy, 0, values).decision
    assert (decision.desired, decision.limited_by) == (0, ())


def test_a_forecast_equal_to_a_held_size_leaves_the_tolerance_named() -> None:
    the_policy = policy(queue_metric("jobs", 4), predictive())
    values: dict[str, Reading] = {**readings(jobs=41), "predictive": MetricReading(value=10, at=T0)}
    decision = run(the_policy, 10, values).decision
    assert (decision.desired, decision.limited_by) == (10, (Limit.TOLERANCE,))


@pytest.mark.parametrize("slow", ["scaleUp", "scaleDown"])
def test_a_scale_is_remembered_for_the_longest_rate_period_of_either_direction(
    slow: str,
) -> None:
    fast = "scaleDown" if slow == "scaleUp" else "scaleUp"
    behavior = {
        slow: {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Replicas", "value": 5, "periodSeconds": 600}],
        },
        fast: {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Replicas", "value": 5, "periodSeconds": 60}],
        },
    }
    the_policy = policy(queue_metric("jobs", 4), behavior=behavior)
    history = act(the_policy, run(the_policy, 3, readings(jobs=16)))  # 3 → 4
    later = T0 + timedelta(seconds=120)
    back = run(the_policy, 4, readings(at=later, jobs=12), history=history, now=later)
    assert back.decision.desired == 3
    kept = act(the_policy, back)  # 4 → 3, two minutes on: the first is within 600 s
    assert [(e.at, e.change) for e in kept.scale_events] == [(T0, 1), (later, -1)]


def test_a_scale_in_of_exactly_a_windows_room_is_not_held_by_it() -> None:
    all_day = {"schedule": "0 0 * * *", "durationMinutes": 1440, "timeZone": "UTC"}
    the_policy = with_windows(all_day | {"maxNodesPerHour": 2})  # 10 a node
    decision = run(the_policy, 5, {"load": MetricReading(value=30, at=T0)}).decision
    assert (decision.desired, decision.limited_by) == (3, ())


def test_pending_pods_voting_to_shed_nodes_keep_the_value_they_read() -> None:
    the_policy = policy({"type": "PendingPods"}, behavior=UNLIMITED)
    reading = MetricReading(value=0, at=T0, unneeded_nodes=2)
    found = outcome(run(the_policy, 5, {"pending-pods": reading}), "pending-pods")
    assert (found.status, found.value, found.recommendation) == (MetricStatus.UNNEEDED, 0, 3)

"""Fallbacks: a metric failing more than `failureThreshold` evaluations in a row (KEDA's
count) votes its fallback.

"Highest wins" holds with a fallback: its vote is one metric's recommendation among the
others', so a live metric asking for more outvotes it, and it outvotes a live metric asking
for less. A failing metric without a fallback (or before its threshold) still holds scale-in.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scaling.acted import record_scale
from nodescaler.domain.scaling.autoscaler import Evaluation, decide
from nodescaler.domain.scaling.decision import Limit, MetricStatus
from nodescaler.domain.scaling.fallback import MetricFailures
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading

from tests.builders import T0, UNLIMITED, minutes, policy, queue_metric, value_metric

THRESHOLD = 3
DOWN = MetricUnavailable(reason="CloudWatch returned no datapoint in the last 300s")


def _policy(
    fallback: dict[str, Any] | None,
    *,
    min_replicas: int = 0,
    max_replicas: int = 100,
    behavior: dict[str, Any] | None = None,
) -> NodeGroupPolicy:
    failing = value_metric("errors", 10) | ({"fallback": fallback} if fallback else {})
    return policy(
        failing,
        queue_metric("jobs", per_node=1),  # the live metric: one node a queued job
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        behavior=UNLIMITED if behavior is None else behavior,
    )


def _readings(at: datetime, jobs: float, errors: Reading | None = DOWN) -> dict[str, Reading]:
    values: dict[str, Reading] = {"jobs": MetricReading(value=jobs, at=at)}
    if errors is not None:
        values["errors"] = errors
    return values


def _in_a_row(
    the_policy: NodeGroupPolicy, current: int, rounds: list[dict[str, Reading]]
) -> list[Evaluation]:
    """One evaluation a minute, each acted on and carrying on the history and failures of
    the last, as the evaluator does."""
    history, failures, done = History(), MetricFailures(), []
    for minute, values in enumerate(rounds):
        evaluation = decide(
            node_group="ng",
            policy=the_policy,
            size=GroupSize(current=current),
            readings=values,
            history=history,
            now=T0 + minutes(minute),
            failures=failures,
        )
        history = record_scale(evaluation.history, the_policy, evaluation.decision)
        failures, current = evaluation.failures, evaluation.decision.desired
        done.append(evaluation)
    return done


def _failing(the_policy: NodeGroupPolicy, current: int, jobs: float, times: int) -> Evaluation:
    rounds = [_readings(T0 + minutes(m), jobs) for m in range(times)]
    return _in_a_row(the_policy, current, rounds)[-1]


FALLBACKS = [
    # (case, fallback, jobs the live metric sees, desired at 10 nodes once it applies)
    ("a fixed size below: scale in to it", {"replicas": 2}, 1, 2),
    ("a fixed size below a live metric: the live metric wins", {"replicas": 2}, 6, 6),
    ("a fixed size above a live metric: the fallback wins", {"replicas": 14}, 6, 14),
    ("currentReplicas: the current size", {"action": "currentReplicas"}, 1, 10),
    ("currentReplicas under a live scale-up: the scale-up", {"action": "currentReplicas"}, 12, 12),
    ("ifHigher than the current size: its replicas", {"action": "ifHigher", "replicas": 14}, 1, 14),
    ("ifHigher, the current size higher: that", {"action": "ifHigher", "replicas": 4}, 1, 10),
    ("hold: no scale-in", {"action": "hold"}, 1, 10),
    ("hold under a live scale-up: the scale-up", {"action": "hold"}, 12, 12),
]


@pytest.mark.parametrize(
    ("fallback", "jobs", "desired"), [c[1:] for c in FALLBACKS], ids=[c[0] for c in FALLBACKS]
)
def test_given_a_metric_failing_when_its_threshold_is_exceeded_then_its_fallback_votes(
    fallback: dict[str, Any], jobs: float, desired: int
) -> None:
    the_policy = _policy({"failureThreshold": THRESHOLD} | fallback)

    before = _failing(the_policy, 10, jobs, THRESHOLD).decision
    reached = _failing(the_policy, 10, jobs, THRESHOLD + 1).decision

    # at the threshold, not past it: today's rule, whatever the fallback
    assert before.desired == max(10, jobs)
    assert Limit.FALLBACK not in before.limited_by
    assert reached.desired == desired
    assert Limit.FALLBACK in reached.limited_by
    errors = reached.metrics[0]
    assert errors.failing_since == T0  # the first failure of the run
    assert f"errors in fallback {errors.fallback}" in reached.reason
    assert "since 2026-03-02 12:00:00Z" in reached.reason


def test_given_no_fallback_then_a_failing_metric_never_lets_the_group_scale_in() -> None:
    decision = _failing(_policy(None), 10, jobs=1, times=50).decision
    assert decision.desired == 10
    assert decision.limited_by == (Limit.MISSING_METRIC,)
    assert "fallback" not in decision.reason


def test_given_a_fallback_hold_then_the_metric_stays_missing_and_the_hold_is_named() -> None:
    decision = _failing(_policy({"failureThreshold": 2, "action": "hold"}), 10, 1, 3).decision
    assert decision.metrics[0].status is MetricStatus.MISSING
    assert decision.limited_by == (Limit.MISSING_METRIC, Limit.FALLBACK)
    assert "errors in fallback hold since 2026-03-02 12:00:00Z" in decision.reason


def test_given_a_fallback_vote_then_it_is_named_as_the_driver_and_is_no_demand() -> None:
    decision = _failing(_policy({"failureThreshold": 2, "replicas": 14}), 10, 1, 3).decision
    errors = decision.metrics[0]
    assert (errors.status, errors.recommendation) == (MetricStatus.FALLBACK, 14)
    assert "errors: CloudWatch returned no datapoint" in decision.reason
    assert "fallback replicas 14 after 3 failures → 14" in decision.reason
    assert decision.demand is None  # a fallback's vote is not the group's demand


@pytest.mark.parametrize(
    ("replicas", "desired", "limit"), [(0, 3, Limit.MIN), (50, 20, Limit.MAX)], ids=["min", "max"]
)
def test_given_a_fallback_outside_the_bounds_then_the_group_stays_within_them(
    replicas: int, desired: int, limit: Limit
) -> None:
    the_policy = _policy(
        {"failureThreshold": 0, "replicas": replicas}, min_replicas=3, max_replicas=20
    )
    decision = _failing(the_policy, 10, jobs=0, times=1).decision
    assert decision.desired == desired
    assert limit in decision.limited_by


def test_given_a_fallback_below_the_current_size_then_the_scale_down_window_and_rate_still_apply() -> (
    None
):
    behavior = {
        "scaleDown": {
            "stabilizationWindowSeconds": 300,
            "policies": [{"type": "Replicas", "value": 2, "periodSeconds": 60}],
        }
    }
    the_policy = _policy({"failureThreshold": 1, "replicas": 2}, behavior=behavior)
    # the live metric agrees to shed: the fallback alone holds the floor at 2
    rounds = [_readings(T0 + minutes(m), jobs=0) for m in range(12)]
    sizes = [e.decision.desired for e in _in_a_row(the_policy, 10, rounds)]
    # minute 0 fails once (at the threshold, not past it): held; from minute 1 the
    # fallback votes 2, held for the 300 s window by the group's size then (10), then 2
    # nodes a minute
    assert sizes == [10] * 6 + [8, 6, 4, 2, 2, 2]


def test_given_a_metric_that_recovers_then_its_count_starts_again() -> None:
    the_policy = _policy({"failureThreshold": 2, "replicas": 2})
    good = MetricReading(value=10, at=T0)  # on target: keeps the 10 nodes
    rounds = [
        _readings(T0, jobs=1),
        _readings(T0 + minutes(1), jobs=1),
        _readings(T0 + minutes(2), jobs=1, errors=good.model_copy(update={"at": T0 + minutes(2)})),
        _readings(T0 + minutes(3), jobs=1),
        _readings(T0 + minutes(4), jobs=1),
        _readings(T0 + minutes(5), jobs=1),
    ]
    evaluations = _in_a_row(the_policy, 10, rounds)
    # three failures, but not in a row: held; the third of the new run falls back
    assert [e.decision.desired for e in evaluations[:5]] == [10, 10, 10, 10, 10]
    assert evaluations[2].failures.runs == {}
    last = evaluations[5].decision
    assert last.desired == 2
    assert last.metrics[0].failing_since == T0 + minutes(3)
    assert "since 2026-03-02 12:03:00Z" in last.reason


def test_given_a_stale_or_invalid_reading_then_it_counts_as_a_failure() -> None:
    the_policy = _policy({"failureThreshold": 2, "replicas": 2})
    stale = MetricReading(value=5, at=T0 - minutes(60))
    rounds = [
        _readings(T0, jobs=1, errors=stale),
        _readings(T0 + minutes(1), jobs=1, errors=MetricReading(value=-1, at=T0)),
        _readings(T0 + minutes(2), jobs=1, errors=None),  # no reading at all
    ]
    assert _in_a_row(the_policy, 10, rounds)[-1].decision.desired == 2


def test_given_another_metric_failing_without_a_fallback_then_it_still_holds_scale_in() -> None:
    the_policy = policy(
        value_metric("errors", 10) | {"fallback": {"failureThreshold": 0, "replicas": 2}},
        value_metric("latency", 10),
        behavior=UNLIMITED,
    )
    decision = _in_a_row(the_policy, 10, [{}])[0].decision
    assert decision.desired == 10
    assert decision.limited_by == (Limit.MISSING_METRIC, Limit.FALLBACK)


def test_given_only_metrics_with_a_fallback_fail_then_only_their_runs_are_kept() -> None:
    the_policy = _policy({"failureThreshold": 5, "replicas": 2})
    evaluation = _in_a_row(the_policy, 10, [{}, {}])[-1]  # both metrics missing, twice
    assert set(evaluation.failures.runs) == {"errors"}
    assert (evaluation.failures.runs["errors"].count, evaluation.failures.runs["errors"].since) == (
        2,
        T0,
    )


# Fallbacks named in the decision: each metric in fallback with its vote, a hold with the
# failures that led to it.


def fallback(replicas: int) -> dict[str, object]:
    return {"fallback": {"failureThreshold": 2, "replicas": replicas}}


def test_every_metric_in_fallback_is_named_with_its_vote() -> None:
    the_policy = policy(
        value_metric("errors", 10) | fallback(14),
        value_metric("latency", 10) | fallback(6),
        queue_metric("jobs", per_node=1),
        behavior=UNLIMITED,
    )
    rounds = [_readings(T0 + minutes(m), 1) for m in range(3)]
    decision = _in_a_row(the_policy, 10, rounds)[-1].decision
    assert decision.reason.endswith(
        " | errors in fallback replicas 14 → 14 since 2026-03-02 12:00:00Z; latency in "
        "fallback replicas 6 → 6 since 2026-03-02 12:00:00Z"
    )


def test_a_hold_keeps_the_failure_and_says_after_how_many() -> None:
    hold = {"fallback": {"failureThreshold": 2, "action": "hold"}}
    the_policy = policy(
        value_metric("errors", 10) | hold, queue_metric("jobs", per_node=1), behavior=UNLIMITED
    )
    rounds = [_readings(T0 + minutes(m), 1) for m in range(3)]
    decision = _in_a_row(the_policy, 10, rounds)[-1].decision
    assert decision.metrics[0].detail == (
        "CloudWatch returned no datapoint in the last 300s; fallback hold after 3 failures"
    )


def test_a_fallback_applies_whatever_metric_comes_before_it() -> None:
    the_policy = policy(
        queue_metric("jobs", per_node=1),
        value_metric("errors", 10) | fallback(14),
        behavior=UNLIMITED,
    )
    rounds = [_readings(T0 + minutes(m), 1) for m in range(3)]
    assert _in_a_row(the_policy, 10, rounds)[-1].decision.desired == 14

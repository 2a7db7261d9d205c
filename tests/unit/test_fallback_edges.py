"""Fallbacks named in the decision: each metric in fallback with its vote, a hold with
the failures that led to it."""

from __future__ import annotations

from tests.builders import T0, UNLIMITED, minutes, policy, queue_metric, value_metric
from tests.unit.test_fallback import _in_a_row, _readings


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

"""Rate policies at their edges: a rate that stops exactly at a bound names the bound, a
scale-in exactly at the rate is not limited, and percentages of large groups are exact."""

from __future__ import annotations

from typing import Any

from nodescaler.domain.scaling.decision import Limit

from tests.builders import policy, queue_metric, readings, run


def rate(direction: str, kind: str, value: int) -> dict[str, Any]:
    return {
        direction: {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": kind, "value": value, "periodSeconds": 60}],
        }
    }


def test_a_scale_up_rate_that_reaches_exactly_the_max_names_the_max() -> None:
    the_policy = policy(
        queue_metric("jobs", 4), max_replicas=5, behavior=rate("scaleUp", "Replicas", 2)
    )
    decision = run(the_policy, 3, readings(jobs=32)).decision
    assert (decision.desired, decision.limited_by) == (5, (Limit.MAX,))


def test_a_scale_in_exactly_as_far_as_the_rate_allows_is_not_limited() -> None:
    the_policy = policy(queue_metric("jobs", 4), behavior=rate("scaleDown", "Replicas", 1))
    decision = run(the_policy, 5, readings(jobs=16)).decision
    assert (decision.desired, decision.limited_by) == (4, ())


def test_a_scale_in_rate_that_reaches_exactly_the_min_names_the_min() -> None:
    the_policy = policy(
        queue_metric("jobs", 4), min_replicas=4, behavior=rate("scaleDown", "Replicas", 1)
    )
    decision = run(the_policy, 5, readings(jobs=8)).decision
    assert (decision.desired, decision.limited_by) == (4, (Limit.MIN,))


def test_a_percent_rate_of_a_large_group_adds_exactly_that_percent() -> None:
    the_policy = policy(
        queue_metric("jobs", 1), max_replicas=10_000, behavior=rate("scaleUp", "Percent", 20)
    )
    decision = run(the_policy, 1000, readings(jobs=5000)).decision
    assert decision.desired == 1200

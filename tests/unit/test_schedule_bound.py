"""A schedule's count is a lower bound on the group, not a demand the scale-down window remembers.

Issue 44: with the schedule's count in the window, a night batch's nodes stayed the whole
window after the entry ended although nothing had needed them since before it ended.
"""

from __future__ import annotations

from datetime import datetime

from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading

from tests.builders import T0, act, minutes, policy, queue_metric, run, value_metric


def schedule(replicas: int = 6) -> dict[str, object]:
    entry = {"name": "night", "start": "0 1 * * *", "end": "0 3 * * *", "replicas": replicas}
    return {"type": "Schedule", "schedule": {"entries": [entry]}}


NIGHTLY = policy(schedule(), {"type": "PendingPods"}, max_replicas=20)  # default behavior


def at(minute: int) -> datetime:
    return T0 + minutes(minute)


def night(minute: int, scheduled: int, *, empty: int = 0) -> dict[str, Reading]:
    """The schedule's count and pending pods' view: nothing pending, `empty` nodes spare."""
    when = at(minute)
    return {
        "schedule": MetricReading(value=scheduled, at=when),
        "pending-pods": MetricReading(value=0, at=when, unneeded_nodes=empty, empty_nodes=empty),
    }


def desired_by_minute(
    the_policy: object, current: int, steps: dict[int, dict[str, Reading]]
) -> dict[int, int]:
    """Runs the decisions minute by minute, acting on each; the sizes it asks for."""
    history, sizes = History(), {}
    for minute, given in steps.items():
        evaluation = run(the_policy, current, given, history, at(minute))  # type: ignore[arg-type]
        history = act(the_policy, evaluation)  # type: ignore[arg-type]
        current = sizes[minute] = evaluation.decision.desired
    return sizes


def test_given_the_nodes_empty_before_the_entry_ends_when_it_ends_then_they_go_at_once() -> None:
    # Given six scheduled nodes, the batch gone and its nodes empty from minute 0
    steps = {m: night(m, 6, empty=6) for m in range(0, 10)}
    # When the entry ends at minute 10
    steps |= {m: night(m, 0, empty=6) for m in range(10, 13)}
    sizes = desired_by_minute(NIGHTLY, 6, steps)
    # Then the schedule held them to its end, and nothing after it (not its own window more)
    assert [sizes[m] for m in range(0, 10)] == [6] * 10
    assert sizes[10] == 0


def test_given_demand_until_shortly_before_the_end_then_the_window_of_that_demand_decides() -> None:
    # Given pods on all eight nodes until minute 5 (pending pods abstains: the nodes are
    # needed), then empty
    steps = {m: night(m, 6) for m in range(0, 6)}
    steps |= {m: night(m, 6, empty=8) for m in range(6, 10)}
    # When the schedule's entry ends at minute 10
    steps |= {m: night(m, 0, empty=8) for m in range(10, 17)}
    sizes = desired_by_minute(NIGHTLY, 8, steps)
    # Then the demand's own window (600 s from its last need at minute 5) holds them to 15
    assert [sizes[m] for m in range(10, 15)] == [8] * 5
    assert sizes[15] == 0


def test_given_a_schedule_above_the_demand_then_it_raises_the_group_and_says_so() -> None:
    decision = run(NIGHTLY, 0, night(0, 6), History(), at(0)).decision
    assert (decision.desired, decision.recommendation) == (6, 6)
    assert "schedule: 6 against 1/replica → 6" in decision.reason
    assert decision.demand == 0  # the schedule's count is not learnt as demand


def test_given_another_metric_missing_then_the_schedule_still_raises_the_group() -> None:
    both = policy(schedule(), value_metric("a", 10), max_replicas=20)
    given = {"schedule": MetricReading(value=6, at=T0), "a": MetricUnavailable(reason="down")}
    decision = run(both, 2, given).decision
    assert decision.desired == 6
    assert Limit.MISSING_METRIC not in decision.limited_by


def test_given_another_metric_missing_then_the_group_never_falls_below_the_size() -> None:
    both = policy(schedule(), value_metric("a", 10), max_replicas=20)
    given = {"schedule": MetricReading(value=2, at=T0), "a": MetricUnavailable(reason="down")}
    decision = run(both, 6, given).decision
    assert (decision.desired, decision.limited_by) == (6, (Limit.MISSING_METRIC,))


def test_given_a_schedule_alone_then_it_is_the_demand_and_its_window_holds_as_the_hpas() -> None:
    # Given a policy whose only metric is its schedule: 10 nodes, then 2 from minute 1
    alone = policy(schedule(10), min_replicas=0, max_replicas=20)
    steps = {0: {"schedule": MetricReading(value=10, at=at(0))}}
    steps |= {m: {"schedule": MetricReading(value=2, at=at(m))} for m in range(1, 12)}
    sizes = desired_by_minute(alone, 10, steps)
    # Then the 10 stays in the 600 s window, as any metric's recommendation would
    assert [sizes[m] for m in range(0, 10)] == [10] * 10
    assert sizes[10] < 10


def test_given_a_schedule_within_tolerance_of_the_size_then_the_bound_is_its_own_count() -> None:
    # A bound is exact: 10 scheduled of 11 nodes holds 10 at least, never 11 for tolerance
    no_window = {"scaleDown": {"stabilizationWindowSeconds": 0}}
    both = policy(schedule(10), queue_metric("a", per_node=1), max_replicas=20, behavior=no_window)
    given = {"schedule": MetricReading(value=10, at=T0), "a": MetricReading(value=3, at=T0)}
    assert run(both, 11, given).decision.desired == 10

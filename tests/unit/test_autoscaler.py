"""The autoscaling function end to end: combining metrics, behavior, bounds and the decision record."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import pytest
from nodescaler.domain.scale_up.backoff import Backoff
from nodescaler.domain.scaling.autoscaler import Evaluation
from nodescaler.domain.scaling.decision import Limit, MetricStatus
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.history import History, ScaleEvent, TimedRecommendation
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading

from tests.builders import (
    EXACT,
    T0,
    UNLIMITED,
    act,
    minutes,
    policy,
    queue_metric,
    readings,
    reservation_metric,
    run,
    value_metric,
)
from tests.unit.test_forecast import predictive
from tests.unit.test_windows import with_windows

GPU_BURST = policy(
    queue_metric("jobs", per_node=4),
    min_replicas=0,
    max_replicas=600,
    behavior={
        "scaleUp": {"policies": [{"type": "Replicas", "value": 600, "periodSeconds": 60}]},
        "scaleDown": {
            "stabilizationWindowSeconds": 600,
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}],
        },
    },
)


# --- the reference design's worked examples ---------------------------------------------


def test_given_2400_queued_tasks_at_4_per_node_when_the_group_is_empty_then_it_goes_to_600_in_one_decision() -> (
    None
):
    decision = run(GPU_BURST, 0, readings(jobs=2400)).decision
    assert (decision.current, decision.desired) == (0, 600)
    assert decision.limited_by == ()
    assert decision.reason.startswith("scale up 0 → 600 | jobs: 2400 against 4/replica → 600")


def test_given_the_queue_is_drained_then_the_group_returns_to_0_once_the_scale_down_window_has_passed() -> (
    None
):
    first = run(GPU_BURST, 0, readings(jobs=2400))
    history = act(GPU_BURST, first)
    desired_by_minute = {}
    for minute in range(1, 12):
        now = T0 + minutes(minute)
        evaluation = run(GPU_BURST, 600, readings(now, jobs=0), history, now)
        history = evaluation.history
        desired_by_minute[minute] = evaluation.decision.desired
        if minute < 10:
            assert evaluation.decision.limited_by == (Limit.STABILIZATION,)
    # The 600 recommendation leaves the 600 s window exactly 10 minutes later, not before.
    assert desired_by_minute == {m: 600 for m in range(1, 10)} | {10: 0, 11: 0}


def test_given_11_one_core_pods_on_one_16_core_node_at_a_60_percent_target_then_it_scales_up() -> (
    None
):
    bob = policy(
        reservation_metric("cpu", 60),
        reservation_metric("memory", 60),
        min_replicas=1,
        max_replicas=10,
    )
    decision = run(
        bob, 1, readings(reservation_cpu=11 / 16 * 100, reservation_memory=11 / 20 * 100)
    ).decision
    assert decision.desired == 2
    assert [(m.name, m.recommendation) for m in decision.metrics] == [
        ("reservation-cpu", 2),
        ("reservation-memory", 1),
    ]


def test_given_9_pods_on_that_node_then_it_holds() -> None:
    bob = policy(
        reservation_metric("cpu", 60),
        reservation_metric("memory", 60),
        min_replicas=1,
        max_replicas=10,
    )
    assert (
        run(
            bob, 1, readings(reservation_cpu=9 / 16 * 100, reservation_memory=9 / 20 * 100)
        ).decision.desired
        == 1
    )


# --- several metrics ---------------------------------------------------------------------

TWO = policy(value_metric("a", 10), value_metric("b", 10), behavior=UNLIMITED, max_replicas=100)


@pytest.mark.parametrize(
    ("values", "expected", "limits"),
    [
        ({"a": 40, "b": 20}, 40, ()),  # highest recommendation wins
        ({"a": 5, "b": 5}, 5, ()),  # both agree on scale-in
        (
            {"a": 40, "b": MetricUnavailable(reason="no datapoints")},
            40,
            (),
        ),  # scale-up from what is there
        ({"a": 5, "b": MetricUnavailable(reason="no datapoints")}, 10, (Limit.MISSING_METRIC,)),
        ({"a": 5}, 10, (Limit.MISSING_METRIC,)),  # no reading at all is missing too
        ({}, 10, (Limit.MISSING_METRIC,)),  # all missing: nothing changes
        ({"a": 5, "b": math.nan}, 10, (Limit.MISSING_METRIC,)),
        ({"a": 5, "b": -3.0}, 10, (Limit.MISSING_METRIC,)),
        ({"a": 5, "b": math.inf}, 10, (Limit.MISSING_METRIC,)),
        ({"a": 10.5, "b": 10.2}, 10, (Limit.TOLERANCE,)),
    ],
)
def test_combining_metrics(
    values: dict[str, object], expected: int, limits: tuple[Limit, ...]
) -> None:
    given = {
        k: v if isinstance(v, MetricUnavailable) else MetricReading(value=v, at=T0)
        for k, v in values.items()
    }
    decision = run(TWO, 10, given).decision  # type: ignore[arg-type]
    assert (decision.desired, decision.limited_by) == (expected, limits)


PENDING_ALONE = policy({"type": "PendingPods"}, behavior=UNLIMITED, max_replicas=100)
WITH_PENDING = policy(value_metric("a", 10), {"type": "PendingPods"}, behavior=UNLIMITED)


def spare_nodes(unneeded: int) -> MetricReading:
    return MetricReading(value=0, at=T0, unneeded_nodes=unneeded)


def test_given_only_pending_pods_then_the_unneeded_nodes_go() -> None:
    decision = run(PENDING_ALONE, 10, {"pending-pods": spare_nodes(4)}).decision
    assert decision.desired == 6
    assert decision.metrics[0].status is MetricStatus.UNNEEDED


def test_given_another_metric_then_unneeded_nodes_neither_raise_nor_lower_its_vote() -> None:
    lower = run(
        WITH_PENDING, 10, {"a": MetricReading(value=2, at=T0), "pending-pods": spare_nodes(1)}
    )
    assert lower.decision.desired == 2  # not held at 9 by the nodes pending pods would keep
    higher = run(
        WITH_PENDING, 10, {"a": MetricReading(value=15, at=T0), "pending-pods": spare_nodes(8)}
    )
    assert higher.decision.desired == 15  # nor lowered below what the other metric asks


def test_given_a_stale_reading_then_it_counts_as_missing_and_blocks_scale_in() -> None:
    given = {"a": MetricReading(value=5, at=T0), "b": MetricReading(value=5, at=T0 - minutes(6))}
    decision = run(TWO, 10, given).decision
    assert decision.desired == 10
    assert [m.status for m in decision.metrics] == [MetricStatus.OK, MetricStatus.STALE]
    assert "b stale: last value is 360s old (limit 300s)" in decision.reason


def test_given_a_missing_metric_then_the_decision_says_which_and_why() -> None:
    decision = run(
        TWO,
        10,
        {"a": MetricReading(value=5, at=T0), "b": MetricUnavailable(reason="queue does not exist")},
    ).decision
    assert "b missing: queue does not exist" in decision.reason
    assert "no scale-in" in decision.reason


# --- bounds ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "value", "expected", "limits"),
    [
        (GroupSize(10), 10_000, 50, (Limit.MAX,)),
        (GroupSize(10), 0, 2, (Limit.MIN,)),
        (
            GroupSize(10, min_size=4, max_size=30),
            10_000,
            30,
            (Limit.MAX,),
        ),  # the ASG's own MaxSize wins
        (GroupSize(10, min_size=4, max_size=30), 0, 4, (Limit.MIN,)),  # and its MinSize
        (GroupSize(70), 700, 50, (Limit.MAX,)),  # outside the bounds: straight back in
        (GroupSize(1), 0, 2, (Limit.MIN,)),
    ],
)
def test_bounds(size: GroupSize, value: float, expected: int, limits: tuple[Limit, ...]) -> None:
    bounded = policy(value_metric("a", 10), min_replicas=2, max_replicas=50, behavior=UNLIMITED)
    decision = run(bounded, size.current, readings(a=value), size=size).decision
    assert (decision.desired, decision.limited_by) == (expected, limits)


# --- behavior: stabilization -------------------------------------------------------------


def _history(
    *recommendations: tuple[float, int], events: tuple[tuple[float, int], ...] = ()
) -> History:
    return History(
        recommendations=tuple(
            TimedRecommendation(at=T0 - minutes(m), replicas=r) for m, r in recommendations
        ),
        scale_events=tuple(ScaleEvent(at=T0 - minutes(m), change=c) for m, c in events),
    )


def _behavior(
    up: dict[str, object] | None = None, down: dict[str, object] | None = None
) -> dict[str, object]:
    return {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Percent", "value": 100000, "periodSeconds": 60}],
        }
        | (up or {}),
        "scaleDown": {
            "stabilizationWindowSeconds": 0,
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}],
        }
        | (down or {}),
    }


@pytest.mark.parametrize(
    ("case", "behavior", "history", "value", "expected", "limits"),
    [
        (
            "down window keeps the highest recent",
            _behavior(down={"stabilizationWindowSeconds": 300}),
            _history((4, 8), (2, 7)),
            5,
            8,
            (Limit.STABILIZATION,),
        ),
        (
            "down window forgets what is older",
            _behavior(down={"stabilizationWindowSeconds": 300}),
            _history((6, 9), (5, 8)),
            5,
            5,
            (),
        ),
        (
            "a sample exactly at the cutoff is outside",
            _behavior(down={"stabilizationWindowSeconds": 300}),
            _history((5, 9)),
            5,
            5,
            (),
        ),
        (
            "down window never goes above current",
            _behavior(down={"stabilizationWindowSeconds": 300}),
            _history((1, 20)),
            5,
            10,
            (Limit.STABILIZATION,),
        ),
        (
            "up window keeps the lowest recent",
            _behavior(up={"stabilizationWindowSeconds": 180}),
            _history((2, 12), (1, 15)),
            200,
            12,
            (Limit.STABILIZATION,),
        ),
        (
            "up window never goes below current",
            _behavior(up={"stabilizationWindowSeconds": 180}),
            _history((2, 3)),
            200,
            10,
            (Limit.STABILIZATION,),
        ),
        (
            "a group seen first starts from its current size",
            _behavior(down={"stabilizationWindowSeconds": 300}),
            History(),
            5,
            10,
            (Limit.STABILIZATION,),
        ),
        ("no window, no wait", _behavior(), History(), 5, 5, ()),
    ],
)
def test_stabilization(
    case: str,
    behavior: dict[str, object],
    history: History,
    value: float,
    expected: int,
    limits: tuple[Limit, ...],
) -> None:
    the_policy = policy(value_metric("a", 10), behavior=behavior)
    decision = run(
        the_policy, 10, readings(a=value), history
    ).decision  # a Value metric at 10 per replica: raw = value
    assert (decision.desired, decision.limited_by) == (expected, limits), case


def test_given_a_hold_for_a_missing_metric_then_nothing_is_recorded() -> None:
    the_policy = policy(
        value_metric("a", 10),
        value_metric("b", 10),
        behavior=_behavior(down={"stabilizationWindowSeconds": 300}),
    )
    history = _history((4, 12))
    evaluation = run(the_policy, 10, {"a": MetricReading(value=5, at=T0)}, history)
    assert evaluation.decision.desired == 10
    assert evaluation.history == history


def test_given_a_run_of_equal_recommendations_then_its_first_and_latest_are_kept() -> None:
    the_policy = policy(
        value_metric("a", 10), behavior=_behavior(down={"stabilizationWindowSeconds": 300})
    )
    history = _history((4, 8), (3, 9), (2, 8), (1, 8))
    after = run(the_policy, 10, readings(a=8), history).history
    kept = [(r.at, r.replicas) for r in after.recommendations]
    assert kept == [(T0 - minutes(4), 8), (T0 - minutes(3), 9), (T0 - minutes(2), 8), (T0, 8)]


def test_given_booting_nodes_then_value_and_utilization_scale_the_ready_ones() -> None:
    # 10 desired, 5 in service at 120% of a 60% reservation: 10 nodes are enough, not 20.
    the_policy = policy(
        reservation_metric("cpu", 60), value_metric("depth", 100), behavior=UNLIMITED
    )
    size = GroupSize(current=10, ready=5)
    decision = run(the_policy, 10, readings(reservation_cpu=120, depth=300), size=size).decision
    assert [m.recommendation for m in decision.metrics] == [10, 15]


def test_given_no_ready_node_then_utilization_abstains() -> None:
    the_policy = policy(reservation_metric("cpu", 60), behavior=UNLIMITED)
    decision = run(
        the_policy, 3, readings(reservation_cpu=0), size=GroupSize(current=3, ready=0)
    ).decision
    assert (decision.desired, decision.metrics[0].status) == (3, MetricStatus.ABSTAINED)


def test_every_raw_recommendation_is_remembered_and_old_ones_are_dropped() -> None:
    the_policy = policy(
        value_metric("a", 10), behavior=_behavior(down={"stabilizationWindowSeconds": 300})
    )
    history = _history((12, 6), (10, 3), (4, 8))
    after = run(the_policy, 10, readings(a=5), history).history
    # the one of 10 minutes ago was in force as the window began (5 minutes ago): kept
    kept = [(r.at, r.replicas) for r in after.recommendations]
    assert kept == [(T0 - minutes(10), 3), (T0 - minutes(4), 8), (T0, 5)]


# --- behavior: rate policies -------------------------------------------------------------


def _rates(
    up: list[dict[str, object]] | None = None,
    down: list[dict[str, object]] | None = None,
    up_select: str | None = None,
    down_select: str | None = None,
) -> dict[str, object]:
    behavior = _behavior()
    if up is not None:
        behavior["scaleUp"] = {"stabilizationWindowSeconds": 0, "policies": up} | (
            {"selectPolicy": up_select} if up_select else {}
        )
    if down is not None:
        behavior["scaleDown"] = {"stabilizationWindowSeconds": 0, "policies": down} | (
            {"selectPolicy": down_select} if down_select else {}
        )
    return behavior


def replicas(n: int, period: int = 60) -> dict[str, object]:
    return {"type": "Replicas", "value": n, "periodSeconds": period}


def percent(n: int, period: int = 60) -> dict[str, object]:
    return {"type": "Percent", "value": n, "periodSeconds": period}


@pytest.mark.parametrize(
    ("case", "behavior", "history", "value", "expected", "limits"),
    [
        (
            "replicas policy caps scale-up",
            _rates(up=[replicas(4)]),
            History(),
            1000,
            14,
            (Limit.SCALE_UP_RATE,),
        ),
        (
            "percent up rounds up",
            _rates(up=[percent(15)]),
            History(),
            1000,
            12,
            (Limit.SCALE_UP_RATE,),
        ),
        (
            "select Max takes the larger change",
            _rates(up=[replicas(4), percent(100)]),
            History(),
            1000,
            20,
            (Limit.SCALE_UP_RATE,),
        ),
        (
            "select Min takes the smaller change",
            _rates(up=[replicas(4), percent(100)], up_select="Min"),
            History(),
            1000,
            14,
            (Limit.SCALE_UP_RATE,),
        ),
        (
            "scale-up Disabled holds",
            _rates(up=[replicas(4)], up_select="Disabled"),
            History(),
            1000,
            10,
            (Limit.SCALING_DISABLED,),
        ),
        (
            "events inside the period use the allowance",
            _rates(up=[replicas(4)]),
            _history(events=((0.5, 3),)),
            1000,
            11,
            (Limit.SCALE_UP_RATE,),
        ),
        (
            "allowance used up holds",
            _rates(up=[replicas(4)]),
            _history(events=((0.5, 4),)),
            1000,
            10,
            (Limit.SCALE_UP_RATE,),
        ),
        (
            "events at the period's edge no longer count",
            _rates(up=[replicas(4)]),
            _history(events=((1, 4),)),
            1000,
            14,
            (Limit.SCALE_UP_RATE,),
        ),
        (
            "a scale-down inside the period gives allowance back",
            _rates(up=[replicas(4)]),
            _history(events=((0.5, -2),)),
            1000,
            16,
            (Limit.SCALE_UP_RATE,),
        ),
        (
            "max wins over a looser rate",
            _rates(up=[replicas(4000)]),
            History(),
            100_000,
            1000,
            (Limit.MAX,),
        ),
        (
            "replicas policy caps scale-down",
            _rates(down=[replicas(3)]),
            History(),
            0,
            7,
            (Limit.SCALE_DOWN_RATE,),
        ),
        (
            "percent down truncates",
            _rates(down=[percent(15)]),
            History(),
            0,
            8,
            (Limit.SCALE_DOWN_RATE,),
        ),
        (
            "select Max on the way down removes more",
            _rates(down=[replicas(1), percent(50)]),
            History(),
            0,
            5,
            (Limit.SCALE_DOWN_RATE,),
        ),
        (
            "select Min on the way down removes less",
            _rates(down=[replicas(1), percent(50)], down_select="Min"),
            History(),
            0,
            9,
            (Limit.SCALE_DOWN_RATE,),
        ),
        (
            "scale-down Disabled holds",
            _rates(down=[percent(100)], down_select="Disabled"),
            History(),
            0,
            10,
            (Limit.SCALING_DISABLED,),
        ),
        (
            "a desired count inside the allowance is untouched",
            _rates(down=[replicas(3)]),
            History(),
            8,
            8,
            (),
        ),
    ],
)
def test_rate_policies(
    case: str,
    behavior: dict[str, object],
    history: History,
    value: float,
    expected: int,
    limits: tuple[Limit, ...],
) -> None:
    the_policy = policy(value_metric("a", 10), behavior=behavior, max_replicas=1000)
    decision = run(the_policy, 10, readings(a=value), history).decision
    assert (decision.desired, decision.limited_by) == (expected, limits), case


@pytest.mark.parametrize(
    ("max_replicas", "ceiling", "expected", "limits"),
    [
        (2000, None, 1500, ()),  # every node the burst needs, in one decision
        (1000, None, 1000, (Limit.MAX,)),  # the group's max is the bound
        (2000, Ceiling(1200, "maximum of 1200 nodes"), 1200, (Limit.CLUSTER_LIMIT,)),
    ],
    ids=["all-at-once", "capped-by-max", "capped-by-cluster-limit"],
)
def test_given_no_behavior_when_a_burst_asks_for_1500_nodes_then_one_decision_gets_them(
    max_replicas: int, ceiling: Ceiling | None, expected: int, limits: tuple[Limit, ...]
) -> None:
    """Given a group of 100 nodes whose policy says no `behavior`, When 6,000 tasks land
    (4 a node: 1,500 nodes), Then one decision asks for all of them, bounded by the group's
    max and the cluster's limits only: Cluster Autoscaler sizes a group for all its
    unschedulable pods in one scan (its FAQ, "How does scale-up work?", and its binpacking
    `estimator`), with no per-minute rate."""
    the_policy = policy(queue_metric("jobs", per_node=4), max_replicas=max_replicas)
    decision = run(the_policy, 100, readings(jobs=6000), ceiling=ceiling).decision
    assert (decision.desired, decision.limited_by) == (expected, limits)


def test_given_the_default_behavior_then_scale_in_waits_10_minutes_then_sheds_20_percent_or_5_a_minute() -> (
    None
):
    the_policy = policy(queue_metric("jobs", per_node=4), max_replicas=600)
    history, current, path = History(), 100, []
    for minute in range(14):
        now = T0 + minutes(minute)
        value = 400 if minute == 0 else 0
        evaluation = run(the_policy, current, readings(now, jobs=value), history, now)
        history, current = act(the_policy, evaluation), evaluation.decision.desired
        path.append(current)
    assert path == [100] * 10 + [80, 64, 51, 40]


# --- the decision record -----------------------------------------------------------------


def test_the_decision_carries_every_input_and_the_reason() -> None:
    the_policy = policy(
        queue_metric("jobs", per_node=4),
        reservation_metric("cpu", 60),
        max_replicas=500,
        name="batch",
        behavior={"scaleUp": {"policies": [replicas(100)]}},
    )
    decision = run(
        the_policy,
        4,
        {"jobs": MetricReading(value=4000, at=T0, detail="3800 visible + 200 in flight")},
    ).decision
    assert decision.model_dump(mode="json", exclude={"metrics"}) == {
        "node_group": "ng-test",
        "policy": "batch",
        "policy_version": "deployed",  # the evaluator sets a stored policy's version
        "at": "2026-03-02T12:00:00Z",
        "current": 4,
        "desired": 104,  # its scale-up allows +100 a minute
        "in_service": 4,
        "min_replicas": 0,
        "max_replicas": 500,
        "recommendation": 1000,
        "limited_by": ["scale-up-rate"],
        "reason": "scale up 4 → 104 | jobs: 3800 visible + 200 in flight → 1000 | reservation-cpu missing: no reading was produced | limited by the scale-up rate",
        "backoff": None,
        "protected": 0,
        "cluster_limit": "",
        "scale_in_window": "",
        "kept_recently_needed": "",
        "demand": None,  # a metric is missing: the group's demand is not known
        "warm_pool": None,  # no forecast with warmPool: no warm pool sized
        "warm_pool_note": "",
        "paused": "",  # no pause in force
        "would_desire": None,
        "group_bounds": "",  # the ASG's own bounds, no EKS scalingConfig
    }
    jobs, cpu = decision.metrics
    assert (jobs.value, jobs.target, jobs.recommendation, jobs.usage_ratio, jobs.status) == (
        4000,
        "4/replica",
        1000,
        250,  # 4000 tasks against 4 per node on 4 nodes
        MetricStatus.OK,
    )
    assert (cpu.value, cpu.target, cpu.recommendation, cpu.status) == (
        None,
        "60%",
        None,
        MetricStatus.MISSING,
    )
    assert decision.direction == "up"
    assert decision.change == 100


def test_nodes_in_service_over_the_desired_count_say_where_their_reason_is() -> None:
    # 9 in service for 3 desired, for hours after nodescaler's scale-in, while the
    # termination policy keeps 6 whose pods' budget allows no eviction: "hold at 3" alone
    # left a user with nothing to read
    queue = policy(queue_metric("jobs", 4))
    scaled_in = History(last_change=ScaleEvent(at=T0 - minutes(300), change=-6))
    nine = GroupSize(current=3, ready=9)
    kept = run(queue, 3, readings(jobs=12), scaled_in, size=nine).decision
    assert kept.reason == (
        "hold at 3 | jobs: 12 against 4/replica → 3 | 6 in service over the desired 3 leave "
        "as the termination policy frees them (the terminate function logs what keeps each)"
    )
    # an excess nodescaler did not ask for (an instance refresh launching first), nodes
    # booting, or a scale-up: nothing said
    said = "in service over"
    assert said not in run(queue, 3, readings(jobs=12), size=nine).decision.reason
    booting = GroupSize(current=3, ready=1)
    assert said not in run(queue, 3, readings(jobs=12), scaled_in, size=booting).decision.reason
    assert said not in run(queue, 3, readings(jobs=40), scaled_in, size=nine).decision.reason


def test_the_same_inputs_give_the_same_decision() -> None:
    first = run(GPU_BURST, 3, readings(jobs=100))
    second = run(GPU_BURST, 3, readings(jobs=100))
    assert first == second


def test_the_reason_names_the_metric_that_asks_most_and_every_broken_one() -> None:
    three = policy(queue_metric("jobs", 4), queue_metric("mail", 10), queue_metric("sms", 10))
    assert run(three, 5, readings(jobs=40, mail=150, sms=20)).decision.reason == (
        "scale up 5 → 15 | mail: 150 against 10/replica → 15"
    )
    assert run(three, 5, readings(jobs=8)).decision.reason == (
        "hold at 5 | jobs: 8 against 4/replica → 2 | mail missing: no reading was produced; "
        "sms missing: no reading was produced | a metric is missing, stale or invalid, so no "
        "scale-in"
    )


# --- a missing metric: only nodes empty of pods in the cluster's own view go -----------------

QUEUE_WITH_PENDING = policy(queue_metric("jobs", per_node=4), {"type": "PendingPods"})


def empty_and_spare(empty: int, unneeded: int | None = None, at: datetime = T0) -> MetricReading:
    spare = empty if unneeded is None else unneeded
    return MetricReading(value=0, at=at, unneeded_nodes=spare, empty_nodes=empty)


def test_given_the_queue_metric_missing_and_empty_nodes_then_only_they_go_after_the_window() -> (
    None
):
    # Given 16 nodes, 6 of them empty of pods by the cluster's own view, the queue unread
    history = History()
    desired = {}
    for minute in range(12):
        now = T0 + minutes(minute)
        given: dict[str, Reading] = {
            "jobs": MetricUnavailable(reason="CloudWatch is down"),
            "pending-pods": empty_and_spare(6, unneeded=9, at=now),  # 3 more could move
        }
        evaluation = run(QUEUE_WITH_PENDING, 16, given, history, now)
        history = evaluation.history
        desired[minute] = evaluation.decision.desired
    # Then nothing goes within the scale-down window, and then the 6 empty nodes at once
    # (none of the 3 whose pods would have to move): the default rate binds no empty node
    assert desired == {m: 16 for m in range(10)} | {10: 10, 11: 10}
    assert Limit.EMPTY_ONLY in evaluation.decision.limited_by
    assert "only nodes empty of pods go" in evaluation.decision.reason


def test_given_a_missing_metric_and_no_empty_node_then_the_group_holds_and_records_nothing() -> (
    None
):
    given = {"jobs": MetricUnavailable(reason="down"), "pending-pods": empty_and_spare(0, 4)}
    evaluation = run(QUEUE_WITH_PENDING, 16, given)  # type: ignore[arg-type]
    assert evaluation.decision.desired == 16
    assert evaluation.decision.limited_by == (Limit.MISSING_METRIC,)
    assert evaluation.history == History()


def test_given_a_missing_metric_then_empty_nodes_never_go_below_a_live_metrics_vote() -> None:
    two = policy(
        queue_metric("jobs", per_node=4),
        value_metric("a", 10),
        {"type": "PendingPods"},
        behavior=UNLIMITED,
    )
    given = {
        "jobs": MetricUnavailable(reason="down"),
        "a": MetricReading(value=8.75, at=T0),  # 16 × 8.75 / 10: 14 nodes
        "pending-pods": empty_and_spare(6),
    }
    decision = run(two, 16, given).decision  # type: ignore[arg-type]
    assert decision.desired == 14


def test_given_a_user_written_scale_down_rate_then_empty_nodes_keep_to_it() -> None:
    slow = policy(
        {"type": "PendingPods"},
        behavior={
            "scaleDown": {
                "stabilizationWindowSeconds": 0,
                "policies": [{"type": "Replicas", "value": 1, "periodSeconds": 60}],
            }
        },
    )
    decision = run(slow, 16, {"pending-pods": empty_and_spare(6)}).decision
    assert decision.desired == 15


def test_given_healthy_metrics_and_empty_nodes_then_the_default_rate_does_not_hold_them() -> None:
    # 16 nodes, 12 empty, the queue at 0 for the whole window: the default rate (5 nodes or
    # 20 % a minute) would keep 11; empty nodes evict nothing, so all 12 go at once, and the
    # 4 whose workers still run only at the default rate (none: they are within 5)
    pending_only = policy({"type": "PendingPods"})
    history = History()
    for minute in range(11):
        now = T0 + minutes(minute)
        given = {"pending-pods": empty_and_spare(12, at=now)}
        evaluation = run(pending_only, 16, given, history, now)
        history = evaluation.history
    assert evaluation.decision.desired == 4


def test_given_the_pods_packing_then_a_scale_in_keeps_to_it_beyond_the_nodes_found_unneeded() -> (
    None
):
    # Given 16 nodes, the queue asking for 2 (8 tasks), and pending pods finding 4 nodes
    # unneeded (their pods fit elsewhere) while its packing of the group's pods says 16
    queue_only = policy(
        queue_metric("jobs", per_node=4), {"type": "PendingPods"}, behavior=UNLIMITED
    )
    spare = MetricReading(value=0, at=T0, unneeded_nodes=4, empty_nodes=1, needed_nodes=16)
    decision = run(
        queue_only, 16, {"jobs": MetricReading(value=8, at=T0), "pending-pods": spare}
    ).decision
    # Then the 4 unneeded nodes go, and no more: the rest hold pods that have nowhere to go
    assert decision.desired == 12
    assert Limit.PODS_NEED_NODES in decision.limited_by
    # And where the packing needs fewer, the queue's own count is the floor's limit
    fewer = spare.model_copy(update={"needed_nodes": 5})
    decision = run(
        queue_only, 16, {"jobs": MetricReading(value=8, at=T0), "pending-pods": fewer}
    ).decision
    assert decision.desired == 5


def test_given_empty_nodes_past_the_default_rate_then_the_minimum_still_holds() -> None:
    at_least_10 = policy({"type": "PendingPods"}, min_replicas=10)
    history = History()
    for minute in range(11):
        now = T0 + minutes(minute)
        given = {"pending-pods": empty_and_spare(12, at=now)}
        evaluation = run(at_least_10, 16, given, history, now)
        history = evaluation.history
    assert evaluation.decision.desired == 10


# The decision at its edges: which limit it names and when, the group's own bounds, what a
# forecast or a failing metric may hold, and the one line `explain` gives.


EKS = "EKS scalingConfig"


def outcome(evaluation: Evaluation, name: str) -> Any:
    (found,) = [o for o in evaluation.decision.metrics if o.name == name]
    return found


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
        "hold at 5 | jobs: 8 against 4/replica → 2 | held by the scale-down window: no lower "
        "than its highest recommendation of the last 600s"
    )


def test_a_scale_in_the_window_cut_short_says_it_went_only_so_far() -> None:
    # Given a group at 13 whose queue now asks for 2, and 11 recommended 4 minutes ago
    the_policy = policy(queue_metric("jobs", 4))  # a 600 s scale-down window
    history = _history((4, 11))
    decision = run(the_policy, 13, readings(jobs=8), history=history).decision
    # Then it scales in to 11, saying the window let it go that far and no further
    assert (decision.desired, decision.limited_by) == (11, (Limit.STABILIZATION,))
    assert decision.reason == (
        "scale down 13 → 11 | jobs: 8 against 4/replica → 2 | only as far as the scale-down "
        "window: no lower than its highest recommendation of the last 600s"
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


def test_the_demand_is_the_pods_need_before_it_rounds_up_to_whole_nodes() -> None:
    # Given pending pods whose pods need 7.5 nodes' worth (8 whole nodes)
    reading = MetricReading(value=0, at=T0, needed_nodes=8, needed_share=7.5)
    the_policy = policy({"type": "PendingPods"}, queue_metric("jobs", 4), behavior=UNLIMITED)
    # When a queue asks for 7 and the pods for 8 whole nodes
    evaluation = run(the_policy, 8, {"pending-pods": reading, **readings(jobs=28)})
    # Then the demand a forecast learns is the pods' 7.5, not 8 whole nodes
    assert evaluation.decision.demand == 7.5
    # and a metric asking for more than their share is the demand
    more = run(the_policy, 8, {"pending-pods": reading, **readings(jobs=36)})
    assert more.decision.demand == 9


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

"""The proportional function per metric: HPA object/external-metric semantics, plus scale from zero."""

from __future__ import annotations

from typing import Any

import pytest
from nodescaler.domain.scaling.proportional import Tolerances, recommend

from tests.builders import metric, queue_metric, reservation_metric, value_metric

DEFAULT = Tolerances(up=0.1, down=0.1)


CASES = [
    # (case, metric spec, value, current, tolerances, expected replicas, held by tolerance)
    # AverageValue: ceil(value / target), tolerance on value / (target × current)
    ("queue 2400 at 4/node from 0", queue_metric(per_node=4), 2400, 0, DEFAULT, 600, False),
    ("queue 2400 at 4/node from 10", queue_metric(per_node=4), 2400, 10, DEFAULT, 600, False),
    ("queue empty from 600", queue_metric(per_node=4), 0, 600, DEFAULT, 0, False),
    ("queue 1 message from 0", queue_metric(per_node=4), 1, 0, DEFAULT, 1, False),
    ("queue empty at 0 stays 0", queue_metric(per_node=4), 0, 0, DEFAULT, 0, False),
    ("average ratio 1.1 is within", queue_metric(per_node=4), 44, 10, DEFAULT, 10, True),
    ("average ratio 1.125 is outside", queue_metric(per_node=4), 45, 10, DEFAULT, 12, False),
    ("average ratio 0.9 is within", queue_metric(per_node=4), 36, 10, DEFAULT, 10, True),
    ("average ratio 0.875 is outside", queue_metric(per_node=4), 35, 10, DEFAULT, 9, False),
    (
        "zero tolerance acts on any change",
        queue_metric(per_node=4),
        41,
        10,
        Tolerances(0, 0),
        11,
        False,
    ),
    (
        "per-direction: wide up tolerance holds",
        queue_metric(per_node=4),
        56,
        10,
        Tolerances(0.5, 0.0),
        10,
        True,
    ),
    (
        "per-direction: zero down tolerance acts",
        queue_metric(per_node=4),
        39,
        10,
        Tolerances(0.5, 0.0),
        10,
        False,
    ),
    (
        "per-direction: zero down tolerance acts below",
        queue_metric(per_node=4),
        36,
        10,
        Tolerances(0.5, 0.0),
        9,
        False,
    ),
    # Value: ceil(value / target × current)
    ("value double the target doubles", value_metric("depth", 100), 200, 5, DEFAULT, 10, False),
    ("value half the target halves", value_metric("depth", 100), 50, 5, DEFAULT, 3, False),
    ("value within tolerance holds", value_metric("depth", 100), 105, 5, DEFAULT, 5, True),
    ("value from zero is ceil(ratio)", value_metric("depth", 100), 250, 0, DEFAULT, 3, False),
    (
        "value from zero, within tolerance, still scales",
        value_metric("depth", 100),
        105,
        0,
        DEFAULT,
        2,
        False,
    ),
    ("value zero from zero stays zero", value_metric("depth", 100), 0, 0, DEFAULT, 0, False),
    # Utilization: the same on percentages (the reference design's reservation example)
    (
        "11 of 16 cores at 60% target",
        reservation_metric("cpu", 60),
        11 / 16 * 100,
        1,
        DEFAULT,
        2,
        False,
    ),
    (
        "9 of 16 cores at 60% target",
        reservation_metric("cpu", 60),
        9 / 16 * 100,
        1,
        DEFAULT,
        1,
        False,
    ),
    (
        "11 of 20 GB at 60% target",
        reservation_metric("memory", 60),
        11 / 20 * 100,
        1,
        DEFAULT,
        1,
        False,
    ),
    (
        "30% on 10 nodes at 60% target halves",
        reservation_metric("cpu", 60),
        30,
        10,
        DEFAULT,
        5,
        False,
    ),
    # Exact arithmetic: no float noise turns 600 into 601
    ("exact multiple stays exact", queue_metric(per_node=0.1), 60, 0, DEFAULT, 600, False),
]


@pytest.mark.parametrize(
    ("spec", "value", "current", "tolerances", "expected", "held"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_recommendation_table(
    spec: dict[str, Any],
    value: float,
    current: int,
    tolerances: Tolerances,
    expected: int,
    held: bool,
) -> None:
    result = recommend(metric(spec), value, current, tolerances)
    assert (result.replicas, result.held_by_tolerance) == (expected, held)


PENDING = {"type": "PendingPods"}


@pytest.mark.parametrize(
    ("needed", "current", "expected"), [(3, 0, 3), (3, 5, 8), (0.5, 2, 3), (0, 7, None)]
)
def test_pending_pods_add_what_is_needed_and_abstain_when_nothing_is_pending(
    needed: float, current: int, expected: int | None
) -> None:
    assert recommend(metric(PENDING), needed, current, DEFAULT).replicas == expected


def test_pending_pods_ignore_tolerance() -> None:
    # One pending node on a group of 100 is 1%: still added, pods are waiting.
    assert recommend(metric(PENDING), 1, 100, DEFAULT).replicas == 101


def test_a_value_that_overflows_saturates_instead_of_failing() -> None:
    result = recommend(metric(value_metric("depth", 0.01)), 1.7976931348623157e306, 0, DEFAULT)
    assert result.replicas == 2**31 - 1


# A utilization of the Ready nodes while others boot (the pdb-scale-in scenario found it:
# 4 measured of 6 in service at 81 % asked for 9 nodes, then 10, for a load needing 6).
MEASURED_CASES = [
    # (case, value %, current, ready, measured, expected)
    ("booting nodes add no usage on the way up", 81.25, 6, 6, 4, 6),
    ("more load than the booting nodes cover", 120, 6, 6, 4, 8),
    ("booting nodes count as at target on the way down", 30, 6, 6, 4, 4),
    ("over target never scales in", 70, 6, 6, 1, 6),
    ("under target never scales out", 50, 2, 6, 1, 2),
    ("all measured: the plain rule", 81.25, 6, 6, 6, 9),
]


@pytest.mark.parametrize(
    ("value", "current", "ready", "measured", "expected"),
    [case[1:] for case in MEASURED_CASES],
    ids=[case[0] for case in MEASURED_CASES],
)
def test_a_utilization_scales_the_nodes_it_measured(
    value: float, current: int, ready: int, measured: int, expected: int
) -> None:
    result = recommend(
        metric(reservation_metric("cpu", 60)), value, current, DEFAULT, ready, measured=measured
    )
    assert result.replicas == expected


def test_pending_pods_with_nothing_pending_vote_to_shed_the_unneeded_nodes() -> None:
    result = recommend(metric(PENDING), 0, 7, DEFAULT, unneeded=3)
    assert (result.replicas, result.unneeded) == (4, True)
    assert recommend(metric(PENDING), 0, 2, DEFAULT, unneeded=5).replicas == 0  # never below 0
    assert recommend(metric(PENDING), 0, 7, DEFAULT, unneeded=0).replicas is None  # abstains
    assert recommend(metric(PENDING), 2, 7, DEFAULT, unneeded=3).replicas == 9  # pods first
    # a scale-in under way (desired 1, 3 nodes still Ready): counted from the nodes there
    assert recommend(metric(PENDING), 0, 1, DEFAULT, 3, unneeded=2).replicas == 1
    assert recommend(metric(PENDING), 0, 1, DEFAULT, 3, unneeded=1).replicas == 1  # never up


# One metric's recommendation at its edges: nodes in service but not yet measured.


def test_a_value_with_nothing_in_service_sizes_for_the_value_alone() -> None:
    made = recommend(metric(value_metric("load", 100)), 250, 3, DEFAULT, ready=0)
    assert (made.replicas, made.usage_ratio) == (3, 2.5)


def test_a_value_scales_the_nodes_in_service_not_the_size() -> None:
    made = recommend(metric(value_metric("load", 100)), 300, 1, DEFAULT, ready=2)
    assert made.replicas == 6


def test_a_utilization_measured_over_more_nodes_than_ready_frees_no_extra_room() -> None:
    cpu = metric(reservation_metric("cpu", 60))
    made = recommend(cpu, 30, 4, DEFAULT, ready=4, measured=5)  # half the target on 5
    assert made.replicas == 3

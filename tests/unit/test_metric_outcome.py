"""One metric's outcome before the metrics are combined: what it read, when, how old, and
what it asks for — every field as the decision record shows it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nodescaler.domain.scaling.decision import MetricOutcome, MetricStatus
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.metric_outcome import evaluate_metric
from nodescaler.domain.scaling.proportional import Tolerances
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable

from tests.builders import T0, metric, queue_metric, reservation_metric

JOBS = metric(queue_metric("jobs", per_node=4))  # stale after 300 s
CPU = metric(reservation_metric("cpu", 50))
TOLERANCE = Tolerances(up=0.1, down=0.1)


def outcome(reading: MetricReading | MetricUnavailable | None, **size: int) -> MetricOutcome:
    group = GroupSize(**({"current": 5} | size))
    return evaluate_metric(JOBS, reading, group, T0, TOLERANCE)


def test_a_fresh_reading_is_judged_against_its_target_with_every_field_recorded() -> None:
    reading = MetricReading(value=40, at=T0 - timedelta(seconds=30))
    assert outcome(reading) == MetricOutcome(
        name=JOBS.key,
        type="SQSQueue",
        target="4/replica",
        value=40,
        at=T0 - timedelta(seconds=30),
        recommendation=10,
        usage_ratio=2.0,
        status=MetricStatus.OK,
        detail="40 against 4/replica",
    )


def test_a_producers_own_detail_is_kept() -> None:
    reading = MetricReading(value=40, at=T0, detail="jobs: 40 visible")
    assert outcome(reading).detail == "jobs: 40 visible"


def test_within_tolerance_the_group_holds_and_says_so() -> None:
    held = outcome(MetricReading(value=21, at=T0))  # 21 / (4 × 5) = 1.05
    assert (held.status, held.recommendation, held.usage_ratio, held.value) == (
        MetricStatus.HELD_BY_TOLERANCE,
        5,
        1.05,
        21,
    )
    assert held.detail == "21 against 4/replica: within tolerance"


@pytest.mark.parametrize(
    ("age", "status"),
    [(300, MetricStatus.OK), (301, MetricStatus.STALE), (-60, MetricStatus.OK), (-61, None)],
)
def test_a_reading_is_stale_past_its_limit_and_invalid_past_a_minute_ahead(
    age: int, status: MetricStatus | None
) -> None:
    reading = MetricReading(value=40, at=T0 - timedelta(seconds=age))
    judged = outcome(reading)
    assert judged.value == 40 and judged.at == reading.at
    if status is None:
        assert judged.status is MetricStatus.INVALID
        assert judged.detail == "dated 61s in the future"
        assert judged.recommendation is None
    else:
        assert judged.status is status
    if status is MetricStatus.STALE:
        assert judged.detail == "last value is 301s old (limit 300s)"
        assert judged.recommendation is None


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_an_unusable_value_is_invalid_and_not_recorded_as_a_value(value: float) -> None:
    judged = outcome(MetricReading(value=value, at=T0))
    assert (judged.status, judged.value, judged.recommendation) == (
        MetricStatus.INVALID,
        None,
        None,
    )
    assert judged.detail == f"unusable value {value!r}"


def test_no_reading_or_a_typed_absence_is_missing_with_its_reason() -> None:
    assert (outcome(None).status, outcome(None).detail, outcome(None).at) == (
        MetricStatus.MISSING,
        "no reading was produced",
        None,
    )
    gone = outcome(MetricUnavailable(reason="queue jobs does not exist"))
    assert (gone.status, gone.detail, gone.value) == (
        MetricStatus.MISSING,
        "queue jobs does not exist",
        None,
    )


def test_a_utilization_over_fewer_nodes_than_are_in_service_counts_only_those_measured() -> None:
    # 100 % of 2 measured nodes, 4 in service: the 2 booting ones add no usage
    reading = MetricReading(value=100, at=T0, measured_nodes=2)
    judged = evaluate_metric(CPU, reading, GroupSize(current=4, ready=4), T0, TOLERANCE)
    assert (judged.recommendation, judged.usage_ratio) == (4, 2.0)
    unmeasured = MetricReading(value=100, at=T0)  # all 4 measured: 8 nodes
    judged = evaluate_metric(CPU, unmeasured, GroupSize(current=4, ready=4), T0, TOLERANCE)
    assert judged.recommendation == 8


def test_a_utilization_of_an_empty_group_abstains_keeping_what_it_read() -> None:
    judged = evaluate_metric(CPU, MetricReading(value=0, at=T0), GroupSize(0), T0, TOLERANCE)
    assert (judged.status, judged.value, judged.recommendation) == (
        MetricStatus.ABSTAINED,
        0,
        None,
    )
    assert judged.detail == "0 against 50%: nothing to add"

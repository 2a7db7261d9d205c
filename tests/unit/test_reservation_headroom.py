"""A reservation's headroom sized by the demand: `headroom: fromArrivals` keeps room for the
pods a boot time of arrivals brings, at least, and at most the room its target keeps.

Issue 44, item 2: a fixed 60 % target kept three nodes of room for 37 minutes in a cluster
where no pod came.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.ahead.arrivals import Arrivals, sized_by_arrivals, sized_reservations
from nodescaler.domain.policy import CapacityReservationMetric
from pydantic import ValidationError

from tests.builders import T0, policy, readings, reservation_metric, run

T = datetime(2026, 11, 23, 8, tzinfo=UTC)
BOOT = timedelta(minutes=3)
SOURCE = "p90 of the last 5 cold launches"


def from_arrivals(resource: str = "cpu", percent: float = 60) -> dict[str, object]:
    metric = reservation_metric(resource, percent)
    metric["capacityReservation"] = {"resource": resource, "headroom": "fromArrivals"}
    return metric


def microservices(*metrics: dict[str, object]) -> object:
    return policy(
        *(metrics or (from_arrivals("cpu"), from_arrivals("memory"))),
        {"type": "PendingPods"},
        min_replicas=1,
        max_replicas=50,
    )


def targets(sized: object) -> list[float]:
    return [
        m.target.amount
        for m in sized.spec.metrics  # type: ignore[attr-defined]
        if isinstance(m, CapacityReservationMetric)
    ]


@pytest.mark.parametrize(
    ("arrivals", "target", "why"),
    [
        (Arrivals(66, T, 0.0), 100, "quiet: no room kept, the pods packed"),
        (Arrivals(66, T, 22.0), 60, "66 pods in a boot time: more than 60 % keeps, so 60 %"),
        # 5 a minute × 3 minutes = 15 pods of 66: room for them is 15/66 of the pods' requests
        (Arrivals(66, T, 5.0), 81.4, "100 / (1 + 15 / 66) = 81.48, rounded towards room"),
        (Arrivals(), 60, "nothing counted yet: the written target's room"),
        (Arrivals(0, T, 5.0), 60, "no pods to size a pod's room from: the written target's"),
    ],
)
def test_the_target_keeps_room_for_a_boot_time_of_arrivals_within_the_written_targets(
    arrivals: Arrivals, target: float, why: str
) -> None:
    sized, note = sized_reservations(microservices(), arrivals, BOOT, SOURCE, T)  # type: ignore[arg-type]
    assert targets(sized) == [target, target], why
    assert note.startswith(
        f"headroom from arrivals: {arrivals.per_minute:.2f} pods/min × 3.0 min boot ({SOURCE})"
    )
    assert f"reservation-cpu {target:g}% (60% written)" in note


@pytest.mark.parametrize(
    ("minutes", "target"),
    [
        (0, 60),  # first counted now: the written room
        # 66 × (100 / 60 - 1) × e^-2 = 5.95 pods of room: 100 / (1 + 5.95 / 66) = 91.7
        (30, 91.7),
        (240, 100),  # forgotten: quiet, so packed
    ],
)
def test_until_a_rate_is_learnt_the_written_room_is_forgotten_as_a_rate_is(
    minutes: int, target: float
) -> None:
    quiet = Arrivals(66, T + timedelta(minutes=minutes), 0.0, since=T)
    sized, _ = sized_reservations(microservices(), quiet, BOOT, SOURCE, quiet.at)  # type: ignore[arg-type]
    assert targets(sized) == [target, target]


def test_a_reservation_with_its_targets_room_is_left_as_it_is() -> None:
    fixed = microservices(reservation_metric("cpu", 60))
    assert sized_reservations(fixed, Arrivals(66, T, 0.0), BOOT, SOURCE, T) == (fixed, "")  # type: ignore[arg-type]


def test_given_a_quiet_cluster_spread_at_56_percent_then_the_group_packs_its_pods() -> None:
    # Given 66 pods spread over 7 nodes at 56 % of their CPU, none arriving lately
    quiet = Arrivals(66, T, 0.0)
    sized, _ = sized_by_arrivals(microservices(), quiet, BOOT, SOURCE, T)  # type: ignore[arg-type]
    given = readings(T0, reservation_cpu=56, reservation_memory=40, pending_pods=0)
    # Then the group needs 4 nodes (3.92 nodes' worth of requests), where 60 % holds 7
    decision = run(sized, 7, given).decision
    assert decision.recommendation == 4
    written = run(microservices(), 7, given).decision  # type: ignore[arg-type]
    assert written.recommendation == 7


def test_given_pods_arriving_fast_then_the_written_target_still_holds_its_room() -> None:
    busy = Arrivals(66, T, 30.0)
    sized, _ = sized_by_arrivals(microservices(), busy, BOOT, SOURCE, T)  # type: ignore[arg-type]
    given = readings(T0, reservation_cpu=97.6, reservation_memory=50, pending_pods=0)
    assert run(sized, 4, given).decision.desired == 7  # ceil(0.976 / 0.6 × 4)


def test_buffers_and_reservations_are_sized_together_and_both_said() -> None:
    both = policy(
        from_arrivals("cpu"),
        {
            "type": "PendingPods",
            "pendingPods": {
                "buffer": [{"fromArrivals": {"maxPods": 40}, "requests": {"cpu": "1"}}]
            },
        },
    )
    _, note = sized_by_arrivals(both, Arrivals(66, T, 5.0), BOOT, SOURCE, T)
    assert "buffer from arrivals: " in note
    assert "headroom from arrivals: " in note


@pytest.mark.parametrize(
    ("metrics", "error"),
    [
        (
            [{**from_arrivals(), "target": {"type": "AverageValue", "averageValue": 60}}],
            "headroom fromArrivals sizes the room of a Utilization target",
        ),
        (
            [from_arrivals()],
            r"metrics\[0\]: capacityReservation.headroom fromArrivals needs a PendingPods metric",
        ),
        (
            [
                {
                    **from_arrivals(),
                    "capacityReservation": {"resource": "cpu", "headroom": "arrivals"},
                },
                {"type": "PendingPods"},
            ],
            "Input should be 'target' or 'fromArrivals'",
        ),
    ],
)
def test_a_headroom_that_cannot_be_sized_is_refused_naming_the_field(
    metrics: list[dict[str, object]], error: str
) -> None:
    with pytest.raises(ValidationError, match=error):
        policy(*metrics)

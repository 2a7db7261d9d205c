"""Quantities and capacity reservation: the reference design's arithmetic, table-tested."""

from __future__ import annotations

from decimal import Decimal

import pytest
from nodescaler.domain.cluster.quantity import parse_quantity
from nodescaler.domain.cluster.reservation import reservation
from nodescaler.domain.cluster.snapshot import Node, Pod, Resources
from nodescaler.domain.policy import ReservationResource
from nodescaler.domain.policy import ReservationResource as Resource
from nodescaler.errors import QuantityError, ReservationError

GIB = 2**30


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", Decimal(2)),
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        ("1Ki", Decimal(1024)),
        ("20Gi", Decimal(20 * GIB)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
        ("128974848", Decimal(128974848)),
        (3, Decimal(3)),
    ],
)
def test_quantities_parse_as_the_api_server_writes_them(text: str | int, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "12x", "one", "1.2.3Gi", "-1", "Gi"])
def test_a_malformed_quantity_is_refused(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_resources_round_cpu_up_to_whole_millicores() -> None:
    assert Resources.parse({"cpu": "0.0001", "memory": "1Mi"}) == Resources(1, 2**20, 0)


def nodes(count: int, group: str = "ng", **changes: object) -> list[Node]:
    base = dict(
        group=group, ready=True, schedulable=True, allocatable=Resources(16000, 20 * GIB, 110)
    )
    return [Node(name=f"{group}-{i}", **(base | changes)) for i in range(count)]  # type: ignore[arg-type]


def pods_on(
    node: str, count: int, cpu: int = 1000, memory: int = GIB, **changes: object
) -> list[Pod]:
    return [
        Pod("default", f"{node}-p{i}", node, Resources(cpu, memory, 1), **changes)  # type: ignore[arg-type]
        for i in range(count)
    ]


def test_the_reference_example_11_one_core_pods_on_a_16_core_node() -> None:
    result = reservation("ng", nodes(1), pods_on("ng-0", 11), Resource.CPU)
    assert (result.requested, result.allocatable, result.percent) == (11000, 16000, 68.75)
    assert result.detail == "11 pods request 11 of 16 cores on 1 nodes (68.8%)"
    memory = reservation("ng", nodes(1), pods_on("ng-0", 11), Resource.MEMORY)
    assert memory.percent == 55.0
    assert reservation("ng", nodes(1), pods_on("ng-0", 11), Resource.PODS).percent == 10.0


def test_cordoned_and_not_ready_nodes_count_on_neither_side() -> None:
    group = nodes(1)
    cordoned = Node(
        "ng-c", "ng", ready=True, schedulable=False, allocatable=Resources(16000, GIB, 110)
    )
    not_ready = Node(
        "ng-n", "ng", ready=False, schedulable=True, allocatable=Resources(16000, GIB, 110)
    )
    pods = [*pods_on("ng-0", 8), *pods_on("ng-c", 16), *pods_on("ng-n", 16)]
    result = reservation("ng", [*group, cordoned, not_ready], pods, Resource.CPU)
    assert (result.nodes, result.pods, result.percent) == (1, 8, 50.0)


def test_terminal_pods_and_other_groups_do_not_count() -> None:
    pods = [*pods_on("ng-0", 4), *pods_on("ng-0", 4, phase="Succeeded"), *pods_on("other-0", 9)]
    result = reservation("ng", [*nodes(1), *nodes(1, group="other")], pods, Resource.CPU)
    assert result.pods == 4


def test_daemon_set_and_mirror_pods_are_counted_unless_the_policy_says_not() -> None:
    pods = [
        *pods_on("ng-0", 2),
        *pods_on("ng-0", 1, daemon_set=True),
        *pods_on("ng-0", 1, mirror=True),
    ]
    assert reservation("ng", nodes(1), pods, Resource.CPU).pods == 4
    without = reservation(
        "ng", nodes(1), pods, Resource.CPU, include_daemon_sets=False, include_mirror_pods=False
    )
    assert without.pods == 2


def test_a_group_without_schedulable_nodes_has_no_percentage() -> None:
    assert reservation("ng", [], [], Resource.CPU).percent is None


def test_an_unreadable_pod_on_the_group_makes_its_reservation_unknown() -> None:
    broken = Pod(
        "jobs", "bad", "ng-0", Resources(), problem="requests.cpu: '12x' is not a quantity"
    )
    with pytest.raises(ReservationError) as caught:
        reservation("ng", nodes(1), [broken], Resource.CPU)
    assert str(caught.value) == (
        "node group ng: pod jobs/bad: requests.cpu: '12x' is not a quantity"
    )
    # the same pod elsewhere does not affect this group
    elsewhere = Pod("jobs", "bad", "other-0", Resources(), problem="x")
    assert reservation("ng", nodes(1), [elsewhere], Resource.CPU).pods == 0


# At the edge: pods left out of a reservation do not end the count.


def test_pods_left_out_of_a_reservation_do_not_end_the_count() -> None:
    first_out = [
        *pods_on("other-0", 1),
        *pods_on("ng-0", 1, daemon_set=True),
        *pods_on("ng-0", 3),
    ]
    counted = reservation(
        "ng", nodes(1), first_out, ReservationResource.CPU, include_daemon_sets=False
    )
    assert counted.pods == 3

"""The reserved-first expander: capacity reservations with room go first, before price or
waste; a reservation that can't be counted is no room, and the plan says why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nodescaler.adapters.aws.capacity_reservations import Target, room_of, target_of
from nodescaler.domain.scale_up.expanders import (
    LeastWasteExpander,
    PriorityExpander,
    ReservedFirstExpander,
    ReservedRoom,
)
from nodescaler.domain.scale_up.pending_pods_plan import plan

from tests.unit.test_expanders import pods, template

# cheap-ng is the priority expander's first choice and wastes least (bigger pods fill it)
TEMPLATES = {"cheap-ng": template("cheap-ng", cores=2), "reserved-ng": template("reserved-ng")}
CHEAP_FIRST = PriorityExpander({10: ["cheap-ng"], 1: [".*"]})


def rooms_of(rooms: Mapping[str, ReservedRoom]) -> ReservedFirstExpander:
    def read(groups: Sequence[str]) -> Mapping[str, ReservedRoom]:
        return {g: r for g, r in rooms.items() if g in groups}

    return ReservedFirstExpander(read)


def test_given_a_group_with_reserved_room_then_its_pods_go_there_before_the_cheaper_one() -> None:
    reserved = rooms_of({"reserved-ng": ReservedRoom(3, ("cr-1",))})
    result = plan(pods(8), TEMPLATES, [reserved, CHEAP_FIRST, LeastWasteExpander()])
    # 8 one-core pods on 4-core nodes: 2 nodes, within the 3 reserved instances unused
    assert dict(result.nodes) == {"reserved-ng": 2}
    assert result.notes["reserved-ng"] == "reserved-first: 3 reserved instances unused (cr-1)"


def test_given_no_group_with_reserved_room_then_the_next_expander_decides() -> None:
    reserved = rooms_of({"reserved-ng": ReservedRoom(0, ("cr-1",))})
    result = plan(pods(8), TEMPLATES, [reserved, CHEAP_FIRST])
    assert dict(result.nodes) == {"cheap-ng": 4}


def test_given_too_little_reserved_room_for_all_then_the_group_with_the_most_goes_first() -> None:
    small = ReservedFirstExpander(
        lambda groups: {"cheap-ng": ReservedRoom(1, ("cr-a",)), "reserved-ng": ReservedRoom(2)}
    )
    # 40 one-core pods: 20 two-core nodes or 10 four-core ones, more than either holds
    result = plan(pods(40), TEMPLATES, [small, CHEAP_FIRST])
    assert dict(result.nodes) == {"reserved-ng": 10}


def test_given_a_reservation_that_does_not_exist_then_the_group_is_not_preferred_and_why() -> None:
    reserved = rooms_of({"reserved-ng": ReservedRoom(why_none="reservation cr-404 does not exist")})
    result = plan(pods(8), TEMPLATES, [reserved, CHEAP_FIRST])
    assert dict(result.nodes) == {"cheap-ng": 4}
    assert result.notes["reserved-ng"] == (
        "reserved-first: no reserved room: reservation cr-404 does not exist"
    )


def test_given_reservations_that_fail_to_read_then_the_plan_goes_on_without_them() -> None:
    def broken(groups: Sequence[str]) -> Mapping[str, ReservedRoom]:
        raise RuntimeError("EC2 is down")

    result = plan(pods(8), TEMPLATES, [ReservedFirstExpander(broken), CHEAP_FIRST])
    assert dict(result.nodes) == {"cheap-ng": 4}
    assert "expander reserved-first failed (EC2 is down)" in result.trace[0]


def test_a_launch_template_targets_a_reservation_a_capacity_block_or_open_ones() -> None:
    # https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateCapacityReservationSpecificationRequest.html
    by_id = {
        "CapacityReservationSpecification": {
            "CapacityReservationTarget": {"CapacityReservationId": "cr-1"}
        }
    }
    block = {"InstanceMarketOptions": {"MarketType": "capacity-block"}}
    only = {
        "InstanceType": "p5.48xlarge",
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only"
        },
    }
    none = {
        "InstanceType": "m5.large",
        "CapacityReservationSpecification": {"CapacityReservationPreference": "none"},
    }
    assert target_of(by_id) == Target(reservation_id="cr-1")
    assert target_of(block | by_id) == Target(reservation_id="cr-1")
    assert (
        target_of(block).problem == "its launch template asks for a Capacity Block but names none"
    )  # type: ignore[union-attr]
    assert target_of(only) == Target(instance_type="p5.48xlarge")
    assert (target_of(none), target_of({})) == (None, None)


def test_only_active_reservations_count_and_open_ones_match_by_instance_type() -> None:
    listed = [
        {"CapacityReservationId": "cr-1", "State": "expired", "AvailableInstanceCount": 4},
        {"CapacityReservationId": "cr-2", "State": "active", "AvailableInstanceCount": 2,
         "InstanceMatchCriteria": "open", "InstanceType": "m5.large"},
        {"CapacityReservationId": "cr-3", "State": "active", "AvailableInstanceCount": 5,
         "InstanceMatchCriteria": "targeted", "InstanceType": "m5.large"},
    ]  # fmt: skip
    assert room_of(Target(reservation_id="cr-1"), listed).why_none == "reservation cr-1 is expired"
    assert room_of(Target(reservation_id="cr-3"), listed) == ReservedRoom(5, ("cr-3",))
    assert room_of(Target(instance_type="m5.large"), listed) == ReservedRoom(2, ("cr-2",))
    assert room_of(Target(reservation_id="cr-3"), "AccessDenied").why_none == (
        "capacity reservations could not be read (AccessDenied)"
    )


def test_a_reservation_whose_count_is_not_a_count_gives_no_room_and_says_why() -> None:
    # Given reservations answering a negative, a text, a boolean or a missing id
    def listed(count: object) -> list[dict[str, object]]:
        return [
            {"CapacityReservationId": "cr-1", "State": "active", "AvailableInstanceCount": count}
        ]

    # Then each is no room, named, rather than a negative room, a crash or a guess
    for count in (-5, "7", True, 2.5, None):
        room = room_of(Target(reservation_id="cr-1"), listed(count))
        assert room.unused == 0 and room.why_none == (
            f"reservation cr-1 says {count!r} instances available, not a count"
        )
    gone = [{"State": "active", "AvailableInstanceCount": 3, "InstanceMatchCriteria": "open",
             "InstanceType": "m5.large"}]  # fmt: skip
    assert room_of(Target(instance_type="m5.large"), gone) == ReservedRoom(3, ("None",))


def test_a_launch_templates_reservation_target_is_named_bounded_on_one_line() -> None:
    hostile = "cr-\x1b[2J" + "x" * 5000
    spec = {"CapacityReservationSpecification": {"CapacityReservationTarget": {}}}
    spec["CapacityReservationSpecification"]["CapacityReservationTarget"] = {
        "CapacityReservationResourceGroupArn": hostile
    }
    target = target_of(spec)
    assert target is not None and target.problem.isprintable() and len(target.problem) < 400
    room = room_of(
        target_of(
            {
                "CapacityReservationSpecification": {
                    "CapacityReservationTarget": {"CapacityReservationId": hostile}
                }
            }
        )
        or Target(),
        [],
    )
    assert room.why_none.isprintable() and len(room.why_none) < 400

"""Ec2ReservedCapacity against moto, with the sandbox's capacity reservations (which moto
lacks): each group's unused reserved instances, read once per batch, and a reservation
that can't be counted named, never raised."""

from __future__ import annotations

from typing import Any

from nodescaler.adapters.aws.capacity_reservations import Ec2ReservedCapacity
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.scale_up.expanders import ReservedRoom
from nodescaler_sandbox.capacity_reservations import CapacityReservations

from tests.aws import REGION, CallCounter, client, make_asg, refusing
from tests.builders import VirtualClock

OPTED_IN = {"nodescaler/enabled": "true", "nodescaler/policy": "batch"}


def group_launching(name: str, **data: Any) -> None:
    """A managed group whose launch template carries `data` (m5.large unless it says)."""
    client("ec2").create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData={"InstanceType": "m5.large", "ImageId": "ami-12c6146b"} | data,
    )
    make_asg(name, tags=OPTED_IN, launch_template=name)


def targeting(reservation_id: str) -> dict[str, Any]:
    target = {"CapacityReservationId": reservation_id}
    return {"CapacityReservationSpecification": {"CapacityReservationTarget": target}}


def reader(
    calls: CallCounter, clock: VirtualClock
) -> tuple[Ec2ReservedCapacity, CapacityReservations, Any]:
    ec2 = calls.watch(client("ec2"))
    reservations = CapacityReservations()
    reservations.watch(ec2)
    groups = AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames())
    return Ec2ReservedCapacity(ec2, groups, clock=clock), reservations, ec2


def test_given_reservations_then_each_group_reports_what_its_template_targets_left_unused(
    calls: CallCounter,
) -> None:
    # AvailableInstanceCount: the instances a reservation can still launch; only an active
    # reservation launches any, an open one any matching instance without a target
    # https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservations.html
    # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-reservations-launch.html
    # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html
    rooms, reservations, _ = reader(calls, VirtualClock())
    odcr = reservations.reserve("m5.large", f"{REGION}a", 4, used=1)
    block = reservations.reserve("p5.48xlarge", f"{REGION}a", 2, capacity_block=True)
    reservations.reserve("c5.large", f"{REGION}a", 3, targeted=False)
    expired = reservations.reserve("m5.large", f"{REGION}a", 5, state="expired")
    group_launching("odcr-ng", **targeting(odcr))
    group_launching(
        "block-ng",
        InstanceType="p5.48xlarge",
        InstanceMarketOptions={"MarketType": "capacity-block"},
        **targeting(block),
    )
    open_preference = {"CapacityReservationPreference": "open"}
    group_launching(
        "open-ng", InstanceType="c5.large", CapacityReservationSpecification=open_preference
    )
    group_launching("missing-ng", **targeting("cr-0000000000000404a"))
    group_launching("expired-ng", **targeting(expired))
    group_launching("plain-ng")

    found = rooms(["odcr-ng", "block-ng", "open-ng", "missing-ng", "expired-ng", "plain-ng"])

    assert found == {
        "odcr-ng": ReservedRoom(3, (odcr,)),
        "block-ng": ReservedRoom(2, (block,)),
        "open-ng": ReservedRoom(3, found["open-ng"].reservations),
        "missing-ng": ReservedRoom(why_none="reservation cr-0000000000000404a does not exist"),
        "expired-ng": ReservedRoom(why_none=f"reservation {expired} is expired"),
    }


def test_given_a_batch_of_evaluations_then_reservations_are_read_once_until_the_ttl(
    calls: CallCounter,
) -> None:
    clock = VirtualClock()
    rooms, _, _ = reader(calls, clock)
    group_launching("a-ng", **targeting("cr-0000000000000001a"))
    group_launching("b-ng", **targeting("cr-0000000000000002a"))
    for _ in range(5):
        rooms(["a-ng", "b-ng"])
    assert calls.calls["DescribeCapacityReservations"] == 1
    clock.advance(seconds=16)
    rooms(["a-ng"])
    assert calls.calls["DescribeCapacityReservations"] == 2
    # the templates' targets are kept longer: the next batch reads none of them again
    assert calls.calls["DescribeLaunchTemplateVersions"] == 2


def test_given_reservations_refused_then_each_group_has_no_room_and_says_why(
    calls: CallCounter,
) -> None:
    rooms, _, ec2 = reader(calls, VirtualClock())
    group_launching("odcr-ng", **targeting("cr-0000000000000001a"))
    with refusing(ec2, "ec2", "DescribeCapacityReservations"):
        found = rooms(["odcr-ng"])
    assert found == {
        "odcr-ng": ReservedRoom(why_none="capacity reservations could not be read (AccessDenied)")
    }

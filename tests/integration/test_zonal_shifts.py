"""ArcZonalShifts against moto (EC2's zones and the Auto Scaling groups) and the sandbox's
ARC zonal shift API (which moto lacks): the shifts in force, read once per batch, zone
names mapped to the IDs the shifts name, and a refused or unreachable API named, never
raised. Only the shifts of the cluster's resources count: each is read with
GetManagedResource, which the supplement answers as AWS documents it
(https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_GetManagedResource.html), with
ListZonalShifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListZonalShifts.html)
and ListAutoshifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListAutoshifts.html).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.zonal_shifts import ArcZonalShifts
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.groups.zonal_shift import zone_hold
from nodescaler_sandbox.zonal_shifts import CLUSTER_ARN, ArcZonalShiftApi

from tests.aws import REGION, CallCounter, client, make_asg
from tests.builders import VirtualClock


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def reader(calls: CallCounter, clock: VirtualClock) -> tuple[ArcZonalShifts, ArcZonalShiftApi]:
    arc = calls.watch(client("arc-zonal-shift"))
    api = ArcZonalShiftApi(clock)
    api.watch(arc)
    shifts = ArcZonalShifts(
        lambda: arc, calls.watch(client("ec2")), resources=[CLUSTER_ARN], clock=clock
    )
    return shifts, api


def zone_id(name: str) -> str:
    zones = client("ec2").describe_availability_zones()["AvailabilityZones"]
    return next(str(z["ZoneId"]) for z in zones if z["ZoneName"] == name)


def test_given_a_zonal_shift_away_from_a_groups_zone_then_the_group_read_is_held(
    calls: CallCounter, clock: VirtualClock
) -> None:
    # Given an Auto Scaling group in {region}a, and a zonal shift away from that zone's ID
    # (zone names map to different IDs in each account: moto's eu-west-1a is not az1)
    make_asg("gpu", tags={"nodescaler/enabled": "true"})
    group = AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()).get("gpu")
    assert group is not None and group.zones == (f"{REGION}a",)
    shifts, api = reader(calls, clock)
    away = zone_id(f"{REGION}a")
    shift_id = api.start_zonal_shift(away, timedelta(hours=1))

    # When the shifts in force are read
    known = shifts.in_force()

    # Then the group's zone, by its ID, is shifted away by that shift until its expiry
    hold = zone_hold(group.zones, known, clock.now())
    assert hold is not None and hold.scale_up and hold.scale_in
    assert hold.why == (
        f"its zone {away} is shifted away (zonal shift {shift_id} on cluster/prod, expires "
        f"{clock.now() + timedelta(hours=1):%Y-%m-%d %H:%M:%S}Z)"
    )


def test_the_shifts_are_read_once_per_batch_and_expired_or_cancelled_ones_are_not_in_force(
    calls: CallCounter, clock: VirtualClock
) -> None:
    shifts, api = reader(calls, clock)
    away = zone_id(f"{REGION}b")
    api.start_zonal_shift(away, timedelta(minutes=5))
    cancelled = api.start_zonal_shift(zone_id(f"{REGION}c"), timedelta(hours=1))
    api.cancel_zonal_shift(cancelled)

    # Read by every evaluation of a batch: one call for the cluster's one resource
    for _ in range(3):
        assert [s.away_from for s in shifts.in_force().shifts] == [away]
    assert calls.calls["GetManagedResource"] == 1

    # Once it expires (EXPIRED, no longer ACTIVE) and the batch's read is old, none is in force
    clock.advance(minutes=6)
    assert shifts.in_force().shifts == ()


def test_an_autoshift_in_force_is_read_without_an_expiry(
    calls: CallCounter, clock: VirtualClock
) -> None:
    shifts, api = reader(calls, clock)
    api.manage(CLUSTER_ARN, autoshift=True)  # zonal autoshift enabled on the cluster
    api.start_autoshift(zone_id(f"{REGION}a"))

    (autoshift,) = shifts.in_force().shifts

    assert autoshift.expires is None
    assert autoshift.name.startswith("autoshift on cluster/prod started")
    assert zone_hold((f"{REGION}a",), shifts.in_force(), clock.now()) is not None


def test_given_the_api_refused_then_the_read_names_why_and_raises_nothing(
    calls: CallCounter, clock: VirtualClock
) -> None:
    shifts, api = reader(calls, clock)
    api.refuse("AccessDeniedException")  # as IAM refuses a role without the action
    assert shifts.in_force().unreadable == "AccessDeniedException"


def test_given_the_api_unreachable_then_scale_in_is_held_and_scale_up_is_not(
    calls: CallCounter, clock: VirtualClock
) -> None:
    shifts, api = reader(calls, clock)
    api.unreachable()
    assert shifts.in_force().unreadable == "EndpointConnectionError"
    hold: Any = zone_hold((f"{REGION}a",), shifts.in_force(), clock.now())
    assert hold.scale_in and not hold.scale_up  # no scale-in on doubt; capacity still comes


def test_given_a_malformed_answer_then_the_read_names_it_and_raises_nothing(
    calls: CallCounter, clock: VirtualClock
) -> None:
    # Given a shift listed without the zone it shifts away from
    shifts, api = reader(calls, clock)
    shift_id = api.start_zonal_shift(zone_id(f"{REGION}a"), timedelta(hours=1))
    del api.zonal_shifts[shift_id]["awayFrom"]

    # Then the read says so: scale-in held on that doubt, nothing raised
    assert shifts.in_force().unreadable == "a malformed answer: KeyError 'awayFrom'"


def test_given_shifts_on_other_resources_then_none_is_in_force_for_the_cluster(
    calls: CallCounter, clock: VirtualClock
) -> None:
    # Given another team's practice run and zonal shift on their own load balancer, and an
    # autoshift applied to it (its zonal autoshift on; the cluster's off)
    shifts, api = reader(calls, clock)
    theirs = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/billing/7e1"
    api.manage(theirs, autoshift=True)
    api.manage(CLUSTER_ARN)
    api.start_zonal_shift(
        zone_id(f"{REGION}a"), timedelta(minutes=30), resource=theirs, shift_type="PRACTICE_RUN"
    )
    api.start_zonal_shift(zone_id(f"{REGION}b"), timedelta(days=3), resource=theirs)
    api.start_autoshift(zone_id(f"{REGION}c"))

    # When the cluster's shifts are read, then none is in force for it
    assert shifts.in_force().shifts == ()
    assert zone_hold((f"{REGION}a",), shifts.in_force(), clock.now()) is None
    # though ListZonalShifts lists both, each naming its resource, as AWS does
    listed = client("arc-zonal-shift")
    api.watch(listed)
    items = listed.list_zonal_shifts(status="ACTIVE")["items"]
    assert [i["resourceIdentifier"] for i in items] == [theirs, theirs]
    assert listed.list_zonal_shifts(resourceIdentifier=CLUSTER_ARN)["items"] == []

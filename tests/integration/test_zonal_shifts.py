"""ArcZonalShifts against moto (EC2's zones and the Auto Scaling groups) and the sandbox's
ARC zonal shift API (which moto lacks): the shifts in force, read once per batch, zone
names mapped to the IDs the shifts name, and a refused or unreachable API named, never
raised. The supplement answers as AWS documents ListZonalShifts
(https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListZonalShifts.html) and
ListAutoshifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListAutoshifts.html).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.zonal_shifts import ArcZonalShifts
from nodescaler.domain.optin import TagNames
from nodescaler.domain.zonal_shift import zone_hold
from nodescaler_sandbox.zonal_shifts import ArcZonalShiftApi

from tests.aws import REGION, CallCounter, client, make_asg
from tests.builders import VirtualClock


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def reader(calls: CallCounter, clock: VirtualClock) -> tuple[ArcZonalShifts, ArcZonalShiftApi]:
    arc = calls.watch(client("arc-zonal-shift"))
    api = ArcZonalShiftApi(clock)
    api.watch(arc)
    return ArcZonalShifts(lambda: arc, calls.watch(client("ec2")), clock=clock), api


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
        f"its zone {away} is shifted away (zonal shift {shift_id}, expires "
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

    # Read by every evaluation of a batch: one call to each API
    for _ in range(3):
        assert [s.away_from for s in shifts.in_force().shifts] == [away]
    assert (calls.calls["ListZonalShifts"], calls.calls["ListAutoshifts"]) == (1, 1)

    # Once it expires (EXPIRED, no longer ACTIVE) and the batch's read is old, none is in force
    clock.advance(minutes=6)
    assert shifts.in_force().shifts == ()


def test_an_autoshift_in_force_is_read_without_an_expiry(
    calls: CallCounter, clock: VirtualClock
) -> None:
    shifts, api = reader(calls, clock)
    api.start_autoshift(zone_id(f"{REGION}a"))

    (autoshift,) = shifts.in_force().shifts

    assert autoshift.expires is None and autoshift.name.startswith("autoshift started")
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

"""Zonal shifts at their edges: zones without a known ID, and a group at its bounds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nodescaler.domain.groups.zonal_shift import ZonalShift, ZonalShifts, hold_for_zones, zone_hold
from nodescaler.domain.scaling.autoscaler import GroupSize
from nodescaler.domain.scaling.decision import Limit

from tests.builders import EXACT, T0, policy, queue_metric, readings, run


def test_zones_whose_ids_are_unknown_are_each_named_by_their_own_name() -> None:
    shifts = ZonalShifts(
        (ZonalShift("zone-a", "autoshift"), ZonalShift("zone-b", "autoshift")), zone_ids={}
    )
    hold = zone_hold(("zone-a", "zone-b"), shifts, T0)
    assert hold is not None
    assert hold.why == ("all its zones are shifted away: zone-a (autoshift), zone-b (autoshift)")


@pytest.mark.parametrize(("current", "jobs"), [(2, 40), (10, 8)])  # at its min, at its max
def test_a_group_at_a_bound_is_held_by_its_shifted_zone(current: int, jobs: float) -> None:
    the_policy = policy(queue_metric("jobs", 4), min_replicas=2, max_replicas=10, behavior=EXACT)
    decision = run(the_policy, current, readings(jobs=jobs), size=GroupSize(current)).decision
    assert decision.desired != current
    shift = ZonalShift("use1-az1", "zonal shift zs-1", T0 + timedelta(hours=1))
    hold = zone_hold(("us-east-1a",), ZonalShifts((shift,), {"us-east-1a": "use1-az1"}), T0)
    held = hold_for_zones(decision, hold)
    assert held.desired == current
    assert Limit.ZONAL_SHIFT in held.limited_by


def test_all_zones_shifted_away_hold_both_directions() -> None:
    shifts = ZonalShifts(
        (ZonalShift("zone-a", "autoshift"), ZonalShift("zone-b", "autoshift")), zone_ids={}
    )
    hold = zone_hold(("zone-a", "zone-b"), shifts, T0)
    assert hold is not None and (hold.scale_up, hold.scale_in) == (True, True)


def test_a_shift_is_over_at_its_expiry() -> None:
    shift = ZonalShift("use1-az1", "zonal shift zs-1", T0)
    assert zone_hold(("us-east-1a",), ZonalShifts((shift,), {"us-east-1a": "use1-az1"}), T0) is None


def test_a_decision_that_changes_nothing_is_not_held_by_its_zones() -> None:
    the_policy = policy(queue_metric("jobs", 4), behavior=EXACT)
    decision = run(the_policy, 4, readings(jobs=16), size=GroupSize(4)).decision
    shift = ZonalShift("use1-az1", "zonal shift zs-1", T0 + timedelta(hours=1))
    hold = zone_hold(("us-east-1a",), ZonalShifts((shift,), {"us-east-1a": "use1-az1"}), T0)
    assert hold_for_zones(decision, hold) == decision

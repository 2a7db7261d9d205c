"""Impaired zones (`domain.groups.zonal_shift`): a group confined to zones shifted away by an ARC
zonal shift or autoshift gets no scale-up and no voluntary scale-in, as Karpenter stops
launching into and voluntarily disrupting in a shifted zone
(https://karpenter.sh/docs/concepts/disruption/ and the ARC zonal shift docs:
https://docs.aws.amazon.com/r53recovery/latest/dg/arc-zonal-shift.html). When the shifts
can't be read: no scale-in on that doubt, a scale-up still goes ahead."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Pod, Resources
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.zonal_shift import (
    ZonalShift,
    ZonalShifts,
    confined,
    hold_for_zones,
    zone_hold,
)
from nodescaler.domain.scale_up.expanders import PriorityExpander
from nodescaler.domain.scale_up.pending_pods_plan import plan as expanders_plan
from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.plan import Facts, plan
from nodescaler.domain.scaling.readings import MetricReading

from tests.builders import EXACT, T0, UNLIMITED, policy, queue_metric, readings, run

NOW = datetime(2026, 11, 26, 9, tzinfo=UTC)
IDS = {"us-east-1a": "use1-az1", "us-east-1b": "use1-az2"}
SHIFT_1A = ZonalShift("use1-az1", "zonal shift zs-1", NOW + timedelta(hours=2))
IN_1A = NodeGroup("gpu-1a", 4, 0, 10, 4, zones=("us-east-1a",))
WEB = policy(queue_metric("jobs", per_node=4), behavior=UNLIMITED, name="web")


def shifted(*shifts: ZonalShift) -> ZonalShifts:
    return ZonalShifts(shifts, IDS)


def facts(group: NodeGroup, jobs: float, known: ZonalShifts) -> Facts:
    """The group's queue holds `jobs` (4 a node); the shifts as read."""
    history = History().with_recommendation(NOW, group.desired, keep_seconds=0)
    return Facts(
        group,
        WEB,
        GroupState(group.name, history=history),
        NOW,
        readings={"jobs": MetricReading(value=jobs, at=NOW, candidates=("gpu-1a-node",))},
        zones=zone_hold(group.zones, known, NOW),
    )


def test_given_a_group_confined_to_a_shifted_zone_then_scale_up_and_in_are_held() -> None:
    # Given a zonal shift away from use1-az1 (us-east-1a), the group's only zone
    hold = zone_hold(("us-east-1a",), shifted(SHIFT_1A), NOW)

    # Then both directions are held, named by zone id, shift and expiry
    assert hold is not None and hold.scale_up and hold.scale_in
    assert hold.why == (
        "its zone use1-az1 is shifted away (zonal shift zs-1, expires 2026-11-26 11:00:00Z)"
    )


def test_given_a_group_only_partly_in_the_shifted_zone_then_nothing_is_held() -> None:
    # Given a group in us-east-1a and us-east-1b, only use1-az1 shifted away
    # Then it may grow (Auto Scaling launches into 1b) and shrink as usual
    assert zone_hold(("us-east-1a", "us-east-1b"), shifted(SHIFT_1A), NOW) is None
    # ... and with both its zones shifted away it is confined again
    both = shifted(SHIFT_1A, ZonalShift("use1-az2", "autoshift"))
    hold = zone_hold(("us-east-1a", "us-east-1b"), both, NOW)
    assert hold is not None and hold.scale_up
    assert hold.why.startswith("all its zones are shifted away: use1-az1 (zonal shift zs-1")


def test_given_an_expired_shift_then_the_zone_is_no_longer_held() -> None:
    expired = dataclasses.replace(SHIFT_1A, expires=NOW - timedelta(seconds=1))
    assert zone_hold(("us-east-1a",), shifted(expired), NOW) is None


def test_given_an_autoshift_in_force_then_the_confined_group_is_held() -> None:
    # An autoshift has no expiry of its own: AWS ends it once the zone recovers
    hold = zone_hold(("us-east-1a",), shifted(ZonalShift("use1-az1", "autoshift")), NOW)
    assert hold is not None and hold.scale_up and hold.scale_in
    assert hold.why == "its zone use1-az1 is shifted away (autoshift)"


def test_given_the_shifts_unreadable_then_scale_in_is_held_and_scale_up_allowed() -> None:
    hold = zone_hold(("us-east-1b",), ZonalShifts(unreadable="AccessDeniedException"), NOW)
    assert hold is not None and hold.scale_in and not hold.scale_up
    assert "zonal shifts could not be read (AccessDeniedException)" in hold.why


def test_the_expanders_leave_out_only_the_confined_groups() -> None:
    groups = [("gpu-1a", ("us-east-1a",)), ("gpu-1b", ("us-east-1b",))]
    assert list(confined(groups, shifted(SHIFT_1A), NOW)) == ["gpu-1a"]
    # a refused read leaves every group an option: capacity still comes
    assert confined(groups, ZonalShifts(unreadable="AccessDenied"), NOW) == {}


def test_given_a_confined_group_when_a_queue_asks_for_more_then_the_plan_holds_it() -> None:
    # Given gpu-1a at 4 nodes, its queue asking for 8, its zone shifted away
    planned = plan(facts(IN_1A, 32, shifted(SHIFT_1A)))

    # Then it stays at 4, the zonal shift named as the limit and in the reason
    assert planned.decision.desired == 4 and not planned.grows
    assert Limit.ZONAL_SHIFT in planned.decision.limited_by
    assert planned.decision.would_desire == 8
    assert "its zone use1-az1 is shifted away (zonal shift zs-1" in planned.decision.reason


def test_given_a_confined_group_with_spare_nodes_then_no_voluntary_scale_in() -> None:
    # Given gpu-1a at 4 nodes, its queue needing 1, its zone shifted away
    planned = plan(facts(IN_1A, 4, shifted(SHIFT_1A)))

    # Then nothing leaves and no node is marked as a deletion candidate
    assert planned.decision.desired == 4 and not planned.resizes
    assert Limit.ZONAL_SHIFT in planned.decision.limited_by
    assert planned.candidates == frozenset()
    # ... while a group whose zone is not shifted does shrink
    assert plan(facts(IN_1A, 4, shifted())).decision.desired == 1


def test_given_the_shifts_unreadable_then_the_plan_grows_but_never_shrinks() -> None:
    unreadable = ZonalShifts(unreadable="AccessDeniedException")
    grows = plan(facts(IN_1A, 32, unreadable))
    assert grows.decision.desired == 8
    shrinks = plan(facts(IN_1A, 4, unreadable))
    assert shrinks.decision.desired == 4
    assert "zonal shifts could not be read (AccessDeniedException)" in shrinks.decision.reason


def test_given_the_preferred_group_left_out_then_its_pods_go_elsewhere_and_it_is_named() -> None:
    # Given gpu-1a preferred by the priority expander but confined to a shifted zone
    templates = {g: NodeTemplate(g, Resources(4000, 64 * 2**30, 110)) for g in ("gpu-1a", "gpu-1b")}
    pods = [
        Pod("default", f"p{i}", None, Resources(1000, 2**30, 1), unschedulable=True)
        for i in range(4)
    ]
    chain = [PriorityExpander({10: ["gpu-1a"], 1: [".*"]})]
    why = confined([("gpu-1a", ("us-east-1a",))], shifted(SHIFT_1A), NOW)

    # When the pending pods are planned
    planned = expanders_plan(pods, templates, chain, left_out=why)

    # Then gpu-1b takes them, and the plan says why gpu-1a was left out, in both groups' words
    assert dict(planned.nodes) == {"gpu-1b": 1}
    said = "left out gpu-1a: its zone use1-az1 is shifted away (zonal shift zs-1"
    assert all(any(r.startswith(said) for r in planned.remarks(g)) for g in templates)
    # and with gpu-1a the only group, the pods wait, and why is named for each of them
    alone = expanders_plan(pods, {"gpu-1a": templates["gpu-1a"]}, chain, left_out=why)
    assert not alone.nodes and alone.why_waiting(pods[0]).startswith("gpu-1a: its zone use1-az1")


# Zonal shifts at their edges: zones without a known ID, and a group at its bounds.


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

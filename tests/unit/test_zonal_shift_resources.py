"""Whose zonal shifts hold the groups (`adapters.aws.zonal_shifts`): only those of the
resources that concern the cluster (its EKS cluster, and cdk.json's `zonalShift.resources`).

ARC's answers, as its API reference gives them: ListZonalShifts lists the account's shifts
on every resource, each naming its `resourceIdentifier` (API_ZonalShiftSummary,
https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ZonalShiftSummary.html), practice
runs among them (`shiftType` PRACTICE_RUN); ListAutoshifts lists the Region's autoshifts
and names no resource (API_AutoshiftSummary,
https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_AutoshiftSummary.html);
GetManagedResource gives one resource's shifts in force (ZonalShiftInResource) and the
autoshifts applied to it (AutoshiftInResource), or ResourceNotFoundException for a resource
ARC does not manage
(https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_GetManagedResource.html).
The fake below answers all three from one list of shifts, so a reader that lists every
shift in the account would see another team's too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import ClientError
from nodescaler.adapters.aws.zonal_shifts import ArcZonalShifts
from nodescaler.domain.groups.zonal_shift import zone_hold

from tests.builders import VirtualClock

NOW = datetime(2026, 11, 26, 9, tzinfo=UTC)
CLUSTER = "arn:aws:eks:us-east-1:123456789012:cluster/prod"
OUR_LB = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/web/50dc6c49"
THEIR_LB = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/billing/7e1"
ZONES = {"us-east-1a": "use1-az1", "us-east-1b": "use1-az2"}


class Pages:
    def __init__(self, items: list[dict[str, Any]]) -> None:
        self._items = items

    def paginate(self, **_: Any) -> list[dict[str, Any]]:
        return [{"items": self._items}]


class Arc:
    """ARC with `shifts` in force (each on its `resourceIdentifier`), `autoshifts` in the
    Region, applied to the `managed` resources whose autoshift is enabled."""

    def __init__(self, managed: dict[str, bool]) -> None:
        self.managed = managed
        self.shifts: list[dict[str, Any]] = []
        self.autoshifts: list[dict[str, Any]] = []

    def shift(self, resource: str, zone: str, kind: str = "ZONAL_SHIFT") -> str:
        shift_id = f"{kind.lower()}-{len(self.shifts)}"
        self.shifts.append(
            {
                "zonalShiftId": shift_id,
                "resourceIdentifier": resource,
                "awayFrom": zone,
                "expiryTime": NOW + timedelta(minutes=30),
                "startTime": NOW,
                "comment": "",
                "shiftType": kind,
                "status": "ACTIVE",
            }
        )
        return shift_id

    def get_paginator(self, operation: str) -> Pages:
        listed = self.shifts if operation == "list_zonal_shifts" else self.autoshifts
        return Pages(listed)

    def get_managed_resource(self, resourceIdentifier: str) -> dict[str, Any]:  # noqa: N803
        if resourceIdentifier not in self.managed:
            error = {"Code": "ResourceNotFoundException", "Message": "not managed"}
            raise ClientError({"Error": error}, "GetManagedResource")
        shifts = [s for s in self.shifts if s["resourceIdentifier"] == resourceIdentifier]
        autoshifts = self.autoshifts if self.managed[resourceIdentifier] else []
        return {
            "arn": resourceIdentifier,
            "appliedWeights": {},
            "zonalShifts": [s | {"appliedStatus": "APPLIED"} for s in shifts],
            "autoshifts": [
                {"awayFrom": a["awayFrom"], "startTime": a["startTime"], "appliedStatus": "APPLIED"}
                for a in autoshifts
            ],
        }


class Ec2:
    def describe_availability_zones(self) -> dict[str, Any]:
        return {"AvailabilityZones": [{"ZoneName": n, "ZoneId": i} for n, i in ZONES.items()]}


def read(arc: Arc, resources: list[str]) -> Any:
    clock = VirtualClock(NOW)
    known = ArcZonalShifts(lambda: arc, Ec2(), resources=resources, clock=clock).in_force()
    return lambda zones: zone_hold(zones, known, NOW)


def test_given_another_teams_practice_run_on_their_load_balancer_then_no_group_is_held() -> None:
    # Given a practice run (30 minutes) on another team's load balancer away from use1-az1,
    # and nothing shifted on the cluster or on our own load balancer
    arc = Arc({CLUSTER: False, OUR_LB: False, THEIR_LB: True})
    arc.shift(THEIR_LB, "use1-az1", "PRACTICE_RUN")

    # When the shifts in force are read for the cluster's resources
    hold = read(arc, [CLUSTER, OUR_LB])

    # Then a group confined to us-east-1a is held neither way
    assert hold(("us-east-1a",)) is None


def test_given_a_practice_run_on_the_cluster_then_the_hold_names_it_and_its_resource() -> None:
    arc = Arc({CLUSTER: True, THEIR_LB: False})
    arc.shift(THEIR_LB, "use1-az2")
    practice = arc.shift(CLUSTER, "use1-az1", "PRACTICE_RUN")

    hold = read(arc, [CLUSTER])

    found = hold(("us-east-1a",))
    assert found is not None and found.scale_up and found.scale_in
    assert found.why == (
        f"its zone use1-az1 is shifted away (practice run {practice} on cluster/prod, "
        "expires 2026-11-26 09:30:00Z)"
    )
    assert hold(("us-east-1b",)) is None  # the other team's shift away from use1-az2


def test_an_autoshift_counts_only_for_a_resource_it_is_applied_to() -> None:
    # Given an autoshift away from use1-az1 in the Region, applied to resources with zonal
    # autoshift enabled: another team's load balancer, not the cluster
    arc = Arc({CLUSTER: False, THEIR_LB: True})
    arc.autoshifts.append({"awayFrom": "use1-az1", "startTime": NOW, "status": "ACTIVE"})
    assert read(arc, [CLUSTER])(("us-east-1a",)) is None
    # Once our load balancer, with autoshift enabled, is among the cluster's resources
    arc.managed[OUR_LB] = True
    found = read(arc, [CLUSTER, OUR_LB])(("us-east-1a",))
    assert found is not None
    assert found.why == (
        "its zone use1-az1 is shifted away (autoshift on loadbalancer/app/web/50dc6c49 "
        "started 2026-11-26 09:00:00Z)"
    )


def test_a_resource_arc_does_not_manage_has_no_shift_and_doubts_nothing() -> None:
    # An EKS cluster without zonal shift enabled is no managed resource: nothing shifts it
    arc = Arc({OUR_LB: False})
    hold = read(arc, [CLUSTER, OUR_LB])
    assert hold(("us-east-1a",)) is None


def test_a_shift_named_by_arc_is_bounded_in_the_reason() -> None:
    # Given a shift whose id and resource are far longer than AWS makes them, one with a
    # terminal escape
    long_arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/" + "x" * 900
    arc = Arc({long_arn: False})
    arc.shift(long_arn, "use1-az1")
    arc.shifts[0]["zonalShiftId"] = "\x1b[2J" + "z" * 500

    found = read(arc, [long_arn])(("us-east-1a",))

    # Then the reason keeps a recognisable, printable head of each
    assert found is not None and "\x1b" not in found.why and len(found.why) < 400
    assert "(cut, 504 characters) on loadbalancer/xxx" in found.why


def test_a_shift_arc_does_not_apply_holds_nothing_and_the_applied_one_decides() -> None:
    # Given a practice run on the cluster away from use1-az1 that ARC marks NOT_APPLIED,
    # since an operator's shift away from use1-az2 takes precedence on the same resource
    arc = Arc({CLUSTER: False})
    arc.shift(CLUSTER, "use1-az1", "PRACTICE_RUN")
    ours = arc.shift(CLUSTER, "use1-az2")
    answer = arc.get_managed_resource
    arc.get_managed_resource = lambda **asked: _marked(answer(**asked), {ours})  # type: ignore[method-assign]
    hold = read(arc, [CLUSTER])
    # Then a group in us-east-1a is not held; one in us-east-1b is, by the applied shift
    assert hold(("us-east-1a",)) is None
    found = hold(("us-east-1b",))
    assert found is not None and ours in found.why


def _marked(answer: dict[str, Any], applied: set[str]) -> dict[str, Any]:
    shifts = [
        s | {"appliedStatus": "APPLIED" if s["zonalShiftId"] in applied else "NOT_APPLIED"}
        for s in answer["zonalShifts"]
    ]
    return answer | {"zonalShifts": shifts}


def test_an_autoshift_whose_start_is_no_time_is_a_named_doubt_not_an_error() -> None:
    # Given an answer (malformed, as no AWS answer should be) whose autoshift starts at text
    arc = Arc({CLUSTER: True})
    arc.autoshifts.append({"awayFrom": "use1-az1", "startTime": "soon", "status": "ACTIVE"})
    clock = VirtualClock(NOW)
    known = ArcZonalShifts(lambda: arc, Ec2(), resources=[CLUSTER], clock=clock).in_force()
    # Then the reading is unreadable, by name (scale-in held), never a raised ValueError
    assert "ValueError" in known.unreadable

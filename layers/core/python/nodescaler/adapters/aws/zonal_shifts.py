"""The zonal shifts and autoshifts in force on the resources that concern the cluster, from
Amazon Application Recovery Controller.

A shift moves one resource's traffic away from a zone: someone else's practice run on their
own load balancer says nothing of this cluster's zones, and must not hold its groups. So
only the resources named in `ZONAL_SHIFT_RESOURCES` are read (the EKS cluster's own ARN,
and those the operator lists in cdk.json's `zonalShift.resources`), each with
GetManagedResource
(https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_GetManagedResource.html): its
`zonalShifts` in force (an operator's, a practice run, an FIS experiment: `shiftType`) and
its `autoshifts` (AWS's, on a resource with zonal autoshift enabled). ListZonalShifts lists
every resource's shifts in the account, and ListAutoshifts the Region's autoshifts with no
resource at all (API_AutoshiftSummary): neither can say which concern the cluster. A
resource ARC does not manage (ResourceNotFoundException: an EKS cluster without zonal shift
enabled) has no shift. Shifts name the zone by its ID (use1-az1); DescribeAvailabilityZones
maps the groups' zone names to IDs. All of it is read once per batch of evaluations (kept
`ttl` in the warm container); a read refused or unreachable is named, never an error:
`domain.groups.zonal_shift` then holds scale-in and lets scale-ups go ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from random import Random
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.aws.instance_types import TtlCache
from nodescaler.domain.groups.zonal_shift import ZonalShift, ZonalShifts
from nodescaler.domain.outside_text import outside
from nodescaler.ports import Clock

NOT_MANAGED = "ResourceNotFoundException"  # not registered with ARC: nothing can shift it
NOT_APPLIED = "NOT_APPLIED"  # in progress, but another shift on the resource is in effect
# ShiftType, in words: what started the shift
KINDS = {
    "ZONAL_SHIFT": "zonal shift",
    "PRACTICE_RUN": "practice run",
    "FIS_EXPERIMENT": "FIS experiment",
    "ZONAL_AUTOSHIFT": "autoshift",
}
MAX_ID = 64  # a shift id is a UUID; anything longer is cut
MAX_RESOURCE = 80  # of a resource's name in a reason: enough to recognise it


def _problem(error: Exception) -> str:
    if isinstance(error, ClientError):
        return outside(error.response.get("Error", {}).get("Code") or error)
    if isinstance(error, (KeyError, TypeError, ValueError)):  # no awayFrom, a bad time, ...
        return f"a malformed answer: {type(error).__name__} {outside(error)}"
    return type(error).__name__


def resource_name(arn: str) -> str:
    """An ARN's resource part (`cluster/prod`, `loadbalancer/app/web/50dc6c49`), bounded,
    for a reason a person reads."""
    parts = arn.split(":", 5)
    return outside(parts[5] if len(parts) == 6 and parts[5] else arn, MAX_RESOURCE)


def from_zonal_shift(item: Mapping[str, Any], on: str) -> ZonalShift:
    """A ZonalShiftInResource as a shift on resource `on`: named by its kind, id and
    resource, until its expiry."""
    kind = KINDS.get(str(item.get("shiftType") or "ZONAL_SHIFT"), "zonal shift")
    name = f"{kind} {outside(item['zonalShiftId'], MAX_ID)} on {on}"
    return ZonalShift(str(item["awayFrom"]), name, item["expiryTime"])


def from_autoshift(item: Mapping[str, Any], on: str) -> ZonalShift:
    """An AutoshiftInResource as a shift on resource `on`: in force until AWS ends it (it
    has no expiry)."""
    started = item.get("startTime")
    since = f" started {started:%Y-%m-%d %H:%M:%S}Z" if started is not None else ""
    return ZonalShift(str(item["awayFrom"]), f"autoshift on {on}{since}")


def _applied(item: Mapping[str, Any]) -> bool:
    """Whether the shift moves the resource's traffic: of several in progress on one
    resource, ARC applies one (a customer's over an autoshift over a practice run) and
    marks the others NOT_APPLIED (ZonalShiftInResource, AutoshiftInResource: appliedStatus,
    https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ZonalShiftInResource.html).
    An item that says nothing is taken as applied: doubt holds."""
    return item.get("appliedStatus") != NOT_APPLIED


def shifts_of(resource: str, answer: Mapping[str, Any]) -> list[ZonalShift]:
    """The shifts GetManagedResource lists for `resource` that are in effect: only those it
    names as that resource's (an item that names another is not this resource's shift)."""
    on = resource_name(resource)
    shifts = [
        from_zonal_shift(item, on)
        for item in answer.get("zonalShifts") or ()
        if item.get("resourceIdentifier", resource) == resource and _applied(item)
    ]
    autoshifts = [item for item in answer.get("autoshifts") or () if _applied(item)]
    return shifts + [from_autoshift(item, on) for item in autoshifts]


class ArcZonalShifts:
    """`ZonalShiftSource` over ARC's managed resources (`resources`, ARNs) and EC2's zones,
    read at most once per `ttl`. `arc` makes the client on the first read (none at a cold
    start)."""

    def __init__(
        self,
        arc: Callable[[], Any],
        ec2: Any,
        *,
        resources: Iterable[str],
        clock: Clock,
        ttl: timedelta = timedelta(seconds=15),
        rng: Random | None = None,
    ) -> None:
        self._arc = arc
        self._ec2 = ec2
        self._resources = tuple(dict.fromkeys(resources))
        self._known: TtlCache[str, ZonalShifts] = TtlCache(
            clock, ttl, timedelta(0), rng or Random()
        )

    def in_force(self) -> ZonalShifts:
        return self._known.get("all", self._read)

    def _read(self) -> ZonalShifts:
        try:
            arc = self._arc()
            shifts = [shift for r in self._resources for shift in self._on(arc, r)]
            zones = self._ec2.describe_availability_zones()["AvailabilityZones"]
        except (BotoCoreError, ClientError, KeyError, TypeError, ValueError) as error:
            return ZonalShifts(unreadable=_problem(error))
        ids = {str(z["ZoneName"]): str(z["ZoneId"]) for z in zones if z.get("ZoneId")}
        return ZonalShifts(tuple(shifts), ids)

    @staticmethod
    def _on(arc: Any, resource: str) -> list[ZonalShift]:
        try:
            answer = arc.get_managed_resource(resourceIdentifier=resource)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == NOT_MANAGED:
                return []
            raise
        return shifts_of(resource, answer)

"""The zonal shifts and autoshifts in force, from Amazon Application Recovery Controller.

ListZonalShifts with status ACTIVE gives every shift in force in the account and Region
(an operator's, a practice run, an FIS experiment, an autoshift on a resource:
https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListZonalShifts.html), and
ListAutoshifts with status ACTIVE the autoshifts AWS started for an impaired zone
(https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListAutoshifts.html). Both name
the zone by its ID (use1-az1); DescribeAvailabilityZones maps the Auto Scaling groups' zone
names to IDs (they differ from account to account). All of it is read once per batch of
evaluations (kept `ttl` in the warm container); a read refused or unreachable is named,
never an error: `domain.zonal_shift` then holds scale-in and lets scale-ups go ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from random import Random
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.aws.instance_types import TtlCache
from nodescaler.domain.zonal_shift import ZonalShift, ZonalShifts
from nodescaler.ports import Clock

IN_FORCE = "ACTIVE"
# ShiftType, in words: what started the shift
KINDS = {
    "ZONAL_SHIFT": "zonal shift",
    "PRACTICE_RUN": "practice run",
    "FIS_EXPERIMENT": "FIS experiment",
    "ZONAL_AUTOSHIFT": "autoshift",
}


def _problem(error: Exception) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code") or error)
    if isinstance(error, (KeyError, TypeError)):  # an item without awayFrom, an id, ...
        return f"a malformed answer: {type(error).__name__} {error}"
    return type(error).__name__


def from_zonal_shift(item: Mapping[str, Any]) -> ZonalShift:
    """A ZonalShiftSummary as a shift: named by its kind and id, until its expiry."""
    kind = KINDS.get(str(item.get("shiftType") or "ZONAL_SHIFT"), "zonal shift")
    return ZonalShift(str(item["awayFrom"]), f"{kind} {item['zonalShiftId']}", item["expiryTime"])


def from_autoshift(item: Mapping[str, Any]) -> ZonalShift:
    """An AutoshiftSummary as a shift: in force until AWS ends it (it has no expiry)."""
    started = item.get("startTime")
    since = f" started {started:%Y-%m-%d %H:%M:%S}Z" if started is not None else ""
    return ZonalShift(str(item["awayFrom"]), f"autoshift{since}")


class ArcZonalShifts:
    """`ZonalShiftSource` over ARC's zonal shift API and EC2's zones, read at most once
    per `ttl`. `arc` makes the client on the first read (none at a cold start)."""

    def __init__(
        self,
        arc: Callable[[], Any],
        ec2: Any,
        *,
        clock: Clock,
        ttl: timedelta = timedelta(seconds=15),
        rng: Random | None = None,
    ) -> None:
        self._arc = arc
        self._ec2 = ec2
        self._known: TtlCache[str, ZonalShifts] = TtlCache(
            clock, ttl, timedelta(0), rng or Random()
        )

    def in_force(self) -> ZonalShifts:
        return self._known.get("all", self._read)

    def _read(self) -> ZonalShifts:
        try:
            arc = self._arc()
            shifts = [from_zonal_shift(i) for i in self._list(arc, "list_zonal_shifts")]
            shifts += [from_autoshift(i) for i in self._list(arc, "list_autoshifts")]
            zones = self._ec2.describe_availability_zones()["AvailabilityZones"]
        except (BotoCoreError, ClientError, KeyError, TypeError) as error:
            return ZonalShifts(unreadable=_problem(error))
        ids = {str(z["ZoneName"]): str(z["ZoneId"]) for z in zones if z.get("ZoneId")}
        return ZonalShifts(tuple(shifts), ids)

    @staticmethod
    def _list(arc: Any, operation: str) -> list[Mapping[str, Any]]:
        pages = arc.get_paginator(operation).paginate(status=IN_FORCE)
        return [item for page in pages for item in page.get("items", [])]

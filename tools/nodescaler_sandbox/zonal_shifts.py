"""Amazon Application Recovery Controller's zonal shifts and autoshifts, which moto (5.2)
does not model, supplied on an `arc-zonal-shift` client as AWS answers:

- GetManagedResource (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_GetManagedResource.html):
  one managed resource (by ARN): its zonal shifts in force (ZonalShiftInResource: the
  shift's id, `resourceIdentifier`, zone, expiry, `shiftType`) and, where zonal autoshift
  is enabled on it, the autoshifts in force (AutoshiftInResource); each with its
  `appliedStatus`, one APPLIED (an operator's shift before an autoshift before a practice
  run or FIS experiment). A resource ARC does not manage: ResourceNotFoundException (404).
- ListZonalShifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListZonalShifts.html):
  the account's zonal shifts in the Region on every resource (an operator's, and practice
  runs), each naming its `resourceIdentifier`, with its status: ACTIVE until its
  expiryTime, EXPIRED after, CANCELED once cancelled; `status` and `resourceIdentifier`
  query parameters keep one status, one resource.
- ListAutoshifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListAutoshifts.html):
  the autoshifts AWS started away from an impaired zone, Region-wide and naming no resource
  (API_AutoshiftSummary), ACTIVE until AWS ends them (COMPLETED, with an endTime); only
  ACTIVE ones unless `status` says otherwise.

All name the zone by its Availability Zone ID (use1-az1). A resource a shift is started on
is a managed resource, as StartZonalShift requires. `refuse` makes every call fail as IAM
does without the permission (AccessDeniedException, 403); `unreachable`, as a Region
endpoint that does not answer.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, Protocol
from urllib.parse import unquote

from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError

URL = "https://arc-zonal-shift.us-east-1.amazonaws.com/"
# The sandbox's EKS cluster, as ARC names it: the resource its zonal shifts are started on.
CLUSTER_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/prod"
OPERATIONS = ("GetManagedResource", "ListZonalShifts", "ListAutoshifts")
# Which shift is in effect when several are in force on one resource (ARC's precedence:
# https://docs.aws.amazon.com/r53recovery/latest/dg/arc-zonal-autoshift.how-it-works.precedence.html)
PRECEDENCE = {"ZONAL_SHIFT": 0, "ZONAL_AUTOSHIFT": 1, "PRACTICE_RUN": 2, "FIS_EXPERIMENT": 2}


class _Clock(Protocol):
    def now(self) -> datetime: ...


def _metadata(status: int) -> dict[str, Any]:
    return {"RequestId": str(uuid.uuid4()), "HTTPStatusCode": status, "HTTPHeaders": {}}


def _error(status: int, code: str, message: str) -> tuple[Any, dict[str, Any]]:
    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": _metadata(status)}
    return AWSResponse(URL, status, {}, None), response


class ArcZonalShiftApi:
    """The account's managed resources, zonal shifts and autoshifts, by `clock`'s time."""

    def __init__(self, clock: _Clock) -> None:
        self._clock = clock
        self.managed: dict[str, bool] = {}  # resource ARN → zonal autoshift enabled
        self.zonal_shifts: dict[str, dict[str, Any]] = {}
        self.autoshifts: list[dict[str, Any]] = []
        self.refusal = ""  # an error code every call fails with, when set
        self.down = False  # the endpoint does not answer
        self.calls = 0

    def watch(self, arc: Any) -> Any:
        for operation in OPERATIONS:
            arc.meta.events.register(
                f"before-call.arc-zonal-shift.{operation}",
                self._answer,
                unique_id=f"zonal-shifts-{operation}-{id(self)}",
            )
        return arc

    def manage(self, resource: str, *, autoshift: bool = False) -> None:
        """`resource` registered with ARC (a load balancer is on creation, an EKS cluster once
        zonal shift is enabled on it), with zonal autoshift enabled or not."""
        self.managed[resource] = autoshift

    def start_zonal_shift(
        self,
        away_from: str,
        expires_in: timedelta,
        *,
        resource: str = CLUSTER_ARN,
        shift_type: str = "ZONAL_SHIFT",
    ) -> str:
        """A zonal shift of `resource` away from `away_from` (a zone ID), as StartZonalShift
        (or ARC, for a practice run) starts one."""
        self.managed.setdefault(resource, False)
        shift_id = str(uuid.uuid4())
        now = self._clock.now()
        self.zonal_shifts[shift_id] = {
            "zonalShiftId": shift_id,
            "resourceIdentifier": resource,
            "awayFrom": away_from,
            "expiryTime": now + expires_in,
            "startTime": now,
            "comment": "sandbox",
            "shiftType": shift_type,
            "cancelled": False,
        }
        return shift_id

    def cancel_zonal_shift(self, shift_id: str) -> None:
        self.zonal_shifts[shift_id]["cancelled"] = True

    def start_autoshift(self, away_from: str) -> None:
        """AWS shifting traffic away from an impaired zone, for every managed resource with
        zonal autoshift enabled."""
        self.autoshifts.append({"awayFrom": away_from, "startTime": self._clock.now()})

    def end_autoshifts(self) -> None:
        for autoshift in self.autoshifts:
            autoshift.setdefault("endTime", self._clock.now())

    def refuse(self, code: str = "AccessDeniedException") -> None:
        self.refusal = code

    def unreachable(self) -> None:
        self.down = True

    def _answer(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        self.calls += 1
        if self.down:
            raise EndpointConnectionError(endpoint_url=URL)
        if self.refusal:
            return _error(403, self.refusal, "not authorized to perform this action")
        query = params.get("query_string") or {}
        if model.name == "GetManagedResource":
            return self._managed_resource(unquote(params["url_path"].rsplit("/", 1)[1]))
        wanted = query.get("status")
        if model.name == "ListZonalShifts":
            items = [self._zonal_shift(s) for s in self.zonal_shifts.values()]
            resource = query.get("resourceIdentifier")
            items = [i for i in items if resource is None or i["resourceIdentifier"] == resource]
        else:
            items = [self._autoshift(a) for a in self.autoshifts]
            wanted = wanted or "ACTIVE"  # only ACTIVE autoshifts by default
        found = [i for i in items if wanted is None or i["status"] == wanted]
        return AWSResponse(URL, 200, {}, None), {"items": found, "ResponseMetadata": _metadata(200)}

    def _managed_resource(self, resource: str) -> tuple[Any, dict[str, Any]]:
        if resource not in self.managed:
            return _error(404, "ResourceNotFoundException", f"{resource} is not a managed resource")
        shifts = [
            {k: v for k, v in s.items() if k != "status"}
            for s in map(self._zonal_shift, self.zonal_shifts.values())
            if s["resourceIdentifier"] == resource and s["status"] == "ACTIVE"
        ]
        autoshifts = [
            {"awayFrom": a["awayFrom"], "startTime": a["startTime"]}
            for a in self.autoshifts
            if self.managed[resource] and "endTime" not in a
        ]
        ranked = [(PRECEDENCE.get(s["shiftType"], 2), s["startTime"], s) for s in shifts]
        ranked += [(PRECEDENCE["ZONAL_AUTOSHIFT"], a["startTime"], a) for a in autoshifts]
        applied = min(ranked, key=lambda r: r[:2])[2] if ranked else None
        for item in (*shifts, *autoshifts):
            item["appliedStatus"] = "APPLIED" if item is applied else "NOT_APPLIED"
        answer = {
            "arn": resource,
            "name": resource.rsplit("/", 1)[-1],
            "appliedWeights": {},
            "zonalShifts": shifts,
            "autoshifts": autoshifts,
            "zonalAutoshiftStatus": "ENABLED" if self.managed[resource] else "DISABLED",
            "ResponseMetadata": _metadata(200),
        }
        return AWSResponse(URL, 200, {}, None), answer

    def _zonal_shift(self, shift: dict[str, Any]) -> dict[str, Any]:
        expired = self._clock.now() >= shift["expiryTime"]
        status = "CANCELED" if shift["cancelled"] else "EXPIRED" if expired else "ACTIVE"
        return {k: v for k, v in shift.items() if k != "cancelled"} | {"status": status}

    @staticmethod
    def _autoshift(autoshift: dict[str, Any]) -> dict[str, Any]:
        return autoshift | {"status": "COMPLETED" if "endTime" in autoshift else "ACTIVE"}

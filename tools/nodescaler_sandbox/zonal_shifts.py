"""Amazon Application Recovery Controller's zonal shifts and autoshifts, which moto (5.2)
does not model, supplied on an `arc-zonal-shift` client as AWS answers:

- ListZonalShifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListZonalShifts.html):
  the account's zonal shifts in the Region (an operator's, and practice runs), each with
  its status: ACTIVE until its expiryTime, EXPIRED after, CANCELED once cancelled; the
  `status` query parameter keeps one status.
- ListAutoshifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListAutoshifts.html):
  the autoshifts AWS started away from an impaired zone, ACTIVE until AWS ends them
  (COMPLETED, with an endTime); only ACTIVE ones unless `status` says otherwise.

Both name the zone by its Availability Zone ID (use1-az1). `refuse` makes every call fail
as IAM does without the permission (AccessDeniedException, 403); `unreachable`, as a
Region endpoint that does not answer.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any, Protocol

from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError

URL = "https://arc-zonal-shift.us-east-1.amazonaws.com/"


class _Clock(Protocol):
    def now(self) -> datetime: ...


def _metadata(status: int) -> dict[str, Any]:
    return {"RequestId": str(uuid.uuid4()), "HTTPStatusCode": status, "HTTPHeaders": {}}


class ArcZonalShiftApi:
    """The account's zonal shifts and autoshifts, by `clock`'s time."""

    def __init__(self, clock: _Clock) -> None:
        self._clock = clock
        self.zonal_shifts: dict[str, dict[str, Any]] = {}
        self.autoshifts: list[dict[str, Any]] = []
        self.refusal = ""  # an error code every call fails with, when set
        self.down = False  # the endpoint does not answer
        self.calls = 0

    def watch(self, arc: Any) -> Any:
        for operation in ("ListZonalShifts", "ListAutoshifts"):
            arc.meta.events.register(
                f"before-call.arc-zonal-shift.{operation}",
                self._answer,
                unique_id=f"zonal-shifts-{operation}-{id(self)}",
            )
        return arc

    def start_zonal_shift(
        self,
        away_from: str,
        expires_in: timedelta,
        *,
        resource: str = "arn:aws:eks:us-east-1:123456789012:cluster/prod",
        shift_type: str = "ZONAL_SHIFT",
    ) -> str:
        """A zonal shift away from `away_from` (a zone ID), as StartZonalShift starts one."""
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
        """AWS shifting traffic away from an impaired zone."""
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
            error = {"Code": self.refusal, "Message": "not authorized to perform this action"}
            response = {"Error": error, "ResponseMetadata": _metadata(403)}
            return AWSResponse(URL, 403, {}, None), response
        wanted = (params.get("query_string") or {}).get("status")
        if model.name == "ListZonalShifts":
            items = [self._zonal_shift(s) for s in self.zonal_shifts.values()]
        else:
            items = [self._autoshift(a) for a in self.autoshifts]
            wanted = wanted or "ACTIVE"  # only ACTIVE autoshifts by default
        found = [i for i in items if wanted is None or i["status"] == wanted]
        return AWSResponse(URL, 200, {}, None), {"items": found, "ResponseMetadata": _metadata(200)}

    def _zonal_shift(self, shift: dict[str, Any]) -> dict[str, Any]:
        expired = self._clock.now() >= shift["expiryTime"]
        status = "CANCELED" if shift["cancelled"] else "EXPIRED" if expired else "ACTIVE"
        return {k: v for k, v in shift.items() if k != "cancelled"} | {"status": status}

    @staticmethod
    def _autoshift(autoshift: dict[str, Any]) -> dict[str, Any]:
        return autoshift | {"status": "COMPLETED" if "endTime" in autoshift else "ACTIVE"}

"""EC2 capacity reservations, which moto (5.2) does not model, supplied on a moto-backed
EC2 client as AWS answers DescribeCapacityReservations
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservations.html):
every reservation of the account without an id filter; with CapacityReservationId.N, those,
and InvalidCapacityReservationId.NotFound when one does not exist. A reservation is an
On-Demand Capacity Reservation or a Capacity Block
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks.html), whose
AvailableInstanceCount is what instances not yet launched into it leave.
"""

from __future__ import annotations

import uuid
from typing import Any

from botocore.awsrequest import AWSResponse

URL = "https://ec2.amazonaws.com/"


def _metadata(status: int) -> dict[str, Any]:
    return {"RequestId": str(uuid.uuid4()), "HTTPStatusCode": status, "HTTPHeaders": {}}


class CapacityReservations:
    """The account's capacity reservations, answered by DescribeCapacityReservations."""

    def __init__(self, owner_id: str = "123456789012") -> None:
        self.reservations: dict[str, dict[str, Any]] = {}
        self._owner = owner_id

    def watch(self, ec2: Any) -> Any:
        ec2.meta.events.register(
            "before-call.ec2.DescribeCapacityReservations",
            self._answer,
            unique_id=f"capacity-reservations-{id(self)}",
        )
        return ec2

    def reserve(
        self,
        instance_type: str,
        zone: str,
        count: int,
        *,
        used: int = 0,
        targeted: bool = True,
        capacity_block: bool = False,
        state: str = "active",
    ) -> str:
        """A reservation of `count` instances, `used` of them running in it; its id."""
        reservation_id = f"cr-{uuid.uuid4().hex[:17]}"
        self.reservations[reservation_id] = {
            "CapacityReservationId": reservation_id,
            "OwnerId": self._owner,
            "InstanceType": instance_type,
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": zone,
            "Tenancy": "default",
            "TotalInstanceCount": count,
            "AvailableInstanceCount": count - used,
            "InstanceMatchCriteria": "targeted" if targeted else "open",
            "State": state,
            "ReservationType": "capacity-block" if capacity_block else "default",
        }
        return reservation_id

    def follow(self, running: dict[tuple[str, str], int]) -> None:
        """The open reservations' room as EC2 keeps it: the instances of their type running
        in their zone (`running`, by (type, zone)) fill them, one after the other."""
        left = dict(running)
        for reservation in self.reservations.values():
            if reservation["InstanceMatchCriteria"] != "open":
                continue
            key = (reservation["InstanceType"], reservation["AvailabilityZone"])
            used = min(left.get(key, 0), reservation["TotalInstanceCount"])
            left[key] = left.get(key, 0) - used
            reservation["AvailableInstanceCount"] = reservation["TotalInstanceCount"] - used

    def _answer(self, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        body = params["body"]
        ids = [str(v) for k, v in body.items() if k.startswith("CapacityReservationId.")]
        if missing := [i for i in ids if i not in self.reservations]:
            error = {
                "Code": "InvalidCapacityReservationId.NotFound",
                "Message": f"The capacity reservation ID '{missing[0]}' does not exist",
            }
            return AWSResponse(URL, 400, {}, None), {
                "Error": error,
                "ResponseMetadata": _metadata(400),
            }
        found = [r for i, r in self.reservations.items() if not ids or i in ids]
        return AWSResponse(URL, 200, {}, None), {
            "CapacityReservations": found,
            "ResponseMetadata": _metadata(200),
        }

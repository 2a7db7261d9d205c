"""What Auto Scaling sends a custom termination policy (a Lambda function in the group's
TerminationPolicies), and what it takes back.

On a scale-in (and on an instance refresh, a maximum instance lifetime, or a rebalance
across zones) the group invokes the function with the instances it would consider (at most
30,000, `HasMoreInstances` when there are more) and the capacity it has to remove, per
zone and market; the function answers within 2 seconds with the ids it allows,
`{"InstanceIDs": [...]}`. From more than it needs, the group picks by its next termination
policy (else the default one). With none or a timeout, it waits a short time and asks
again: on a scale-in for as long as its desired capacity is below its current capacity, on
an instance refresh for an hour (then the refresh fails), on a maximum instance lifetime
for as long as the instance is past it. It never terminates an instance protected from
scale-in. (Amazon EC2 Auto Scaling User Guide, "Create a custom termination policy with
Lambda", https://docs.aws.amazon.com/autoscaling/ec2/userguide/lambda-custom-termination-policy.html)

An error is not among what the guide says Auto Scaling asks again after, so the function
never relies on one: whatever it cannot read or choose for it answers (`answer`). `Cause` is
kept as text, whatever it holds, so that a cause AWS does not document (or a malformed one)
is named and answered, not refused with the rest of the request
(`domain.scale_down.termination_policy`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from nodescaler.errors import MalformedEventError
from nodescaler.events import describe_errors

InstanceId = Annotated[str, Field(pattern=r"^i-[0-9a-f]{8,17}$")]
CAUSE_SHOWN = 64  # characters of a cause kept for the log


def _as_text(value: Any) -> str:
    """A cause as printable text of at most CAUSE_SHOWN characters: a non-string shown as
    its repr, control characters (a terminal escape) as "?"."""
    text = value if isinstance(value, str) else repr(value)
    return "".join(c if c.isprintable() else "?" for c in text[:CAUSE_SHOWN])


class _Payload(BaseModel):
    # Auto Scaling may add fields: unknown ones are ignored, not refused.
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class CapacityToTerminate(_Payload):
    zone: Annotated[str, Field(alias="AvailabilityZone", min_length=1)]
    capacity: Annotated[int, Field(alias="Capacity", ge=0, strict=True)]
    market: Annotated[str, Field(alias="InstanceMarketOption")] = "on-demand"


class OfferedInstance(_Payload):
    instance_id: Annotated[InstanceId, Field(alias="InstanceId")]
    zone: Annotated[str, Field(alias="AvailabilityZone", min_length=1)]
    instance_type: Annotated[str, Field(alias="InstanceType")] = ""
    market: Annotated[str, Field(alias="InstanceMarketOption")] = "on-demand"


class TerminationRequest(_Payload):
    group: Annotated[str, Field(alias="AutoScalingGroupName", min_length=1, max_length=255)]
    capacity: Annotated[list[CapacityToTerminate], Field(alias="CapacityToTerminate")]
    instances: Annotated[list[OfferedInstance], Field(alias="Instances", max_length=30_000)]
    cause: Annotated[str, BeforeValidator(_as_text), Field(alias="Cause")] = ""  # "": none sent
    has_more: Annotated[bool, Field(alias="HasMoreInstances")] = False

    @property
    def wanted(self) -> int:
        """How many instances the group has to remove."""
        return sum(c.capacity for c in self.capacity)

    @property
    def offered(self) -> tuple[str, ...]:
        return tuple(i.instance_id for i in self.instances)


def parse_termination_request(event: Any) -> TerminationRequest:
    """The request; `MalformedEventError` names the field when it is not one."""
    if not isinstance(event, dict):
        raise MalformedEventError(
            f"termination policy request: a JSON object, not {type(event).__name__}"
        )
    try:
        return TerminationRequest.model_validate(event)
    except ValidationError as error:
        group = event.get("AutoScalingGroupName")
        where = f" for group {group!r}" if isinstance(group, str) else ""
        raise MalformedEventError(
            f"termination policy request{where}: {describe_errors(error)}"
        ) from None


def answer(instance_ids: tuple[str, ...]) -> dict[str, list[str]]:
    return {"InstanceIDs": list(instance_ids)}

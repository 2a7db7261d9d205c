"""What the drain function receives: an Auto Scaling terminate lifecycle action, and EC2's
Spot interruption warning and rebalance recommendation, each turned into the domain's
`LifecycleAction` or `SpotWarning` for the drain service.

All three reach the drain function through EventBridge rules. The lifecycle hook's test
notification is recognised too, so it can be acknowledged rather than refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError

from nodescaler.domain.scale_down.drain import (
    DrainCause,
    DrainRequest,
    LifecycleAction,
    SpotWarning,
)
from nodescaler.errors import MalformedEventError
from nodescaler.events import (
    LIFECYCLE_ACTION,
    REBALANCE_RECOMMENDATION,
    SPOT_INTERRUPTION,
    describe_errors,
)

TEST_NOTIFICATION = "autoscaling:TEST_NOTIFICATION"

InstanceId = Annotated[str, Field(pattern=r"^i-[0-9a-f]{8,17}$")]
GroupName = Annotated[str, Field(min_length=1, max_length=255)]


class _Detail(BaseModel):
    # AWS adds fields to its events now and then: unknown ones are ignored, not refused.
    model_config = ConfigDict(frozen=True, populate_by_name=True)


class LifecycleActionDetail(_Detail):
    """The lifecycle action to heartbeat and complete: the hook holds the instance until then."""

    token: Annotated[str, Field(alias="LifecycleActionToken", min_length=36, max_length=36)]
    group: Annotated[GroupName, Field(alias="AutoScalingGroupName")]
    hook: Annotated[str, Field(alias="LifecycleHookName", min_length=1, max_length=255)]
    instance_id: Annotated[InstanceId, Field(alias="EC2InstanceId")]
    transition: Annotated[
        Literal["autoscaling:EC2_INSTANCE_TERMINATING"], Field(alias="LifecycleTransition")
    ]
    metadata: Annotated[str | None, Field(alias="NotificationMetadata", max_length=1023)] = None
    origin: Annotated[str | None, Field(alias="Origin")] = None  # AutoScalingGroup, WarmPool
    destination: Annotated[str | None, Field(alias="Destination")] = None  # EC2, WarmPool


class _DrainEvent(EventBridgeModel):
    """An event that asks for one instance's node to be drained."""

    @property
    def request(self) -> DrainRequest:
        raise NotImplementedError

    @property
    def cause(self) -> str:
        return self.request.cause.value

    @property
    def instance_id(self) -> str:
        return self.request.instance_id


class LifecycleActionEvent(_DrainEvent):
    source: Literal["aws.autoscaling"]
    detail_type: Literal["EC2 Instance-terminate Lifecycle Action"] = Field(alias="detail-type")
    detail: LifecycleActionDetail

    @property
    def request(self) -> LifecycleAction:
        d = self.detail
        return LifecycleAction(d.group, d.hook, d.instance_id, d.token)


class LifecycleTestNotification(_Detail):
    event: Annotated[Literal["autoscaling:TEST_NOTIFICATION"], Field(alias="Event")]
    group: Annotated[GroupName | None, Field(alias="AutoScalingGroupName")] = None


class LifecycleTestEvent(EventBridgeModel):
    """What Auto Scaling sends once when a hook is created: nothing to drain."""

    source: Literal["aws.autoscaling"]
    detail: LifecycleTestNotification


class SpotInterruption(_Detail):
    instance_id: Annotated[InstanceId, Field(alias="instance-id")]
    instance_action: Annotated[
        Literal["terminate", "stop", "hibernate"], Field(alias="instance-action")
    ]


class SpotInterruptionEvent(_DrainEvent):
    """Two minutes' notice: the instance is reclaimed whatever we do."""

    source: Literal["aws.ec2"]
    detail_type: Literal["EC2 Spot Instance Interruption Warning"] = Field(alias="detail-type")
    detail: SpotInterruption

    @property
    def request(self) -> SpotWarning:
        return SpotWarning(
            self.detail.instance_id, DrainCause.SPOT_INTERRUPTION, self.id, self.time
        )


class RebalanceRecommendation(_Detail):
    instance_id: Annotated[InstanceId, Field(alias="instance-id")]


class RebalanceRecommendationEvent(_DrainEvent):
    """A Spot instance at raised risk of interruption: usually well before the warning."""

    source: Literal["aws.ec2"]
    detail_type: Literal["EC2 Instance Rebalance Recommendation"] = Field(alias="detail-type")
    detail: RebalanceRecommendation

    @property
    def request(self) -> SpotWarning:
        return SpotWarning(
            self.detail.instance_id, DrainCause.REBALANCE_RECOMMENDATION, self.id, self.time
        )


DrainEvent = LifecycleActionEvent | SpotInterruptionEvent | RebalanceRecommendationEvent
SpotEvent = SpotInterruptionEvent | RebalanceRecommendationEvent


def detail_type(event: Any) -> str | None:
    """The event's tag: its detail-type, except for a hook's test notification."""
    if not isinstance(event, dict):
        return None
    detail = event.get("detail")
    if isinstance(detail, dict) and detail.get("Event") == TEST_NOTIFICATION:
        return TEST_NOTIFICATION
    return str(event.get("detail-type", ""))


_DRAIN_EVENT: TypeAdapter[DrainEvent | LifecycleTestEvent] = TypeAdapter(
    Annotated[
        Annotated[LifecycleActionEvent, Tag(LIFECYCLE_ACTION)]
        | Annotated[SpotInterruptionEvent, Tag(SPOT_INTERRUPTION)]
        | Annotated[RebalanceRecommendationEvent, Tag(REBALANCE_RECOMMENDATION)]
        | Annotated[LifecycleTestEvent, Tag(TEST_NOTIFICATION)],
        Discriminator(detail_type),
    ]
)


def parse_drain_event(event: Any) -> DrainEvent | LifecycleTestEvent:
    try:
        return _DRAIN_EVENT.validate_python(event)
    except ValidationError as error:
        event_id = event.get("id", "?") if isinstance(event, dict) else "?"
        raise MalformedEventError(
            f"event {event_id} can't be read as a terminate lifecycle action or an EC2 Spot "
            f"warning: {describe_errors(error)}"
        ) from None

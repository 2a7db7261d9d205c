"""What the dispatch function receives: the tick, CloudWatch alarm state changes and Auto
Scaling launch failures, all through EventBridge."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    Field,
    TypeAdapter,
    ValidationError,
)

from nodescaler.domain.groups.node_group import MAX_GROUP_NAME
from nodescaler.domain.outside_text import outside
from nodescaler.errors import MalformedEventError
from nodescaler.events import describe_errors
from nodescaler.events.evaluation_request import EventId


class DispatchedEvent(EventBridgeModel):
    """An event whose id and time become its evaluations' idempotency key and request time:
    one that can't be either is refused here, naming the field, not when queueing."""

    id: EventId
    time: AwareDatetime


class ScheduledEvent(DispatchedEvent):
    source: Literal["aws.events", "aws.scheduler"]
    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")

    @property
    def cause(self) -> str:
        return "tick"

    @property
    def identity(self) -> str:
        """The tick's idempotency key, from its scheduled time: the same on every retry of
        one tick (Scheduler's execution id is not), never shared by two ticks."""
        return "tick-" + self.time.astimezone(UTC).isoformat().replace("+00:00", "Z")


# EventBridge Scheduler replaces a context attribute given as a whole value
# (https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-context-attributes.html);
# one still there means the tick's fields are not what they say.
SCHEDULER_KEYWORD = "<aws.scheduler."


def unreplaced_keyword(event: Any) -> str | None:
    """Why a tick is refused, naming its fields that hold a Scheduler context attribute
    left as written; None for any other event."""
    if not isinstance(event, dict):
        return None
    fields = [f for f in ("id", "time") if SCHEDULER_KEYWORD in str(event.get(f, ""))]
    if not fields:
        return None
    return (
        f"tick {str(event.get('id'))[:128]}: {', '.join(fields)}: an EventBridge Scheduler "
        "context attribute (<aws.scheduler.…>) left unreplaced: refused, the next tick comes "
        "in its place"
    )


class AlarmState(BaseModel):
    value: Literal["OK", "ALARM", "INSUFFICIENT_DATA"]
    reason: str = ""
    timestamp: datetime


MAX_ALARM_NAME = 255  # CloudWatch's own limit


class AlarmStateChange(BaseModel):
    # As sent: policies name alarms exactly. Shown and stored only as `shown_name`.
    alarm_name: Annotated[str, Field(alias="alarmName", min_length=1, max_length=MAX_ALARM_NAME)]
    state: AlarmState
    previous_state: Annotated[AlarmState | None, Field(alias="previousState")] = None

    @property
    def shown_name(self) -> str:
        """The name fit to log and store: anyone allowed to invoke dispatch may send one."""
        return outside(self.alarm_name, MAX_ALARM_NAME)


class AlarmStateChangeEvent(DispatchedEvent):
    source: Literal["aws.cloudwatch"]
    detail_type: Literal["CloudWatch Alarm State Change"] = Field(alias="detail-type")
    detail: AlarmStateChange

    @property
    def cause(self) -> str:
        previous = self.detail.previous_state.value if self.detail.previous_state else "?"
        return f"alarm {self.detail.shown_name}: {previous} → {self.detail.state.value}"


class LaunchUnsuccessful(BaseModel):
    group: Annotated[
        str, Field(alias="AutoScalingGroupName", min_length=1, max_length=MAX_GROUP_NAME)
    ]
    # An activity's id is a UUID; anyone allowed to invoke dispatch may send any text,
    # which messages and log lines show: bounded, on one line, from here on.
    activity_id: Annotated[str, Field(alias="ActivityId", min_length=1), AfterValidator(outside)]
    status_message: Annotated[str, Field(alias="StatusMessage")] = ""
    cause: Annotated[str, Field(alias="Cause")] = ""

    @property
    def shown_group(self) -> str:
        """The group's name fit to log: anyone allowed to invoke dispatch may send one, for
        a group that does not exist; only a group found among ours is used as it is."""
        return outside(self.group, MAX_GROUP_NAME)


class LaunchUnsuccessfulEvent(DispatchedEvent):
    """An Auto Scaling Group could not launch an instance: back the group off, re-plan."""

    source: Literal["aws.autoscaling"]
    detail_type: Literal["EC2 Instance Launch Unsuccessful"] = Field(alias="detail-type")
    detail: LaunchUnsuccessful

    @property
    def cause(self) -> str:
        return f"launch failure in {self.detail.shown_group}"

    @property
    def reason(self) -> str:
        """In AWS's words, bounded: anyone allowed to invoke dispatch may send any text,
        which the group's backoff stores (a huge one would freeze its state item)."""
        return outside(self.detail.status_message or self.detail.cause or "launch unsuccessful")


DispatchEvent = ScheduledEvent | AlarmStateChangeEvent | LaunchUnsuccessfulEvent
_DISPATCH_EVENT: TypeAdapter[DispatchEvent] = TypeAdapter(
    Annotated[DispatchEvent, Field(discriminator="detail_type")]
)


def parse_dispatch_event(event: Any) -> DispatchEvent:
    try:
        return _DISPATCH_EVENT.validate_python(event)
    except ValidationError as error:
        event_id = event.get("id", "?") if isinstance(event, dict) else "?"
        raise MalformedEventError(
            f"event {event_id} is not a scheduled tick, a CloudWatch alarm state change or an "
            f"Auto Scaling launch failure: {describe_errors(error)}"
        ) from None

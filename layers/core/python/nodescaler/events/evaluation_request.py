"""The evaluation queue's message, written by dispatch (and the drain, on a Spot warning),
read by evaluate inside its SQS record (`nodescaler.events.evaluation_record`)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

EventId = Annotated[str, Field(min_length=1, max_length=128)]  # idempotency key


class EvaluationRequest(BaseModel):
    """The evaluation queue's message: evaluate this group, because of this event."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_group: Annotated[str, Field(min_length=1, max_length=255)]  # the ASG name
    event_id: EventId
    cause: Annotated[str, Field(min_length=1, max_length=300)]  # "tick", "alarm web-high → ALARM"
    requested_at: AwareDatetime

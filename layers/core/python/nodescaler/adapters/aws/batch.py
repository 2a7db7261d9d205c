"""The evaluate function's batch: every record parsed into its model by Powertools' batch
processor and processed on its own; a failed one is tried again soon, or set aside.

Requests are commutative (each evaluates its group as the group is then), so one that
fails holds up nothing behind it, not even its own group's next request: the FIFO
processor's rule of failing the rest of a group would dead-letter requests that never
failed themselves. A failure that trying again may fix is made visible again within
seconds (`retry_delay`), not after the queue's six-minute visibility timeout; one that
cannot be fixed that way (a malformed message, a corrupt state item) goes to the
dead-letter queue at once, with its reason. One the invocation had no time to start goes
back to the queue as a new message: every receive counts towards the queue's
maxReceiveCount, ChangeMessageVisibility included, so three such invocations would
dead-letter a request that never failed (`SqsRedelivery.requeue`). It cannot go round for
ever: each invocation starts at least its first record (60 s against the 13 an evaluation
needs to start), and a requeued request joins the back of its group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from pydantic import ValidationError

from nodescaler.adapters.aws.evaluation_queue import SqsRedelivery, retry_delay
from nodescaler.domain.outside_text import MAX_PROBLEM, outside
from nodescaler.errors import NotStartedError, is_retryable
from nodescaler.events import describe_errors
from nodescaler.events.evaluation_record import EvaluationRecord
from nodescaler.observability.reports import logger, reject, report_dead_letter


class EvaluationBatch(BatchProcessor):
    """Each record parsed into an `EvaluationRecord` and processed on its own; a failed one
    is rejected (if malformed), then tried again soon or dead-lettered at once."""

    def __init__(self, redelivery: SqsRedelivery | None) -> None:
        super().__init__(EventType.SQS, model=EvaluationRecord)
        self._redelivery = redelivery  # None: Lambda's own retries (tests that inject none)

    def failure_handler(self, record: Any, exception: Any) -> Any:
        error, failed = exception[1], Failed.of(record)
        if isinstance(error, ValidationError):
            reason = f"malformed evaluation message {failed.message_id}: {describe_errors(error)}"
            reject(reason, message_id=failed.message_id, receive_count=failed.receives)
        else:
            reason = outside(f"{type(error).__name__}: {error}", MAX_PROBLEM)
        if self._redelivery is not None:
            try:
                if isinstance(error, NotStartedError):  # nothing tried: no receive spent
                    self._redelivery.requeue(failed.message_id, failed.body, failed.group_id)
                    return self.success_handler(record, "requeued")
                if isinstance(error, ValidationError) or not is_retryable(error):
                    self._redelivery.dead_letter(
                        failed.message_id, failed.body, failed.group_id, reason
                    )
                    report_dead_letter(failed.message_id, reason)
                    return self.success_handler(record, "dead-lettered")
                self._redelivery.retry_in(failed.receipt_handle, retry_delay(failed.receives))
            except Exception:  # the queue itself failed us: Lambda's own retry still comes
                logger.exception(f"message {failed.message_id}: not rescheduled nor set aside")
        return super().failure_handler(record, exception)


@dataclass(frozen=True)
class Failed:
    """What the batch needs of a failed record, parsed (`EvaluationRecord`) or not (a raw
    SQS record, read with care: anything in it may be what is malformed)."""

    message_id: str
    receipt_handle: str
    body: str
    group_id: str
    receives: int

    @classmethod
    def of(cls, record: Any) -> Failed:
        if isinstance(record, EvaluationRecord):
            parsed = record.attributes
            return cls(
                record.messageId,
                record.receiptHandle,
                record.body.model_dump_json(),
                parsed.MessageGroupId or "",
                int(parsed.ApproximateReceiveCount),
            )
        raw = record.raw_event if isinstance(record.raw_event, dict) else {}
        given = raw.get("attributes")
        attributes: dict[str, Any] = given if isinstance(given, dict) else {}
        count = str(attributes.get("ApproximateReceiveCount", ""))
        return cls(
            str(raw.get("messageId", "?")),
            str(raw.get("receiptHandle", "")),
            str(raw.get("body", "")),
            str(attributes.get("MessageGroupId", "")),
            int(count) if count.isdigit() else 1,
        )

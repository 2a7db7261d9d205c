"""Runs the handlers the way Lambda does, against moto: a context, and an SQS event source.

moto stores queues but invokes nothing, so `SqsEventSource` stands in for Lambda's event
source mapping: receive a batch, invoke the handler, delete what it did not report as
failed (all of it, if the invocation raised). A failed message stays invisible for the
queue's visibility timeout, or for as long as the function asked with
ChangeMessageVisibility, counted on the sandbox's clock (moto counts real seconds); while
it is invisible, SQS FIFO delivers no other message of its group (moto does that), and
SQS's redrive policy, which moto applies on receive, dead-letters it after the queue's
maxReceiveCount receives. What the function moved to the dead-letter queue itself and
reported done is deleted like any success. Given the queue's store (`QueueStore`: moto's,
in this process), a queue holding no message is not sent a receive (Lambda's poller
would have asked, and been answered nothing), and what succeeded is deleted there, as
DeleteMessage deletes it, without a request.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

Handler = Callable[[dict[str, Any], Any], Any]


class Clock(Protocol):
    def now(self) -> datetime: ...


class QueueStore(Protocol):
    """The queue's store, reached without a request (moto's, in this process)."""

    def holds(self) -> bool:
        """Whether the queue holds any message, visible or not."""
        ...

    def delete(self, receipt: str) -> None:
        """The received message deleted, as DeleteMessage deletes it."""
        ...


@dataclass
class LocalContext:
    """The parts of Lambda's context object that Powertools and our handlers read."""

    function_name: str = "nodescaler-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/nodescaler-local"
    log_stream_name: str = "local"
    remaining_ms: int = 60_000  # the time left when invoked: the evaluate function's timeout

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:eu-west-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@dataclass(frozen=True)
class Delivery:
    """One invocation by the event source: how many records, which ones failed."""

    received: int
    failed: tuple[str, ...]  # message ids


# Well within the 12 hours SQS lets a message stay hidden: one the harness holds back stays
# hidden in moto until the sandbox's clock says it is due, however long that takes.
HELD = 6 * 3600


class SqsEventSource:
    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        handler: Handler,
        *,
        batch_size: int = 10,
        clock: Clock | None = None,
        context: Callable[[], LocalContext] = LocalContext,  # each invocation's
        store: QueueStore | None = None,
    ) -> None:
        self._sqs = sqs
        self._store = store  # the queue reached without a request, if it can be
        self.context = context  # a test may swap it, or the handler, between invocations
        self._url = queue_url
        self.handler = handler
        self._batch_size = batch_size
        self._clock = clock
        attributes = sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["QueueArn", "VisibilityTimeout"]
        )["Attributes"]
        self._arn = attributes["QueueArn"]
        self._region = self._arn.split(":")[3]
        self._visibility = timedelta(seconds=int(attributes["VisibilityTimeout"]))
        self._held: dict[str, tuple[str, datetime]] = {}  # message id → (receipt, due)
        self._asked: dict[str, int] = {}  # receipt → seconds the function asked for
        self._own_call = False
        self.watch(sqs)

    def watch(self, sqs: Any) -> None:
        """Note the visibility the function asks for through this client (its own, when it
        has one apart from the harness's), to keep it on the sandbox's clock."""
        sqs.meta.events.register(
            "before-parameter-build.sqs.ChangeMessageVisibility", self._visibility_asked
        )

    def _now(self) -> datetime:
        return self._clock.now() if self._clock else datetime.now(UTC)

    def _visibility_asked(self, params: dict[str, Any], **_: Any) -> None:
        """The function asks SQS to show a failed message again after N seconds: noted, to
        be kept on the sandbox's clock, and moto told to hold it until the harness says."""
        if self._own_call or params.get("QueueUrl") != self._url:
            return
        self._asked[params["ReceiptHandle"]] = int(params["VisibilityTimeout"])
        params["VisibilityTimeout"] = HELD

    def _set_visibility(self, receipt: str, seconds: int) -> None:
        self._own_call = True
        try:
            self._sqs.change_message_visibility(
                QueueUrl=self._url, ReceiptHandle=receipt, VisibilityTimeout=seconds
            )
        finally:
            self._own_call = False

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": message.get("MessageAttributes", {}),
            "md5OfBody": hashlib.md5(message["Body"].encode()).hexdigest(),
            "eventSource": "aws:sqs",
            "eventSourceARN": self._arn,
            "awsRegion": self._region,
        }

    def release_due(self) -> None:
        """Failed messages whose visibility timeout has passed become visible again."""
        now = self._now()
        for message_id, (receipt, due) in list(self._held.items()):
            if due <= now:
                self._set_visibility(receipt, 0)
                del self._held[message_id]

    @property
    def next_due(self) -> datetime | None:
        """When the next failed message shows again, if any is held."""
        return min((due for _, due in self._held.values()), default=None)

    def poll(self) -> Delivery | None:
        """One receive and one invocation; None when the queue had nothing to deliver."""
        self.release_due()
        if self._store is not None and not self._store.holds():
            return None  # a receive would be answered nothing
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._batch_size,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return None
        self._asked.clear()
        try:
            response = self.handler(
                {"Records": [self._record(m) for m in messages]}, self.context()
            )
        except Exception:  # as Lambda does: an invocation error fails the whole batch
            failed = {m["MessageId"] for m in messages}
        else:
            failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
        now = self._now()
        for message in messages:
            receipt = message["ReceiptHandle"]
            if message["MessageId"] not in failed:
                self._delete(receipt)
                continue
            asked = self._asked.get(receipt)
            if asked is None:  # left to the queue's visibility timeout
                self._set_visibility(receipt, HELD)
                due = now + self._visibility
            else:
                due = now + timedelta(seconds=asked)
            self._held[message["MessageId"]] = (receipt, due)
        return Delivery(received=len(messages), failed=tuple(sorted(failed)))

    def _delete(self, receipt: str) -> None:
        if self._store is not None:
            self._store.delete(receipt)
        else:
            self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=receipt)

    def drain(
        self, max_deliveries: int = 1000, *, wait: Callable[[timedelta], None] | None = None
    ) -> list[Delivery]:
        """Poll until the queue has nothing left to deliver (dead-lettered messages included).
        With `wait`, time is let pass (the sandbox's clock moved on) until each failed
        message shows again, as Lambda keeps polling; without it, held ones stay held."""
        deliveries: list[Delivery] = []
        while True:
            delivery = self.poll()
            if delivery is None:
                due = self.next_due
                if wait is None or due is None:
                    return deliveries
                wait(max(due - self._now(), timedelta(0)))
                continue
            deliveries.append(delivery)
            if len(deliveries) >= max_deliveries:
                raise RuntimeError(f"{self._url}: still delivering after {max_deliveries} batches")

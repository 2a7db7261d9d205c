"""Runs the handlers the way Lambda does, against moto: a context, and an SQS event source.

moto stores queues but invokes nothing, so `SqsEventSource` stands in for Lambda's event
source mapping: receive a batch, invoke the handler, delete what it did not report as
failed (all of it, if the invocation raised), and make the failures visible again.
SQS's own redrive policy, which moto applies on receive, then dead-letters a message
after its queue's maxReceiveCount.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class LocalContext:
    """The parts of Lambda's context object that Powertools and our handlers read."""

    function_name: str = "nodescaler-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/nodescaler-local"
    log_stream_name: str = "local"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:eu-west-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass(frozen=True)
class Delivery:
    """One invocation by the event source: how many records, which ones failed."""

    received: int
    failed: tuple[str, ...]  # message ids


class SqsEventSource:
    def __init__(self, sqs: Any, queue_url: str, handler: Handler, *, batch_size: int = 10) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._handler = handler
        self._batch_size = batch_size
        attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
        self._arn = attributes["Attributes"]["QueueArn"]
        self._region = self._arn.split(":")[3]

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

    def poll(self) -> Delivery | None:
        """One receive and one invocation; None when the queue had nothing to deliver."""
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=self._batch_size,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return None
        try:
            response = self._handler(
                {"Records": [self._record(m) for m in messages]}, LocalContext()
            )
        except Exception:  # as Lambda does: an invocation error fails the whole batch
            failed = {m["MessageId"] for m in messages}
        else:
            failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
        for message in messages:
            if message["MessageId"] in failed:  # visible again at once: no need to wait
                self._sqs.change_message_visibility(
                    QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
            else:
                self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])
        return Delivery(received=len(messages), failed=tuple(sorted(failed)))

    def drain(self, max_deliveries: int = 1000) -> list[Delivery]:
        """Poll until the queue has nothing left to deliver (dead-lettered messages included)."""
        deliveries: list[Delivery] = []
        while (delivery := self.poll()) is not None:
            deliveries.append(delivery)
            if len(deliveries) >= max_deliveries:
                raise RuntimeError(f"{self._url}: still delivering after {max_deliveries} batches")
        return deliveries

"""The SQSQueue metric's producer: a queue's length, read with GetQueueAttributes.

An AWS error never escapes: it becomes `MetricUnavailable` naming the queue and the cause.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.aws import describe_aws_error
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.policy import MetricBase, SqsQueueMetric, SqsQueueSource
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading
from nodescaler.errors import QueueUnreadableError
from nodescaler.ports import ProducerContext

# What SQS answers for a queue that no longer exists (GetQueueUrl, GetQueueAttributes).
QUEUE_GONE = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


class SqsQueueLength:
    """Messages waiting the way KEDA counts them: visible + in flight (+ delayed)."""

    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs
        self._urls: dict[str, str] = {}  # queue as written → URL, for the warm container

    def _url(self, queue: str) -> str:
        if queue.startswith("https://"):
            return queue
        if queue not in self._urls:
            request: dict[str, str] = {"QueueName": queue}
            if queue.startswith("arn:"):  # arn:aws:sqs:region:account:name
                *_, account, name = queue.split(":")
                request = {"QueueName": name, "QueueOwnerAWSAccountId": account}
            self._urls[queue] = self._sqs.get_queue_url(**request)["QueueUrl"]
        return self._urls[queue]

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        assert isinstance(metric, SqsQueueMetric)
        try:
            counts = self._counts(metric.sqs_queue)
        except QueueUnreadableError as error:
            return MetricUnavailable(reason=str(error))
        labels = ["visible", "in flight", "delayed"][: len(counts)]
        detail = " + ".join(f"{n} {label}" for n, label in zip(counts, labels, strict=True))
        return MetricReading(value=sum(counts), at=now, detail=detail)

    def backlog(self, source: SqsQueueSource) -> int:
        """The fast path's look: the queue's messages as its metric counts them; an error
        raises QueueUnreadableError naming the queue, `gone` when it no longer exists."""
        return sum(self._counts(source))

    def _counts(self, source: SqsQueueSource) -> list[int]:
        names = ["ApproximateNumberOfMessages"]
        if source.include_in_flight:
            names.append("ApproximateNumberOfMessagesNotVisible")
        if source.include_delayed:
            names.append("ApproximateNumberOfMessagesDelayed")
        try:
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=self._url(source.queue), AttributeNames=names
            )["Attributes"]
        except (ClientError, BotoCoreError) as error:
            self._urls.pop(source.queue, None)
            gone = isinstance(error, ClientError) and (
                error.response.get("Error", {}).get("Code") in QUEUE_GONE
            )
            raise QueueUnreadableError(
                f"queue {source.queue}: {describe_aws_error(error)}", gone=gone
            ) from None
        return [int(attributes.get(name, 0)) for name in names]


def producer(context: ProducerContext) -> SqsQueueLength:
    """The SQSQueue type's producer (its descriptor names this function)."""
    return SqsQueueLength(context.clients.sqs)

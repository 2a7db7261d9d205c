"""The evaluation queue on SQS FIFO: one message group per node group, so a group's
evaluations run one at a time while different groups run in parallel; and what becomes of
a request whose evaluation failed (tried again soon, or set aside in the dead-letter queue)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.errors import QueueSendError

if TYPE_CHECKING:  # a pydantic model, named here only as a type: the import loads no pydantic
    from nodescaler.events.evaluation_request import EvaluationRequest

BATCH = 10  # the most SendMessageBatch takes
# Batches on the wire at once: a tick over 1,000 groups waits for 13 round trips, not 100.
IN_FLIGHT = 8  # within botocore's default pool of 10 connections
# What SQS accepts in a MessageGroupId; ASG names may also hold spaces and be 255 long.
_GROUP_ID = re.compile(r"^[!-~]{1,128}$")


def message_group_id(node_group: str) -> str:
    if _GROUP_ID.match(node_group):
        return node_group
    return "sha256-" + hashlib.sha256(node_group.encode()).hexdigest()


def deduplication_id(request: EvaluationRequest) -> str:
    # A retried tick re-sends the same requests; SQS drops them for five minutes.
    key = f"{request.node_group}\n{request.event_id}".encode()
    return hashlib.sha256(key).hexdigest()


class SqsEvaluationQueue:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self._sqs = sqs
        self._url = queue_url

    def send(self, requests: Sequence[EvaluationRequest]) -> None:
        """Every batch is sent, even after one fails, so that one refusal leaves only its own
        groups to the retry; the error then names each group left unqueued, and why."""
        batches = [requests[start : start + BATCH] for start in range(0, len(requests), BATCH)]
        if len(batches) > 1:
            with ThreadPoolExecutor(min(IN_FLIGHT, len(batches))) as pool:
                results = list(pool.map(self._send_batch, batches))
        else:  # one batch or none: no thread to start
            results = [self._send_batch(batch) for batch in batches]
        unqueued = [left for result in results for left in result]
        if unqueued:
            why: dict[str, list[str]] = {}
            for group, reason in unqueued:
                why.setdefault(reason, []).append(group)
            raise QueueSendError(
                f"{len(unqueued)} of {len(requests)} evaluations not queued: "
                + "; ".join(f"{', '.join(groups)} ({reason})" for reason, groups in why.items()),
                unqueued=[group for group, _ in unqueued],
            )

    def _send_batch(self, batch: Sequence[EvaluationRequest]) -> list[tuple[str, str]]:
        """The groups of `batch` SQS did not take, each with the reason."""
        entries = [
            {
                "Id": str(index),
                "MessageBody": request.model_dump_json(),
                "MessageGroupId": message_group_id(request.node_group),
                "MessageDeduplicationId": deduplication_id(request),
            }
            for index, request in enumerate(batch)
        ]
        try:
            response = self._sqs.send_message_batch(QueueUrl=self._url, Entries=entries)
            return [
                (batch[int(f["Id"])].node_group, f"{f.get('Code', '?')}: {f.get('Message', '')}")
                for f in response.get("Failed", [])
            ]
        # botocore's retries spent, or anything else: the other batches still go, and the
        # error names this batch's groups with it rather than leaving them unsaid
        except Exception as error:
            why = str(error) if isinstance(error, BotoCoreError | ClientError) else repr(error)
            return [(request.node_group, why) for request in batch]


# A failed evaluation is tried again after 5 s, then 10, 20, 40, and every minute after:
# left to the queue's visibility timeout (6 minutes, six times the function's), it would
# hold its group's FIFO stream that long.
FIRST_RETRY = timedelta(seconds=5)
LAST_RETRY = timedelta(minutes=1)


def retry_delay(receive_count: int) -> timedelta:
    """How long a request that failed on its `receive_count`th receive stays invisible."""
    delay: timedelta = FIRST_RETRY * 2 ** min(max(receive_count - 1, 0), 10)
    return min(delay, LAST_RETRY)


class SqsRedelivery:
    """Failed evaluation requests: made visible again after `retry_delay`, or, when trying
    again cannot help, moved to the dead-letter queue at once with the reason."""

    def __init__(self, sqs: Any, queue_url: str, dead_letter_url: str) -> None:
        self._sqs = sqs
        self._url = queue_url
        self._dead_letters = dead_letter_url

    def retry_in(self, receipt_handle: str, delay: timedelta) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=self._url,
            ReceiptHandle=receipt_handle,
            VisibilityTimeout=int(delay.total_seconds()),
        )

    def requeue(self, message_id: str, body: str, group_id: str) -> None:
        """The request as a new message, whose receives start again from none.

        SQS counts every receive towards the redrive policy's maxReceiveCount, however the
        message came back (its visibility timeout, or ChangeMessageVisibility to 0):
        https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html
        Its deduplication id is new, derived from the received message's id: the one it
        was sent with is still tracked for five minutes, even after its deletion, and would
        be accepted and dropped (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-key-terms.html);
        a batch Lambda retries requeues it under the same new id, once."""
        self._sqs.send_message(
            QueueUrl=self._url,
            MessageBody=body,
            MessageGroupId=message_group_id(group_id or "malformed"),
            MessageDeduplicationId=hashlib.sha256(f"requeued\n{message_id}".encode()).hexdigest(),
        )

    def dead_letter(self, message_id: str, body: str, group_id: str, reason: str) -> None:
        self._sqs.send_message(
            QueueUrl=self._dead_letters,
            MessageBody=body or "(empty)",  # SQS takes no empty body; a malformed one may be
            MessageGroupId=message_group_id(group_id or "malformed"),
            MessageDeduplicationId=hashlib.sha256(message_id.encode()).hexdigest(),
            MessageAttributes={"reason": {"DataType": "String", "StringValue": reason[:1024]}},
        )

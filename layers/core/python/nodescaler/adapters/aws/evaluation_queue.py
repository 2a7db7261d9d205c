"""The evaluation queue on SQS FIFO: one message group per node group, so a group's
evaluations run one at a time while different groups run in parallel."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nodescaler.ports import QueueSendError

if TYPE_CHECKING:  # a pydantic model, named here only as a type: the import loads no pydantic
    from nodescaler.messages import EvaluationRequest

BATCH = 10  # the most SendMessageBatch takes
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
        failed: list[str] = []
        for start in range(0, len(requests), BATCH):
            chunk = requests[start : start + BATCH]
            entries = [
                {
                    "Id": str(index),
                    "MessageBody": request.model_dump_json(),
                    "MessageGroupId": message_group_id(request.node_group),
                    "MessageDeduplicationId": deduplication_id(request),
                }
                for index, request in enumerate(chunk)
            ]
            response = self._sqs.send_message_batch(QueueUrl=self._url, Entries=entries)
            failed.extend(
                f"{chunk[int(f['Id'])].node_group} ({f.get('Code', '?')}: {f.get('Message', '')})"
                for f in response.get("Failed", [])
            )
        if failed:
            raise QueueSendError(
                f"{len(failed)} of {len(requests)} evaluations not queued: " + ", ".join(failed)
            )

"""SqsEvaluationQueue against moto: one FIFO message group per node group, deduplicated
per event, and a clear error naming the groups that could not be queued."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from nodescaler.adapters.aws.evaluation_queue import (
    SqsEvaluationQueue,
    SqsRedelivery,
    message_group_id,
)
from nodescaler.errors import QueueSendError
from nodescaler.events.evaluation_request import EvaluationRequest

from tests.aws import client, make_evaluation_queue

AT = datetime(2026, 11, 23, 9, tzinfo=UTC)


def requests(*groups: str, event_id: str = "tick-1") -> list[EvaluationRequest]:
    return [
        EvaluationRequest(node_group=g, event_id=event_id, cause="tick", requested_at=AT)
        for g in groups
    ]


def received(url: str) -> list[dict[str, str]]:
    messages = client("sqs").receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    )["Messages"]
    return [{"group": m["Attributes"]["MessageGroupId"], **json.loads(m["Body"])} for m in messages]


def test_each_request_is_a_message_in_its_node_groups_message_group() -> None:
    url = make_evaluation_queue()
    SqsEvaluationQueue(client("sqs"), url).send(requests("gpu", "web"))
    assert [(m["group"], m["node_group"], m["event_id"]) for m in received(url)] == [
        ("gpu", "gpu", "tick-1"),
        ("web", "web", "tick-1"),
    ]


def test_a_retried_tick_does_not_queue_its_requests_twice() -> None:
    url = make_evaluation_queue()
    queue = SqsEvaluationQueue(client("sqs"), url)
    queue.send(requests("gpu"))
    queue.send(requests("gpu"))  # the same tick again
    queue.send(requests("gpu", event_id="tick-2"))
    assert [m["event_id"] for m in received(url)] == ["tick-1", "tick-2"]


def test_a_group_name_sqs_would_refuse_as_a_message_group_gets_a_stable_hash() -> None:
    assert message_group_id("gpu-a_1.x") == "gpu-a_1.x"
    spaced = message_group_id("GPU nodes (eu)")
    assert spaced.startswith("sha256-") and spaced == message_group_id("GPU nodes (eu)")
    assert len(message_group_id("n" * 255)) <= 128
    url = make_evaluation_queue()
    SqsEvaluationQueue(client("sqs"), url).send(requests("GPU nodes (eu)"))
    assert [m["node_group"] for m in received(url)] == ["GPU nodes (eu)"]


class HalfFailing:
    """SendMessageBatch answering as SQS does when some entries are refused."""

    def send_message_batch(self, **request: Any) -> dict[str, object]:
        entries = request["Entries"]
        return {
            "Successful": [{"Id": e["Id"]} for e in entries[::2]],
            "Failed": [
                {
                    "Id": e["Id"],
                    "Code": "InternalError",
                    "SenderFault": False,
                    "Message": "try again",
                }
                for e in entries[1::2]
            ],
        }


def test_entries_sqs_refuses_are_named_by_group_in_one_error() -> None:
    names = [f"ng-{i:02}" for i in range(12)]
    with pytest.raises(QueueSendError) as caught:
        SqsEvaluationQueue(HalfFailing(), "https://queue").send(requests(*names))
    assert str(caught.value) == (
        "6 of 12 evaluations not queued: "
        + ", ".join(f"ng-{i:02}" for i in (1, 3, 5, 7, 9, 11))
        + " (InternalError: try again)"
    )
    assert caught.value.unqueued == {f"ng-{i:02}" for i in (1, 3, 5, 7, 9, 11)}


def test_a_batch_refused_whole_leaves_only_its_groups_unqueued() -> None:
    url = make_evaluation_queue()
    sqs = client("sqs")
    refused = {"ng-10", "ng-11"}  # the second of three batches

    def throttle_the_second_batch(params: dict[str, Any], **_: Any) -> None:
        bodies = {json.loads(e["MessageBody"])["node_group"] for e in params["Entries"]}
        if bodies & refused:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
                "SendMessageBatch",
            )

    sqs.meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", throttle_the_second_batch
    )
    names = [f"ng-{i:02}" for i in range(25)]
    with pytest.raises(QueueSendError) as caught:
        SqsEvaluationQueue(sqs, url).send(requests(*names))
    second = ", ".join(names[10:20])
    assert str(caught.value) == (
        f"10 of 25 evaluations not queued: {second} (An error occurred (ThrottlingException) "
        "when calling the SendMessageBatch operation: Rate exceeded)"
    )
    queued = {m["node_group"] for m in received(url) + received(url)}  # 10 at most a receive
    assert queued == set(names[:10] + names[20:])


class Garbled:
    """SendMessageBatch answering with what no SQS sends: an unexpected error, not a refusal."""

    def send_message_batch(self, **_: Any) -> dict[str, object]:
        return {"Failed": [{"Code": "InternalError"}]}  # no Id


def test_an_unexpected_error_in_a_batch_still_names_its_groups() -> None:
    with pytest.raises(QueueSendError) as caught:
        SqsEvaluationQueue(Garbled(), "https://queue").send(requests("gpu", "web"))
    assert str(caught.value) == "2 of 2 evaluations not queued: gpu, web (KeyError('Id'))"


def test_nothing_to_queue_sends_nothing() -> None:
    SqsEvaluationQueue(object(), "https://queue").send([])  # no SQS call to make


def test_many_batches_are_all_queued() -> None:
    url = make_evaluation_queue()
    names = [f"ng-{i:03}" for i in range(95)]
    SqsEvaluationQueue(client("sqs"), url).send(requests(*names))
    attributes = client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "95"


def test_a_request_requeued_is_a_new_message_once_however_often_its_batch_is_retried() -> None:
    # Given a request sent, received (its deduplication id still tracked five minutes)
    url = make_evaluation_queue()
    sqs = client("sqs")
    SqsEvaluationQueue(sqs, url).send(requests("gpu"))
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    redelivery = SqsRedelivery(sqs, url, url.replace(".fifo", "-dlq.fifo"))
    # When it is requeued, and again (Lambda retried the batch that requeued it)
    for _ in range(2):
        redelivery.requeue(message["MessageId"], message["Body"], "gpu")
    # Then it is in the queue once, as sent, in its group
    assert [(m["group"], m["event_id"]) for m in received(url)] == [("gpu", "tick-1")]

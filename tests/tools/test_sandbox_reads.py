"""What the sandbox reads from moto's store directly (its server runs in this process)
is what the API answers: a state item (`provision.MotoItems`); and Lambda's event source
(`lambda_local.SqsEventSource`), given the queue's store (`provision.MotoQueueStore`),
sends no receive that could answer nothing and deletes what succeeded as DeleteMessage
does."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler_sandbox.lambda_local import SqsEventSource
from nodescaler_sandbox.provision import MotoItems, MotoQueueStore, moto_queue

from tests.aws import REGION, CallCounter, aws, client, make_state_table  # noqa: F401

TABLE = "state"


def test_a_state_item_read_from_moto_is_the_item_the_api_answers() -> None:
    dynamodb = make_state_table(TABLE)
    item = {
        "pk": {"S": "group#a"},
        "sk": {"S": "state"},
        "version": {"N": "7"},
        "history": {"S": json.dumps({"samples": [1, 2.5, "x"]})},
        "nested": {"M": {"l": {"L": [{"S": "é"}, {"N": "1.50"}, {"BOOL": True}, {"NULL": True}]}}},
        "set": {"SS": ["b", "a"]},
        "numbers": {"NS": ["3", "1"]},
    }
    dynamodb.put_item(TableName=TABLE, Item=item)
    key = {"pk": {"S": "group#a"}, "sk": {"S": "state"}}
    direct = MotoItems(REGION).get_item(TableName=TABLE, Key=key, ConsistentRead=True)
    answered = dynamodb.get_item(TableName=TABLE, Key=key, ConsistentRead=True)
    assert direct["Item"] == answered["Item"]
    missing = {"pk": {"S": "group#b"}, "sk": {"S": "state"}}
    assert MotoItems(REGION).get_item(TableName=TABLE, Key=missing) == {}
    assert "Item" not in dynamodb.get_item(TableName=TABLE, Key=missing)


def test_a_groups_state_loads_the_same_either_way() -> None:
    from nodescaler.domain.scaling.group_state import GroupState

    api = DynamoStateStore(make_state_table(TABLE), TABLE)
    api.save(GroupState(group="a"))
    direct = DynamoStateStore(MotoItems(REGION), TABLE)
    assert direct.load("a") == api.load("a") and direct.load("a").version == 1
    assert direct.load("b") == api.load("b")


def test_an_item_with_bytes_is_refused_not_read_as_base64() -> None:
    dynamodb = make_state_table(TABLE)
    item = {"pk": {"S": "g"}, "sk": {"S": "s"}, "blob": {"B": b"\x00\x01"}}
    dynamodb.put_item(TableName=TABLE, Item=item)
    with pytest.raises(ValueError, match="binary"):
        MotoItems(REGION).get_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})


def _source(direct: bool, handled: list[Any]) -> tuple[SqsEventSource, CallCounter, str]:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="e.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    counter = CallCounter()
    counter.watch(sqs)
    store = MotoQueueStore(url, region=REGION) if direct else None
    source = SqsEventSource(sqs, url, lambda event, _: handled.append(event), store=store)
    return source, counter, url


def test_an_empty_queue_is_not_asked_for_what_it_cannot_have() -> None:
    handled: list[Any] = []
    source, counter, url = _source(True, handled)
    assert source.poll() is None and counter.calls["ReceiveMessage"] == 0
    client("sqs").send_message(
        QueueUrl=url, MessageBody="{}", MessageGroupId="g", MessageDeduplicationId="1"
    )
    delivered = source.drain()
    assert [d.received for d in delivered] == [1] and len(handled) == 1
    # the message deleted in the store: the queue holds nothing, the last poll asked nothing
    assert counter.calls["ReceiveMessage"] == 1 and counter.calls["DeleteMessage"] == 0
    assert not moto_queue("e.fifo", region=REGION)._messages


def test_without_a_store_every_poll_asks_and_deletes_by_the_api() -> None:
    source, counter, url = _source(False, [])
    assert source.poll() is None and counter.calls["ReceiveMessage"] == 1
    client("sqs").send_message(
        QueueUrl=url, MessageBody="{}", MessageGroupId="g", MessageDeduplicationId="1"
    )
    assert [d.received for d in source.drain()] == [1]
    assert counter.calls["ReceiveMessage"] == 3 and counter.calls["DeleteMessage"] == 1
    assert not moto_queue("e.fifo", region=REGION)._messages


def test_a_held_message_keeps_the_queue_asked() -> None:
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    handled: list[Any] = []
    source, counter, url = _source(True, handled)
    source._clock = type("C", (), {"now": lambda self: now[0]})()
    source.handler = lambda event, _: {
        "batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]]
    }
    client("sqs").send_message(
        QueueUrl=url, MessageBody="{}", MessageGroupId="g", MessageDeduplicationId="1"
    )
    assert source.poll() is not None  # failed: held, still in the queue
    assert source.poll() is None and counter.calls["ReceiveMessage"] == 2

"""The benches' AWS: moto's server with its SQS made faster answers as moto itself does, and
the stopwatch splits time on the wire from nodescaler's own when calls overlap."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from nodescaler_bench.aws import REGION, AwsStopwatch, fake_credentials, moto_server

pytestmark = pytest.mark.slow  # moto's server

COUNTS = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


@pytest.fixture(scope="module")
def faster_moto() -> Iterator[str]:
    with fake_credentials(), moto_server() as url:
        yield url


def queue_life(sqs: Any) -> list[tuple[int, ...]]:
    """A queue's visible, in-flight and delayed counts as messages come, go out and return;
    then a FIFO queue's visible count after a duplicate is sent."""

    def counts(url: str) -> tuple[int, ...]:
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=COUNTS)["Attributes"]
        return tuple(int(attributes[name]) for name in COUNTS)

    seen = []
    url = sqs.create_queue(QueueName="life")["QueueUrl"]
    for body in "abcde":
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    seen.append(counts(url))
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=60)
    seen.append(counts(url))
    handle = received["Messages"][0]["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    time.sleep(0.01)  # visible once the clock is past its visibility
    seen.append(counts(url))
    fifo = sqs.create_queue(QueueName="dedup.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    entry = {"Id": "0", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d"}
    for _ in range(2):
        sqs.send_message_batch(QueueUrl=fifo, Entries=[entry])
    seen.append(counts(fifo))
    return seen


def test_the_faster_sqs_counts_messages_as_moto_itself_does(faster_moto: str) -> None:
    faster = queue_life(boto3.client("sqs", region_name=REGION, endpoint_url=faster_moto))
    with fake_credentials(), mock_aws():  # moto as it ships, in this process
        shipped = queue_life(boto3.client("sqs", region_name=REGION))
    assert faster == shipped == [(5, 0, 1), (3, 2, 1), (4, 1, 1), (1, 0, 0)]


def test_overlapping_calls_count_once_on_the_wire_and_each_to_its_operation() -> None:
    stopwatch = AwsStopwatch()
    first_out, second_out = threading.Event(), threading.Event()

    def attempt(went_out: threading.Event, wait_for: threading.Event) -> None:
        stopwatch._send()
        went_out.set()
        wait_for.wait(5)
        time.sleep(0.2)
        stopwatch._answered("before-parse.sqs.SendMessageBatch")
        stopwatch._answered("response-received.sqs.SendMessageBatch")  # already stopped

    started = time.perf_counter()
    threads = [
        threading.Thread(target=attempt, args=(first_out, second_out)),
        threading.Thread(target=attempt, args=(second_out, first_out)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started

    assert stopwatch._on_wire == 0  # `response-received` stopped nothing a second time
    summed = stopwatch.waiting["SendMessageBatch"]
    assert summed >= 0.4  # each attempt, 200 ms at least, counted once
    assert 0.2 <= stopwatch.seconds <= elapsed  # the overlap counted once on the wire
    assert stopwatch.seconds < summed

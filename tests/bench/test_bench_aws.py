"""The benches' AWS: moto's server with its SQS made faster still answers as moto does, and
the stopwatch splits time on the wire from nodescaler's own when calls overlap."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from nodescaler_tools.bench.aws import REGION, AwsStopwatch, fake_credentials, moto_server

pytestmark = pytest.mark.slow  # moto's server


@pytest.fixture(scope="module")
def sqs() -> Iterator[Any]:
    with fake_credentials(), moto_server() as url:
        yield boto3.client("sqs", region_name=REGION, endpoint_url=url)


def counts(sqs: Any, url: str) -> tuple[int, int, int]:
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    visible, in_flight, delayed = (int(attributes[name]) for name in names)
    return visible, in_flight, delayed


def test_the_faster_sqs_counts_visible_in_flight_and_delayed_messages_as_moto_does(
    sqs: Any,
) -> None:
    url = sqs.create_queue(QueueName="counts")["QueueUrl"]
    for body in "abcde":
        sqs.send_message(QueueUrl=url, MessageBody=body)
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    assert counts(sqs, url) == (5, 0, 1)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=60)
    assert len(received["Messages"]) == 2
    assert counts(sqs, url) == (3, 2, 1)
    handle = received["Messages"][0]["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    time.sleep(0.01)  # visible once the clock is past its visibility
    assert counts(sqs, url) == (4, 1, 1)


def test_the_faster_fifo_queue_still_drops_a_duplicate(sqs: Any) -> None:
    attributes = {"FifoQueue": "true"}
    url = sqs.create_queue(QueueName="dedup.fifo", Attributes=attributes)["QueueUrl"]
    entry = {"Id": "0", "MessageBody": "x", "MessageGroupId": "g", "MessageDeduplicationId": "d"}
    for _ in range(2):
        sqs.send_message_batch(QueueUrl=url, Entries=[entry])
    assert counts(sqs, url) == (1, 0, 0)


def test_overlapping_calls_count_once_on_the_wire_and_each_to_its_operation() -> None:
    stopwatch = AwsStopwatch()
    first_out, second_out = threading.Event(), threading.Event()

    def attempt(went_out: threading.Event, wait_for: threading.Event) -> None:
        stopwatch._send()
        went_out.set()
        wait_for.wait(5)
        time.sleep(0.2)
        stopwatch._answered("before-parse.sqs.SendMessageBatch")

    started = time.perf_counter()
    first = threading.Thread(target=attempt, args=(first_out, second_out))
    second = threading.Thread(target=attempt, args=(second_out, first_out))
    first.start()
    second.start()
    first.join()
    second.join()
    elapsed = time.perf_counter() - started

    summed = stopwatch.waiting["SendMessageBatch"]
    assert 0.2 <= stopwatch.seconds <= elapsed < summed  # both answers took 200 ms, together
    stopwatch._answered("response-received.sqs.SendMessageBatch")  # nothing left to stop
    assert stopwatch.seconds <= elapsed

"""Metric producers against moto: SQS queue length, CloudWatch metrics and metric math, schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from nodescaler.adapters.aws.cloudwatch import CloudWatchMetrics, metric_data_queries
from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.policy import SqsQueueMetric
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable
from nodescaler.service.producers import Producers

from tests.aws import client
from tests.builders import metric, policy

GROUP = NodeGroup(name="ng", desired=1, min_size=0, max_size=10, in_service=1)


def queue(name: str, **options: bool):  # type: ignore[no-untyped-def]
    return metric(
        {
            "type": "SQSQueue",
            "sqsQueue": {"queue": name, **options},
            "target": {"type": "AverageValue", "averageValue": 4},
        }
    )


def test_queue_length_counts_visible_and_in_flight_messages() -> None:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    for i in range(10):
        sqs.send_message(QueueUrl=url, MessageBody=str(i))
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3, VisibilityTimeout=300)
    now = datetime.now(UTC)
    reading = SqsQueueLength(sqs).read(queue("jobs"), GROUP, now)
    assert reading == MetricReading(value=10, at=now, detail="7 visible + 3 in flight")


def test_queue_length_counts_delayed_messages_only_when_asked() -> None:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="later")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=600)
    sqs.send_message(QueueUrl=url, MessageBody="y")
    now = datetime.now(UTC)
    source = SqsQueueLength(sqs)
    assert source.read(queue("later"), GROUP, now).value == 1  # type: ignore[union-attr]
    assert source.read(queue("later", includeDelayed=True), GROUP, now).value == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("form", ["name", "url", "arn"])
def test_a_queue_can_be_named_by_name_url_or_arn(form: str) -> None:
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    reading = SqsQueueLength(sqs).read(
        queue({"name": "jobs", "url": url, "arn": arn}[form]), GROUP, datetime.now(UTC)
    )
    assert reading.value == 1  # type: ignore[union-attr]


def test_given_a_queue_that_does_not_exist_then_the_reading_is_unavailable_and_says_so() -> None:
    reading = SqsQueueLength(client("sqs")).read(queue("missing"), GROUP, datetime.now(UTC))
    assert isinstance(reading, MetricUnavailable)
    assert reading.reason.startswith("queue missing: AWS.SimpleQueueService.NonExistentQueue")


def _put(name: str, values: list[tuple[datetime, float]]) -> None:
    client("cloudwatch").put_metric_data(
        Namespace="App",
        MetricData=[
            {
                "MetricName": name,
                "Timestamp": at,
                "Value": v,
                "Dimensions": [{"Name": "Env", "Value": "prod"}],
            }
            for at, v in values
        ],
    )


def cloudwatch_metric(**source: Any):  # type: ignore[no-untyped-def]
    return metric(
        {"type": "CloudWatch", "cloudWatch": source, "target": {"type": "Value", "value": 10}}
    )


STAT = {
    "namespace": "App",
    "metricName": "Depth",
    "dimensions": {"Env": "prod"},
    "statistic": "Maximum",
}


def test_cloudwatch_reads_the_latest_datapoint_of_a_metric() -> None:
    now = datetime.now(UTC).replace(second=30, microsecond=0)
    _put("Depth", [(now - timedelta(minutes=3), 5), (now - timedelta(minutes=1), 42)])
    reading = CloudWatchMetrics(client("cloudwatch")).read(
        cloudwatch_metric(metric=STAT), GROUP, now
    )
    assert isinstance(reading, MetricReading)
    assert reading.value == 42
    assert now - reading.at <= timedelta(minutes=2)


def test_cloudwatch_reads_the_series_of_an_expression() -> None:
    # moto evaluates no metric math (an expression that is one query id is all it resolves),
    # so this checks the wiring end to end; the query shape for real math is checked below.
    now = datetime.now(UTC).replace(second=30, microsecond=0)
    _put("Depth", [(now - timedelta(minutes=1), 40)])
    reading = CloudWatchMetrics(client("cloudwatch")).read(
        cloudwatch_metric(expression="depth", metrics={"depth": STAT}), GROUP, now
    )
    assert isinstance(reading, MetricReading)
    assert reading.value == 40


def test_a_metric_math_expression_becomes_hidden_stat_queries_and_one_returned_expression() -> None:
    workers = STAT | {"metricName": "Workers"}
    queries = metric_data_queries(
        cloudwatch_metric(expression="depth / workers", metrics={"depth": STAT, "workers": workers})
    )
    assert [(q["Id"], q["ReturnData"], q.get("Expression")) for q in queries] == [
        ("depth", False, None),
        ("workers", False, None),
        ("value", True, "depth / workers"),
    ]
    assert queries[1]["MetricStat"] == {
        "Metric": {
            "Namespace": "App",
            "MetricName": "Workers",
            "Dimensions": [{"Name": "Env", "Value": "prod"}],
        },
        "Period": 60,
        "Stat": "Maximum",
    }


def test_given_only_old_datapoints_then_cloudwatch_is_unavailable() -> None:
    now = datetime.now(UTC)
    _put("Depth", [(now - timedelta(minutes=30), 5)])
    reading = CloudWatchMetrics(client("cloudwatch")).read(
        cloudwatch_metric(metric=STAT), GROUP, now
    )
    assert reading == MetricUnavailable(reason="CloudWatch returned no datapoint in the last 300s")


def test_given_cloudwatch_throttles_then_the_reading_is_unavailable_and_names_the_error() -> None:
    class Throttled:
        def get_metric_data(self, **_: Any) -> Any:
            raise ClientError(
                {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "GetMetricData"
            )

    reading = CloudWatchMetrics(Throttled()).read(
        cloudwatch_metric(metric=STAT), GROUP, datetime.now(UTC)
    )
    assert reading == MetricUnavailable(reason="CloudWatch: Throttling: Rate exceeded")


def test_producers_read_every_metric_of_a_policy_and_never_raise() -> None:
    sqs = client("sqs")
    sqs.create_queue(QueueName="jobs")
    the_policy = policy(
        {
            "type": "SQSQueue",
            "sqsQueue": {"queue": "jobs"},
            "target": {"type": "AverageValue", "averageValue": 4},
        },
        {
            "type": "Schedule",
            "schedule": {
                "defaultReplicas": 3,
                "entries": [{"start": "0 8 * * *", "end": "0 9 * * *", "replicas": 9}],
            },
        },
        {"type": "PendingPods"},
        max_replicas=10,
    )
    now = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)
    readings = Producers({SqsQueueMetric: SqsQueueLength(sqs)}).read_all(the_policy, GROUP, now)
    assert readings["sqs-queue"].value == 0  # type: ignore[union-attr]
    assert readings["schedule"] == MetricReading(
        value=9, at=now, detail="schedule entry entries[0] (0 8 * * * until 0 9 * * *)"
    )
    assert readings["pending-pods"] == MetricUnavailable(
        reason="no PendingPods producer is configured"
    )


def test_a_producer_bug_becomes_an_unavailable_reading() -> None:
    class Broken:
        def read(self, metric: Any, group: Any, now: datetime) -> Any:
            raise KeyError("Attributes")

    reading = Producers({SqsQueueMetric: Broken()}).read(queue("jobs"), GROUP, datetime.now(UTC))
    assert reading == MetricUnavailable(reason="SQSQueue producer failed: KeyError('Attributes')")

"""Metric producers on AWS: SQS queue length and CloudWatch (metric or metric math).

Each returns a value with its timestamp, or `MetricUnavailable` naming the cause; an AWS
error never escapes, so one broken metric can't stop an evaluation.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.domain.policy import CloudWatchMetric, CloudWatchMetricStat, SqsQueueMetric
from nodescaler.domain.readings import MetricReading, MetricUnavailable, Reading


def _aws_error(error: Exception) -> str:
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "Unknown")
        return f"{code}: {error.response.get('Error', {}).get('Message', '')}".strip()
    return f"{type(error).__name__}: {error}"


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

    def read(self, metric: SqsQueueMetric, now: datetime) -> Reading:
        source = metric.sqs_queue
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
            return MetricUnavailable(reason=f"queue {source.queue}: {_aws_error(error)}")
        counts = [int(attributes.get(name, 0)) for name in names]
        labels = ["visible", "in flight", "delayed"][: len(counts)]
        detail = " + ".join(f"{n} {label}" for n, label in zip(counts, labels, strict=True))
        return MetricReading(value=sum(counts), at=now, detail=detail)


def _metric_stat(stat: CloudWatchMetricStat, period: int) -> dict[str, Any]:
    return {
        "Metric": {
            "Namespace": stat.namespace,
            "MetricName": stat.metric_name,
            "Dimensions": [{"Name": k, "Value": v} for k, v in stat.dimensions.items()],
        },
        "Period": period,
        "Stat": stat.statistic,
    }


def metric_data_queries(metric: CloudWatchMetric) -> list[dict[str, Any]]:
    """The GetMetricData queries of a metric: one stat, or an expression over named stats."""
    source = metric.cloud_watch
    if source.metric is not None:
        return [
            {
                "Id": "value",
                "MetricStat": _metric_stat(source.metric, source.period_seconds),
                "ReturnData": True,
            }
        ]
    queries: list[dict[str, Any]] = [
        {
            "Id": metric_id,
            "MetricStat": _metric_stat(stat, source.period_seconds),
            "ReturnData": False,
        }
        for metric_id, stat in source.metrics.items()
    ]
    queries.append(
        {
            "Id": "value",
            "Expression": source.expression,
            "Period": source.period_seconds,
            "ReturnData": True,
        }
    )
    return queries


class CloudWatchMetrics:
    """The latest datapoint of a CloudWatch metric or metric-math expression, if fresh enough."""

    def __init__(self, cloudwatch: Any) -> None:
        self._cloudwatch = cloudwatch

    def read(self, metric: CloudWatchMetric, now: datetime) -> Reading:
        window = timedelta(seconds=metric.stale_after_seconds)
        try:
            result = self._cloudwatch.get_metric_data(
                MetricDataQueries=metric_data_queries(metric),
                StartTime=now - window - timedelta(seconds=metric.cloud_watch.period_seconds),
                EndTime=now,
                ScanBy="TimestampDescending",
            )["MetricDataResults"]
        except (ClientError, BotoCoreError) as error:
            return MetricUnavailable(reason=f"CloudWatch: {_aws_error(error)}")
        series = next((r for r in result if r["Id"] == "value"), None)
        if series is None or not series.get("Values"):
            return MetricUnavailable(
                reason=f"CloudWatch returned no datapoint in the last {metric.stale_after_seconds}s"
            )
        latest = max(zip(series["Timestamps"], series["Values"], strict=True), key=lambda p: p[0])
        at, value = latest
        return MetricReading(value=float(value), at=at, detail=f"{value:g} ({at:%H:%M:%S}Z)")

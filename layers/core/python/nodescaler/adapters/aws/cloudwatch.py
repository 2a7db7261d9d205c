"""The CloudWatch metric's producer: the latest datapoint of a metric or metric-math
expression, read with GetMetricData.

An AWS error never escapes: it becomes `MetricUnavailable` naming the cause.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.aws import describe_aws_error
from nodescaler.domain.node_group import NodeGroup
from nodescaler.domain.policy import CloudWatchMetric, CloudWatchMetricStat, MetricBase
from nodescaler.domain.readings import MetricReading, MetricUnavailable, Reading


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

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        assert isinstance(metric, CloudWatchMetric)
        window = timedelta(seconds=metric.stale_after_seconds)
        try:
            result = self._cloudwatch.get_metric_data(
                MetricDataQueries=metric_data_queries(metric),
                StartTime=now - window - timedelta(seconds=metric.cloud_watch.period_seconds),
                EndTime=now,
                ScanBy="TimestampDescending",
            )["MetricDataResults"]
        except (ClientError, BotoCoreError) as error:
            return MetricUnavailable(reason=f"CloudWatch: {describe_aws_error(error)}")
        series = next((r for r in result if r["Id"] == "value"), None)
        if series is None or not series.get("Values"):
            return MetricUnavailable(
                reason=f"CloudWatch returned no datapoint in the last {metric.stale_after_seconds}s"
            )
        latest = max(zip(series["Timestamps"], series["Values"], strict=True), key=lambda p: p[0])
        at, value = latest
        return MetricReading(value=float(value), at=at, detail=f"{value:g} ({at:%H:%M:%S}Z)")

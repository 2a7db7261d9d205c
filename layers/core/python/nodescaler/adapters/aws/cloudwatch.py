"""The CloudWatch metric's producer: the latest datapoint of a metric or metric-math
expression, read with GetMetricData; and the days of history a forecast reads from a
named metric.

An AWS error never escapes: it becomes `MetricUnavailable` (or `MetricHistoryError`)
naming the cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.aws import describe_aws_error
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.policy import (
    CloudWatchMetric,
    CloudWatchMetricStat,
    DemandMetric,
    MetricBase,
)
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading
from nodescaler.errors import MetricHistoryError
from nodescaler.ports import ProducerContext


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


class CloudWatchMetricHistory:
    """Named metrics' datapoints over days, all of a group's in one GetMetricData call: a
    page holds 100,800 datapoints, 14 days of 5-minute periods are 4,032 a metric, so one
    call reads 25 metrics (a policy has at most 20); the paginator follows NextToken if
    CloudWatch ever splits it. CloudWatch bills GetMetricData per metric requested, not
    per call or datapoint: each read costs one metric request per named metric."""

    def __init__(self, cloudwatch: Any) -> None:
        self._cloudwatch = cloudwatch

    def datapoints(
        self, metrics: Sequence[DemandMetric], since: datetime, until: datetime
    ) -> list[list[tuple[datetime, float]]]:
        queries: list[dict[str, Any]] = [
            {
                "Id": f"m{index}",
                "MetricStat": _metric_stat(named.metric, named.period_seconds),
                "ReturnData": True,
            }
            for index, named in enumerate(metrics)
        ]
        series: dict[str, list[tuple[datetime, float]]] = {q["Id"]: [] for q in queries}
        named = ", ".join(
            f"{m.metric.namespace}/{m.metric.metric_name} {m.metric.statistic}" for m in metrics
        )
        try:
            pages = self._cloudwatch.get_paginator("get_metric_data").paginate(
                MetricDataQueries=queries,
                StartTime=since,
                EndTime=until,
                ScanBy="TimestampAscending",
            )
            for page in pages:
                for result in page["MetricDataResults"]:
                    if result.get("StatusCode") in ("Forbidden", "InternalError"):
                        why = "; ".join(m.get("Value", "") for m in result.get("Messages", []))
                        raise MetricHistoryError(
                            f"CloudWatch {named}: {result['StatusCode']} {why}".strip()
                        )
                    points = zip(result["Timestamps"], result["Values"], strict=True)
                    series[result["Id"]].extend(points)
        except (ClientError, BotoCoreError) as error:
            raise MetricHistoryError(f"CloudWatch {named}: {describe_aws_error(error)}") from error
        return [series[q["Id"]] for q in queries]


def producer(context: ProducerContext) -> CloudWatchMetrics:
    """The CloudWatch type's producer (its descriptor names this function)."""
    return CloudWatchMetrics(context.clients.cloudwatch)

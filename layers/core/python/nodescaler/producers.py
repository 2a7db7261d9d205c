"""Reads every metric of a policy for one node group, each by its own producer.

A producer that fails, or a metric type with no producer configured here, yields
`MetricUnavailable` naming the cause: the core then holds that group's scale-in.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from nodescaler.domain.policy import (
    KUBERNETES_METRICS,
    CloudWatchMetric,
    MetricBase,
    NodeGroupPolicy,
    ScheduleMetric,
    SqsQueueMetric,
)
from nodescaler.domain.readings import MetricReading, MetricUnavailable, Reading
from nodescaler.domain.schedule import scheduled_replicas
from nodescaler.ports import NodeGroup


class GroupMetricSource(Protocol):
    """A producer for metrics that need to know the group (the Kubernetes ones)."""

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading: ...


class QueueSource(Protocol):
    def read(self, metric: SqsQueueMetric, now: datetime) -> Reading: ...


class CloudWatchSource(Protocol):
    def read(self, metric: CloudWatchMetric, now: datetime) -> Reading: ...


class Producers:
    def __init__(
        self,
        *,
        queues: QueueSource | None = None,
        cloudwatch: CloudWatchSource | None = None,
        kubernetes: GroupMetricSource | None = None,
    ) -> None:
        self._queues = queues
        self._cloudwatch = cloudwatch
        self._kubernetes = kubernetes

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        try:
            return self._read(metric, group, now)
        except Exception as error:  # a producer bug must not stop the evaluation
            return MetricUnavailable(reason=f"{metric.type_name} producer failed: {error!r}")

    def _read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        if isinstance(metric, ScheduleMetric):
            replicas, why = scheduled_replicas(metric.schedule, now)
            return MetricReading(value=replicas, at=now, detail=why)
        if isinstance(metric, SqsQueueMetric) and self._queues:
            return self._queues.read(metric, now)
        if isinstance(metric, CloudWatchMetric) and self._cloudwatch:
            return self._cloudwatch.read(metric, now)
        if self._kubernetes and metric.type_name in KUBERNETES_METRICS:
            return self._kubernetes.read(metric, group, now)
        return MetricUnavailable(reason=f"no {metric.type_name} producer is configured")

    def read_all(
        self, policy: NodeGroupPolicy, group: NodeGroup, now: datetime
    ) -> dict[str, Reading]:
        return {m.key: self.read(m, group, now) for m in policy.spec.metrics}

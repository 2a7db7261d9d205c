"""Reads every metric of a policy for one node group, each by the producer registered for
its type (the registry is built in `nodescaler.wiring`).

A producer that fails, or a metric type with no producer registered here, yields
`MetricUnavailable` naming the cause: the core then holds that group's scale-in. A source
the deployment does not allow (`MetricRefused`) is also reported, naming group and policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from nodescaler.domain.ahead.scheduled_capacity import scheduled_replicas
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.policy import MetricBase, NodeGroupPolicy, ScheduleMetric
from nodescaler.domain.scaling.readings import (
    MetricReading,
    MetricRefused,
    MetricUnavailable,
    Reading,
)
from nodescaler.errors import OutOfTimeError
from nodescaler.ports import MetricProducer, ProducerContext


class ScheduleProducer:
    """A schedule's replica count now: it reads nothing outside the process."""

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        assert isinstance(metric, ScheduleMetric)
        replicas, why = scheduled_replicas(metric.schedule, now)
        return MetricReading(value=replicas, at=now, detail=why)


def schedule_producer(context: ProducerContext) -> ScheduleProducer:
    """The Schedule type's producer (its descriptor names this function)."""
    return ScheduleProducer()


Registry = Mapping[type[MetricBase], MetricProducer]
# Told of each refused source: the node group, and one line naming group, policy and why.
OnRefused = Callable[[str, str], None]


class Producers:
    def __init__(self, registry: Registry, on_refused: OnRefused | None = None) -> None:
        # The schedule needs no client, so it is always there.
        self._registry: Registry = {ScheduleMetric: ScheduleProducer(), **registry}
        self._on_refused = on_refused

    def serves(self, model: type[MetricBase]) -> bool:
        """Whether metrics of this type have a producer (else they read as unavailable)."""
        return model in self._registry

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        producer = self._registry.get(type(metric))
        if producer is None:
            return MetricUnavailable(reason=f"no {metric.type_name} producer is configured")
        try:
            return producer.read(metric, group, now)
        except OutOfTimeError:  # the invocation's time, not the metric's: tried again later
            raise
        except Exception as error:  # a producer bug must not stop the evaluation
            return MetricUnavailable(reason=f"{metric.type_name} producer failed: {error!r}")

    def read_all(
        self, policy: NodeGroupPolicy, group: NodeGroup, now: datetime
    ) -> dict[str, Reading]:
        """Every metric read from a source; forecasts come from history
        (`domain.ahead.forecast`)."""
        readings = {
            m.key: self.read(m, group, now) for m in policy.spec.metrics if not m.reads_history
        }
        for key, reading in readings.items():
            if isinstance(reading, MetricRefused) and self._on_refused is not None:
                self._on_refused(
                    group.name,
                    f"node group {group.name}, policy {policy.name}, metric {key}: "
                    f"{reading.reason}",
                )
        return readings

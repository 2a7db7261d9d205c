"""One descriptor per metric type, beside its model: what a metric of the type reads outside
the function (the resources the evaluate function's rights are scoped to), and whether it
reads the cluster. `METRIC_TYPES` is the one list the rest iterates: the stored-policy
reads check (`versions.PolicyReads`), the stack's IAM statements (`infra/permissions.py`)
and the producers (`nodescaler.wiring`, which binds each type's producer by its `kind`).

Adding a metric type: its model (`metrics`), its adapter (a `ports.MetricProducer`, with
the function that makes it), and its descriptor here, which names that function by its
dotted path; nothing else branches on the type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeVar

from nodescaler.domain.policy.metrics import (
    CapacityReservationMetric,
    CloudWatchMetric,
    MetricBase,
    PendingPodsMetric,
    PredictiveMetric,
    PrometheusMetric,
    ScheduleMetric,
    SqsQueueMetric,
)
from nodescaler.domain.policy.sources import ForecastMode, PrometheusSource, SqsQueueSource
from nodescaler.domain.token_origins import TokenOrigins, token_pairing

M = TypeVar("M", bound=MetricBase)
Workspace = tuple[str, str | None]  # an AMP workspace: its id or ARN, and the region given


@dataclass(frozen=True)
class MetricReads:
    """What metrics reach outside the function, as their policies name it: each a set the
    IAM statements grant on (a metric type reading nothing there leaves it empty)."""

    sqs_queues: frozenset[str] = frozenset()  # a name, URL or ARN
    prometheus_workspaces: frozenset[Workspace] = frozenset()
    secrets: frozenset[str] = frozenset()  # Secrets Manager secrets: a name or ARN
    token_origins: TokenOrigins = frozenset()  # (secret, origin) a bearer token goes to
    # the group's warm pool, which a forecast sizes (PutWarmPool)
    sizes_warm_pool: bool = False

    def __or__(self, other: MetricReads) -> MetricReads:
        return MetricReads(
            **{f.name: getattr(self, f.name) | getattr(other, f.name) for f in fields(self)}
        )


NOTHING = MetricReads()


Backlog = SqsQueueSource | PrometheusSource  # what the fast path can read each look


def _no_backlog(metric: Any) -> Backlog | None:
    return None


def _reads_nothing(metric: Any) -> MetricReads:
    return NOTHING


def _no_queues(metric: Any) -> frozenset[str]:
    return frozenset()


def _queue_name(queue: str) -> str:
    """A queue's name from its name, URL or ARN."""
    return queue.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def _cloud_watch_queues(metric: CloudWatchMetric) -> frozenset[str]:
    """The `QueueName` dimensions of its metric, or of each metric of its expression."""
    source = metric.cloud_watch
    stats = [source.metric] if source.metric is not None else []
    stats += list(source.metrics.values())
    return frozenset(s.dimensions["QueueName"] for s in stats if "QueueName" in s.dimensions)


@dataclass(frozen=True)
class MetricType(Generic[M]):
    """A metric type: its model, what a metric of it reads, whether it reads the cluster
    (then the evaluate function carries the Kubernetes client, and the stack needs a
    cluster name)."""

    model: type[M]
    reads: Callable[[M], MetricReads] = field(default=_reads_nothing)
    reads_cluster: bool = False
    # the backlog a metric of the type measures, which the fast path reads between ticks
    backlog: Callable[[M], Backlog | None] = field(default=_no_backlog)
    # the SQS queues, by name, whose messages it counts (tasks, each a worker's)
    queues: Callable[[M], frozenset[str]] = field(default=_no_queues)
    # "module:function" making its producer from the wiring's context (a `ports.MakeProducer`,
    # imported only when the evaluate function is wired: cold starts); None for a type that
    # reads the cluster (the Kubernetes producer reads it) or is computed from history
    producer: str | None = None
    # its value is how many nodes to add to the group, not a total against a target
    additive: bool = False
    # a floor from history (a forecast): whether it acts on the group, or is only shown;
    # None for a type whose value the proportional rule turns into replicas
    floor_acts: Callable[[M], bool] | None = None
    # its count is a lower bound on the group (a schedule's minimum), not a demand: applied
    # after stabilization, so the scale-down window remembers only the demand metrics'
    # recommendations; in a policy with no demand metric it is the demand, as before. A
    # forecast's floor is not one: it moves from one five-minute slot to the next, and
    # applied after the window it could shed nodes between two slots and bring them back
    # (churn); the window smooths it as it smooths a noisy metric.
    lower_bound: bool = False

    @property
    def kind(self) -> str:
        """The `type` a document gives it ("SQSQueue"), which wiring binds a producer to."""
        return self.model.type_tag()


def _prometheus_reads(metric: PrometheusMetric) -> MetricReads:
    source = metric.prometheus
    pairing = token_pairing(source)
    return MetricReads(
        prometheus_workspaces=frozenset({(source.workspace, source.region)})
        if source.workspace is not None
        else frozenset(),
        secrets=frozenset({pairing[0]}) if pairing else frozenset(),
        token_origins=frozenset({pairing}) if pairing else frozenset(),
    )


SQS_QUEUE = MetricType(
    SqsQueueMetric,
    lambda m: MetricReads(sqs_queues=frozenset({m.sqs_queue.queue})),
    backlog=lambda m: m.sqs_queue,
    queues=lambda m: frozenset({_queue_name(m.sqs_queue.queue)}),
    producer="nodescaler.adapters.aws.sqs_queue_length:producer",
)
# GetMetricData has no resource-level scope: every evaluate function may call it.
CLOUD_WATCH = MetricType(
    CloudWatchMetric,
    queues=_cloud_watch_queues,
    producer="nodescaler.adapters.aws.cloudwatch:producer",
)
PROMETHEUS = MetricType(
    PrometheusMetric,
    _prometheus_reads,
    backlog=lambda m: m.prometheus,
    producer="nodescaler.adapters.prometheus:producer",
)
SCHEDULE = MetricType(  # computed from the clock alone
    ScheduleMetric, producer="nodescaler.service.producers:schedule_producer", lower_bound=True
)
CAPACITY_RESERVATION = MetricType(CapacityReservationMetric, reads_cluster=True)
PENDING_PODS = MetricType(PendingPodsMetric, reads_cluster=True, additive=True)
PREDICTIVE = MetricType(
    PredictiveMetric,
    lambda m: MetricReads(sizes_warm_pool=m.predictive.warm_pool),
    floor_acts=lambda m: m.predictive.mode is ForecastMode.FORECAST_AND_SCALE,
)

METRIC_TYPES: tuple[MetricType[Any], ...] = (
    SQS_QUEUE,
    CLOUD_WATCH,
    PROMETHEUS,
    SCHEDULE,
    CAPACITY_RESERVATION,
    PENDING_PODS,
    PREDICTIVE,
)
_BY_MODEL: dict[type[MetricBase], MetricType[Any]] = {t.model: t for t in METRIC_TYPES}


def metric_type(metric: MetricBase) -> MetricType[Any]:
    """The descriptor of the metric's type."""
    return _BY_MODEL[type(metric)]


def metric_reads(metric: MetricBase) -> MetricReads:
    return metric_type(metric).reads(metric)


def backlog(metric: MetricBase) -> Backlog | None:
    """The backlog the metric measures, if the fast path can read it (a queue, a query)."""
    return metric_type(metric).backlog(metric)


def reads_cluster(metric: MetricBase) -> bool:
    return metric_type(metric).reads_cluster

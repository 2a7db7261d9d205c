"""The EMF records nodescaler writes: figures under one set of dimensions each (per group,
per metric, or the service's alone, for alarms), built from an evaluation's or a drain's
result and printed for CloudWatch Logs to turn into metrics (`emit`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from nodescaler.observability.metric_names import NAMESPACE, Dimension, MetricName, service

if TYPE_CHECKING:  # each function's types, without loading them into the others
    from nodescaler.domain.scale_down.drain import DrainResult
    from nodescaler.service.evaluation import EvaluationResult

UNITS: Mapping[MetricName, MetricUnit] = {
    MetricName.EVALUATION_LATENCY: MetricUnit.Milliseconds,
    MetricName.METRIC_USAGE: MetricUnit.Percent,
}

Figures = dict[MetricName, float]


@dataclass(frozen=True)
class Record:
    """One EMF record: figures sharing one set of dimensions (besides `service`)."""

    figures: Figures
    dimensions: Mapping[Dimension, str] = field(default_factory=dict)


def result_records(result: EvaluationResult, latency_ms: float | None = None) -> list[Record]:
    """The records one evaluation reports: its group's figures, each metric's, the system's."""
    from nodescaler.service.evaluation import Outcome

    if result.outcome is Outcome.REJECTED:
        unserved = {MetricName.REJECTED: 1.0, MetricName.UNSERVED: 1.0}
        return [Record(unserved, {Dimension.NODE_GROUP: result.group}), Record(unserved)]
    decision = result.decision
    if decision is None or result.outcome is Outcome.DUPLICATE:
        return []
    group = {Dimension.POLICY: decision.policy, Dimension.NODE_GROUP: decision.node_group}
    in_service = decision.current if decision.in_service is None else decision.in_service
    figures: Figures = {
        MetricName.EVALUATIONS: 1,
        MetricName.CURRENT_NODES: decision.current,
        MetricName.DESIRED_NODES: decision.desired,
        MetricName.IN_SERVICE_NODES: in_service,
        MetricName.RECOMMENDED_NODES: decision.recommendation,
        MetricName.METRICS_UNAVAILABLE: sum(m.status.failing for m in decision.metrics),
        MetricName.BACKED_OFF: int(decision.backoff is not None),
        MetricName.PROTECTED_NODES: decision.protected,
        MetricName.PAUSED: int(bool(decision.paused)),
        MetricName.UNSERVED: int(any(m.status.failing for m in decision.metrics)),
    }
    if pending := [m.pending_pods for m in decision.metrics if m.pending_pods is not None]:
        figures[MetricName.PENDING_PODS] = max(pending)
    if latency_ms is not None:
        figures[MetricName.EVALUATION_LATENCY] = latency_ms
    forecasts = [
        m.recommendation
        for m in decision.metrics
        if m.status in ("forecast", "forecast-only")  # MetricStatus, loaded by evaluate only
        and m.recommendation is not None
    ]
    if forecasts:
        figures[MetricName.FORECAST_NODES] = max(forecasts)
    if decision.warm_pool is not None:
        figures[MetricName.WARM_POOL_NODES] = decision.warm_pool
    if result.outcome is Outcome.ACTED:
        figures[MetricName.NODES_ADDED] = max(decision.change, 0)
        figures[MetricName.NODES_REMOVED] = max(-decision.change, 0)
    if result.outcome is Outcome.DRY_RUN:
        figures[MetricName.DRY_RUN_CHANGES] = 1
    records = [Record(figures, group)]
    records.extend(
        Record({MetricName.METRIC_USAGE: m.usage_ratio * 100}, group | {Dimension.METRIC: m.name})
        for m in decision.metrics
        if m.usage_ratio is not None
    )
    # Service-wide too: their maximum over all groups is what the alarms watch.
    records.append(
        Record(
            {
                MetricName.SHORTFALL_NODES: max(decision.current - in_service, 0),
                MetricName.BACKED_OFF: figures[MetricName.BACKED_OFF],
                MetricName.UNSERVED: figures[MetricName.UNSERVED],
            }
        )
    )
    return records


def emit(records: Sequence[Record]) -> None:
    """Print each record as one EMF line (CloudWatch Logs turns them into metrics)."""
    for record in records:
        if not record.figures:
            continue
        metrics = EphemeralMetrics(namespace=NAMESPACE, service=service())
        for name, value in record.dimensions.items():
            metrics.add_dimension(name, value)
        for metric, amount in record.figures.items():
            metrics.add_metric(metric, UNITS.get(metric, MetricUnit.Count), amount)
        metrics.flush_metrics()


def drain_records(result: DrainResult) -> list[Record]:
    """A drain's figures: service-wide for alarms, and for its node group when known."""
    from nodescaler.domain.scale_down.drain import DrainCause, DrainOutcome, ReplacementOutcome

    figures: Figures = {
        MetricName.PODS_EVICTED: len(result.evicted),
        {
            DrainOutcome.DRAINED: MetricName.NODES_DRAINED,
            DrainOutcome.TIMED_OUT: MetricName.DRAIN_TIMEOUTS,
            DrainOutcome.NOT_IN_CLUSTER: MetricName.DRAIN_SKIPPED,
            DrainOutcome.FAILED: MetricName.DRAIN_FAILURES,
            DrainOutcome.NOT_OURS: MetricName.IGNORED_EVENTS,
            DrainOutcome.UNCONFIRMED: MetricName.UNCONFIRMED_EVENTS,
        }[result.outcome]: 1,
    }
    replacement = result.replacement
    if replacement is not None and replacement.outcome is ReplacementOutcome.QUEUED:
        figures[MetricName.REEVALUATIONS_QUEUED] = 1
    elif (replacement is not None and replacement.outcome is not ReplacementOutcome.FAILED) or (
        result.outcome is DrainOutcome.NOT_OURS and result.cause != DrainCause.LIFECYCLE_ACTION
    ):
        figures[MetricName.UNMANAGED_INTERRUPTIONS] = 1
    records = [Record(figures)]
    if result.node_group is not None:
        records.append(Record(figures, {Dimension.NODE_GROUP: result.node_group}))
    return records

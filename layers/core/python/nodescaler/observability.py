"""What nodescaler reports to CloudWatch: one namespace, metric names, and each result's figures.

The functions emit these as EMF (one record per node group, the group as a dimension);
the dashboard and alarms in `infra` are built from the same names.
"""

from __future__ import annotations

from enum import StrEnum

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from nodescaler.evaluation import EvaluationResult, Outcome

NAMESPACE = "Nodescaler"
SERVICE = "nodescaler"  # Powertools adds it as the `service` dimension of every metric
GROUP_DIMENSION = "NodeGroup"


class MetricName(StrEnum):
    # per node group
    CURRENT_NODES = "CurrentNodes"
    DESIRED_NODES = "DesiredNodes"
    RECOMMENDED_NODES = "RecommendedNodes"
    EVALUATIONS = "Evaluations"
    NODES_ADDED = "NodesAdded"
    NODES_REMOVED = "NodesRemoved"
    DRY_RUN_CHANGES = "DryRunChanges"  # changes a dry-run group would have made
    METRICS_UNAVAILABLE = "MetricsUnavailable"
    REJECTED = "NodeGroupRejected"  # opted in, but a bad tag or an unknown policy
    EVALUATION_ERRORS = "EvaluationErrors"
    # per function
    EVALUATIONS_QUEUED = "EvaluationsQueued"
    MALFORMED_EVENTS = "MalformedEvents"


Figures = dict[MetricName, float]


def result_figures(result: EvaluationResult) -> Figures:
    """The figures one evaluation reports for its group."""
    if result.outcome is Outcome.REJECTED:
        return {MetricName.REJECTED: 1}
    decision = result.decision
    if decision is None or result.outcome is Outcome.DUPLICATE:
        return {}
    figures: Figures = {
        MetricName.EVALUATIONS: 1,
        MetricName.CURRENT_NODES: decision.current,
        MetricName.DESIRED_NODES: decision.desired,
        MetricName.RECOMMENDED_NODES: decision.recommendation,
        MetricName.METRICS_UNAVAILABLE: sum(m.status.broken for m in decision.metrics),
    }
    if result.outcome is Outcome.ACTED:
        figures[MetricName.NODES_ADDED] = max(decision.change, 0)
        figures[MetricName.NODES_REMOVED] = max(-decision.change, 0)
    if result.outcome is Outcome.DRY_RUN:
        figures[MetricName.DRY_RUN_CHANGES] = 1
    return figures


def emit(figures: Figures, node_group: str | None = None) -> None:
    """Print one EMF record (CloudWatch Logs turns it into metrics)."""
    if not figures:
        return
    metrics = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
    if node_group is not None:
        metrics.add_dimension(GROUP_DIMENSION, node_group)
    for name, value in figures.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    metrics.flush_metrics()

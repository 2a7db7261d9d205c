"""The CloudWatch dashboard: the alarms' states on top, the system, the cluster against its
limits, the drains, then the node groups of every policy.

Node groups and policies are found at run time, not at synth (`nodescaler apply` adds
policies after the deploy), so the groups' graphs are SEARCH expressions over the Policy
and NodeGroup dimensions of the EMF metrics the evaluate function prints: one line per
group of every policy, whenever it was applied. Decisions and what limited them come from
its log lines, through Logs Insights. Every metric and SEARCH selects its deployment's
`service` only: another copy of nodescaler in the account reports under the same namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.observability.metric_names import NAMESPACE, Dimension, MetricName

from .settings import ClusterLimits

MINUTE = Duration.minutes(1)
WIDTH = 24  # the dashboard grid's width


@dataclass(frozen=True)
class ServiceMetrics:
    """One deployment's metrics: each selects its `service` (the deployment's name)."""

    service: str

    def system(self, name: MetricName, statistic: str) -> cloudwatch.Metric:
        """A metric over all groups (the EMF records that carry only the service dimension)."""
        return cloudwatch.Metric(
            namespace=NAMESPACE,
            metric_name=name,
            dimensions_map={"service": self.service},
            statistic=statistic,
            period=MINUTE,
        )

    def per_group(self, name: MetricName, statistic: str, *, per_metric: bool = False) -> str:
        """Every node group of every policy: one line each, policies applied later too."""
        dimensions = [Dimension.NODE_GROUP, Dimension.POLICY, "service"]
        if per_metric:
            dimensions.append(Dimension.METRIC)
        return self._search(dimensions, name, statistic)

    def by_group(self, name: MetricName, statistic: str) -> str:
        """Records with the node group but no policy (dispatch's launch failures, drains)."""
        return self._search([Dimension.NODE_GROUP, "service"], name, statistic)

    def _search(self, dimensions: list[str], name: MetricName, statistic: str, *terms: str) -> str:
        schema = ",".join([NAMESPACE, *sorted(dimensions)])
        query = " ".join(
            [f"{{{schema}}}", f'MetricName="{name}"', *terms, f'service="{self.service}"']
        )
        return f"SEARCH('{query}', '{statistic}', 60)"


def search(expression: str, label: str) -> cloudwatch.MathExpression:
    return cloudwatch.MathExpression(
        expression=expression, using_metrics={}, label=label, period=MINUTE
    )


# A SEARCH line's label: its policy and group (CloudWatch's dynamic labels), then what it is.
GROUP_LABEL = "${PROP('Dim.Policy')} ${PROP('Dim.NodeGroup')}"


def _deployed(policies: Mapping[str, NodeGroupPolicy]) -> str:
    listed = ", ".join(
        f"`{p.name}` ({p.spec.min_replicas}–{p.spec.max_replicas})" for p in policies.values()
    )
    return (
        "## Node groups, of every policy\nOne line per group, found at run time: policies "
        "applied with `nodescaler apply` after the deploy appear too. "
        f"Deployed with the stack: {listed or 'none'}."
    )


class AlarmStatus(cloudwatch.ConcreteWidget):
    """The state of every alarm beside the dashboard (in the construct that holds both),
    looked up when the template is made: the alarms are created after the dashboard."""

    def __init__(self, beside: Construct, *, width: int = WIDTH, height: int = 3) -> None:
        super().__init__(width, height)
        self._beside = beside
        self._at: tuple[float, float] = (0, 0)

    def position(self, x: float, y: float) -> None:
        self._at = (x, y)

    def to_json(self) -> list[Any]:
        alarms = [c for c in self._beside.node.find_all() if isinstance(c, cloudwatch.Alarm)]
        x, y = self._at
        properties = {
            "title": "Alarms",
            "alarms": [a.alarm_arn for a in alarms],
            "sortBy": "stateUpdatedTimestamp",
        }
        widget = {"type": "alarm", "width": self.width, "height": self.height}
        return [widget | {"x": x, "y": y, "properties": properties}]


class Dashboard(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        service: str,  # the `service` dimension its functions report under
        policies: Mapping[str, NodeGroupPolicy],
        functions: Mapping[str, lambda_.Function],  # dispatch, evaluate, and drain if any
        evaluate_logs: logs.ILogGroup,
        drain_logs: logs.ILogGroup | None,
        evaluation_queue: sqs.Queue,
        dead_letter_queues: Mapping[str, sqs.Queue],
        cluster_limits: ClusterLimits | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.metrics = ServiceMetrics(service)
        self.dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=name, default_interval=Duration.hours(3)
        )
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown="# nodescaler\nThe alarms, the system, the cluster against its limits, "
                "the drains, then every node group of every policy: sizes, pending pods, each "
                "metric against its target (100% = on target), backoffs, pauses and protected "
                "nodes, and the decisions.",
                width=WIDTH,
                height=2,
            )
        )
        self.dashboard.add_widgets(AlarmStatus(scope))
        self._system_row(functions, evaluation_queue, dead_letter_queues)
        self._problems_row()
        self.dashboard.add_widgets(*self._cluster(cluster_limits or ClusterLimits()))
        if drain_logs is not None:
            self._drain_row(functions["drain"], drain_logs)
        self._group_rows(policies, evaluate_logs)

    def _system_row(
        self,
        functions: Mapping[str, lambda_.Function],
        evaluation_queue: sqs.Queue,
        dead_letter_queues: Mapping[str, sqs.Queue],
    ) -> None:
        """The functions' invocations, the tick and evaluation latency, the queues."""
        dispatch, evaluate = functions["dispatch"], functions["evaluate"]
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Invocations, errors, throttles",
                left=[
                    metric
                    for name, f in functions.items()
                    for metric in (
                        f.metric_invocations(label=f"{name} invocations", period=MINUTE),
                        f.metric_errors(label=f"{name} errors", period=MINUTE),
                        f.metric_throttles(label=f"{name} throttles", period=MINUTE),
                    )
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Tick duration and evaluation latency",
                left=[
                    dispatch.metric_duration(
                        statistic="Maximum", label="tick (dispatch)", period=MINUTE
                    ),
                    evaluate.metric_duration(
                        statistic="p90", label="evaluate batch p90", period=MINUTE
                    ),
                    self.metrics.system(MetricName.EVALUATION_LATENCY, "p90").with_(
                        label="event → decision p90"
                    ),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Queues: waiting evaluations and dead letters",
                left=[
                    evaluation_queue.metric_approximate_number_of_messages_visible(
                        label="evaluations waiting", period=MINUTE
                    ),
                    *(
                        queue.metric_approximate_number_of_messages_visible(
                            label=f"{name} dead letters", period=MINUTE, statistic="Maximum"
                        )
                        for name, queue in dead_letter_queues.items()
                    ),
                ],
                width=8,
            ),
        )

    def _problems_row(self) -> None:
        """What went wrong: errors, bad or forged events, rejected groups, launch failures."""
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Problems: evaluation errors, malformed and unconfirmed (forged?) events, "
                "shortfall (worst group)",
                left=[
                    self.metrics.system(MetricName.EVALUATION_ERRORS, "Sum"),
                    self.metrics.system(MetricName.MALFORMED_EVENTS, "Sum"),
                    self.metrics.system(MetricName.UNCONFIRMED_EVENTS, "Sum"),
                ],
                right=[self.metrics.system(MetricName.SHORTFALL_NODES, "Maximum")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Rejected node groups (bad tag or unknown policy)",
                left=[search(self.metrics.by_group(MetricName.REJECTED, "Sum"), "")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Launch failures, by node group (each backs its group off)",
                left=[search(self.metrics.by_group(MetricName.LAUNCH_FAILURES, "Sum"), "")],
                width=8,
            ),
        )

    def _cluster(self, limits: ClusterLimits) -> list[cloudwatch.GraphWidget]:
        """The cluster's usage against its limits, and the reserved capacity left unused."""
        return [self._usage(limits), self._reserved()]

    def _usage(self, limits: ClusterLimits) -> cloudwatch.GraphWidget:
        """Nodes, vCPUs and memory of all managed groups as the limits count them (reported
        only under a limit), a line at each limit set; the groups' current nodes always."""

        def line(name: MetricName, label: str) -> cloudwatch.Metric:
            return self.metrics.system(name, "Maximum").with_(label=label)

        def at(most: int | None, setting: str) -> list[cloudwatch.HorizontalAnnotation]:
            """A line at the limit `setting` (cdk.json's name), none when it is unset."""
            return (
                [] if most is None else [cloudwatch.HorizontalAnnotation(value=most, label=setting)]
            )

        set_ = limits.max_nodes is not None or limits.by_size
        current = cloudwatch.MathExpression(
            expression=f"SUM({self.metrics.per_group(MetricName.CURRENT_NODES, 'Maximum')})",
            using_metrics={},
            label="nodes, all groups (current)",
            period=MINUTE,
        )
        return cloudwatch.GraphWidget(
            title="Cluster usage against its limits" + ("" if set_ else " (none set)"),
            left=[line(MetricName.CLUSTER_NODES, "nodes, as the limits count them"), current],
            left_annotations=at(limits.max_nodes, "maxNodes"),
            left_y_axis=cloudwatch.YAxisProps(min=0, label="nodes", show_units=False),
            right=[
                line(MetricName.CLUSTER_VCPUS, "vCPUs"),
                line(MetricName.CLUSTER_MEMORY_GIB, "memory (GiB)"),
            ],
            right_annotations=at(limits.max_vcpus, "maxVcpus")
            + at(limits.max_memory_gib, "maxMemoryGib"),
            right_y_axis=cloudwatch.YAxisProps(min=0, label="vCPUs, GiB", show_units=False),
            width=16,
        )

    def _reserved(self) -> cloudwatch.GraphWidget:
        """What each group's capacity reservations hold unused, groups added later too."""
        unused = self.metrics.by_group(MetricName.RESERVED_CAPACITY_UNUSED, "Minimum")
        return cloudwatch.GraphWidget(
            title="Reserved capacity unused, by node group (reserved-first)",
            left=[search(unused, "${PROP('Dim.NodeGroup')}")],
            left_y_axis=cloudwatch.YAxisProps(min=0, label="instances", show_units=False),
            width=8,
        )

    def _drain_row(self, drain: lambda_.Function, drain_logs: logs.ILogGroup) -> None:
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown="## Drains\nTerminate lifecycle actions and Spot warnings: nodes "
                "cordoned and emptied before their instances go.",
                width=WIDTH,
                height=2,
            )
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Drains: done, timed out, failed, lifecycle actions expired",
                left=[
                    self.metrics.system(MetricName.NODES_DRAINED, "Sum").with_(label="drained"),
                    self.metrics.system(MetricName.DRAIN_TIMEOUTS, "Sum").with_(label="timed out"),
                    self.metrics.system(MetricName.DRAIN_FAILURES, "Sum").with_(label="failed"),
                    self.metrics.system(MetricName.LIFECYCLE_ACTIONS_EXPIRED, "Sum").with_(
                        label="lifecycle action expired"
                    ),
                    self.metrics.system(MetricName.DRAIN_SKIPPED, "Sum").with_(label="no node"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Pods evicted, and how long drains take",
                left=[
                    self.metrics.system(MetricName.PODS_EVICTED, "Sum").with_(label="pods evicted")
                ],
                right=[
                    drain.metric_duration(
                        statistic="Maximum", label="drain (longest)", period=MINUTE
                    )
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Spot warnings: re-evaluations queued, unmanaged groups",
                left=[
                    self.metrics.system(MetricName.REEVALUATIONS_QUEUED, "Sum").with_(
                        label="re-evaluations queued"
                    ),
                    self.metrics.system(MetricName.UNMANAGED_INTERRUPTIONS, "Sum").with_(
                        label="not a managed group"
                    ),
                ],
                width=8,
            ),
        )
        self._drain_log(drain_logs)

    def _drain_log(self, drain_logs: logs.ILogGroup) -> None:
        """The latest drains, and what each left on its node."""
        self.dashboard.add_widgets(
            cloudwatch.LogQueryWidget(
                title="Drains: the latest, and what was left on the node",
                log_group_names=[drain_logs.log_group_name],
                query_lines=[
                    "fields @timestamp, cause, instance_id, drain.node as node, "
                    "drain.outcome as outcome, message",
                    "filter ispresent(drain.outcome)",
                    "sort @timestamp desc",
                    "limit 50",
                ],
                view=cloudwatch.LogQueryVisualizationType.TABLE,
                width=WIDTH,
                height=6,
            )
        )

    def _group_rows(
        self, policies: Mapping[str, NodeGroupPolicy], evaluate_logs: logs.ILogGroup
    ) -> None:
        """Every node group of every policy: sizes, pending pods, metrics, changes, holds,
        and the decisions."""
        self.dashboard.add_widgets(
            cloudwatch.TextWidget(markdown=_deployed(policies), width=WIDTH, height=2)
        )
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Node groups: desired, current and in-service nodes, forecast and warm",
                left=[
                    self._graph(MetricName.DESIRED_NODES, "Maximum", "desired"),
                    self._graph(MetricName.CURRENT_NODES, "Maximum", "current"),
                    self._graph(MetricName.IN_SERVICE_NODES, "Minimum", "in service"),
                    self._graph(MetricName.FORECAST_NODES, "Maximum", "forecast"),
                    self._graph(MetricName.WARM_POOL_NODES, "Maximum", "warm"),
                ],
                left_y_axis=cloudwatch.YAxisProps(min=0),
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Node groups: pending pods their nodes are to take",
                left=[self._graph(MetricName.PENDING_PODS, "Maximum", "pending pods")],
                left_y_axis=cloudwatch.YAxisProps(min=0, show_units=False),
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Node groups: each metric against its target",
                left=[
                    search(
                        self.metrics.per_group(MetricName.METRIC_USAGE, "Average", per_metric=True),
                        f"{GROUP_LABEL} ${{PROP('Dim.Metric')}}",
                    )
                ],
                left_annotations=[cloudwatch.HorizontalAnnotation(value=100, label="target")],
                left_y_axis=cloudwatch.YAxisProps(min=0, label="% of target", show_units=False),
                width=8,
            ),
        )
        self._group_changes_row()
        self.dashboard.add_widgets(
            cloudwatch.LogQueryWidget(
                title="Node groups: decisions and what limited them, every policy",
                log_group_names=[evaluate_logs.log_group_name],
                query_lines=[
                    "fields @timestamp, decision.policy as policy, node_group, outcome, "
                    "decision.current as current, decision.desired as desired, "
                    "decision.limited_by.0 as limited_by, decision.reason as reason",
                    "filter ispresent(decision.policy)",
                    "sort @timestamp desc",
                    "limit 100",
                ],
                view=cloudwatch.LogQueryVisualizationType.TABLE,
                width=WIDTH,
                height=6,
            )
        )

    def _graph(self, metric: MetricName, statistic: str, label: str) -> cloudwatch.MathExpression:
        """One line per node group, of every policy."""
        return search(self.metrics.per_group(metric, statistic), f"{GROUP_LABEL} {label}")

    def _group_changes_row(self) -> None:
        """Each group's changes and unavailable metrics, its holds and protected nodes."""
        self.dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Node groups: changes and unavailable metrics",
                left=[
                    self._graph(MetricName.NODES_ADDED, "Sum", "added"),
                    self._graph(MetricName.NODES_REMOVED, "Sum", "removed"),
                ],
                right=[
                    self._graph(MetricName.METRICS_UNAVAILABLE, "Maximum", "unavailable"),
                    self._graph(MetricName.DRY_RUN_CHANGES, "Sum", "dry-run changes"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Node groups: backed off or paused, and nodes protected from scale-in",
                left=[
                    self._graph(MetricName.BACKED_OFF, "Maximum", "backed off"),
                    self._graph(MetricName.PAUSED, "Maximum", "paused"),
                ],
                left_y_axis=cloudwatch.YAxisProps(min=0, max=1, show_units=False),
                right=[self._graph(MetricName.PROTECTED_NODES, "Maximum", "protected")],
                right_y_axis=cloudwatch.YAxisProps(min=0, show_units=False),
                width=12,
            ),
        )

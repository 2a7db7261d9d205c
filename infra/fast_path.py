"""The fast path (cdk.json `fastPath`, on by default): a function its schedule starts each
minute, which looks every few seconds until the next start at the cluster's unschedulable
pods and the policies' queues and Prometheus queries, and queues the groups concerned on
the evaluation queue. `fastPath: false` leaves it out: the tick alone decides, as before."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from cdk_nag import NagPackSuppression
from nodescaler.config import FastPathSettings
from nodescaler.domain.policy.document import token_origins

from . import nag, permissions
from .functions import NodescalerFunction, Shared

# It runs until its next start (a minute), less the handler's margin: a little over.
FAST_PATH_TIMEOUT = Duration.seconds(65)
# The kubernetes client is imported once a minute; its memory sets the GB-seconds (README).
FAST_PATH_MEMORY_MB = 256
FAST_PATH_CONCURRENCY = 1  # reserved: never more than one invocation looking
# infra/kubernetes/rbac.yaml: list pods and nodes, nothing else
KUBERNETES_GROUP = "nodescaler-fast-path"


class FastPathFunction:
    """Looks between ticks; its schedule, its rights, and an alarm on its errors."""

    def __init__(self, shared: Shared, *, reads_kubernetes: bool) -> None:
        scope, settings = shared.scope, shared.settings
        connects = reads_kubernetes  # synth refuses policies that read a cluster it lacks
        self.lambda_ = NodescalerFunction(
            scope,
            "FastPath",
            service=settings.deployment,
            folder="fast_path",
            description="nodescaler: between ticks, queue the groups of new unschedulable "
            "pods or of a queue past its target",
            layers=shared.layers.for_function(kubernetes=connects),
            environment=FastPathSettings.model_construct(
                evaluation_queue_url=shared.evaluation_queue.queue_url,
                # each bearer token goes only to the server it is deployed with
                token_origins=sorted(token_origins(shared.policies.values())),
                **(shared.cluster_connection if connects else {}),
                **shared.capacity,
                **shared.common,
            ).environment(),
            memory_mb=FAST_PATH_MEMORY_MB,
            timeout=FAST_PATH_TIMEOUT,
        )
        function = self.lambda_.function
        # A late look is worth nothing: the next minute's starts anyway.
        function.configure_async_invoke(retry_attempts=0, max_event_age=Duration.minutes(1))
        # One at a time: an invocation runs a little over its minute, and two side by side
        # would each ask for the same new pods (each keeps its own debounce). A start
        # throttled meanwhile waits in Lambda's queue (within the minute above) for the end.
        cfn = function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.reserved_concurrent_executions = FAST_PATH_CONCURRENCY
        shared.evaluation_queue.grant_send_messages(self.lambda_.role)
        queues = permissions.read_policy_queues(shared.policies.values())
        # what the evaluate function reads of the same metrics (the descriptors say what)
        prometheus = permissions.query_prometheus(shared.policies.values())
        self.lambda_.allow(
            permissions.describe_node_groups(),
            permissions.deny_tag_changes(),
            permissions.read_stored_policies(shared.table.table_arn),
            # when a group's room runs short (a policy stored later may keep some too)
            permissions.read_recheck_times(shared.table.table_arn),
            permissions.deny_policy_writes(shared.table.table_arn),
            *([queues] if queues else []),
            *prometheus,
            *(shared.cluster_rights() if connects else []),
        )
        if connects:
            shared.cluster_access(
                "FastPathClusterAccess", self.lambda_.role, kubernetes_group=KUBERNETES_GROUP
            )
        self.lambda_.run_in_vpc(settings.vpc)
        self.schedule = events.Rule(
            scope,
            "FastPathSchedule",
            description="nodescaler: start the fast path's looks each minute",
            schedule=events.Schedule.rate(Duration.minutes(1)),
            targets=[events_targets.LambdaFunction(function, retry_attempts=0)],
        )
        self._explain(function)

    def _explain(self, function: lambda_.Function) -> None:
        """Why its cdk-nag findings are intended: no DLQ for a start not worth keeping."""
        nag.explain(self.lambda_.role, nag.NO_RESOURCE_LEVEL)
        nothing_to_keep = "A failed start is not worth keeping: the next minute's starts "
        nothing_to_keep += "anyway, and the tick decides meanwhile (its errors raise an alarm)."
        nag.explain(
            function,
            *(
                NagPackSuppression(id=rule, reason=nothing_to_keep)
                for rule in ("Serverless-LambdaDLQ", "Serverless-LambdaAsyncFailureDestination")
            ),
        )
        nag.explain(
            self.schedule, NagPackSuppression(id="Serverless-EventBusDLQ", reason=nothing_to_keep)
        )

    def alarm(self, deployment: str, topic: sns.ITopic | None) -> cloudwatch.Alarm:
        """An alarm on its errors, to the deployment's alarm topic when there is one."""
        alarm = cloudwatch.Alarm(
            self.lambda_,
            "Errors",
            alarm_name=f"{deployment}-fast-path-errors",
            alarm_description="The fast path function failed an invocation (see its log "
            "group); the tick still decides every minute.",
            metric=self.lambda_.function.metric_errors(period=Duration.minutes(5)),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if topic is not None:
            alarm.add_alarm_action(actions.SnsAction(topic))
            alarm.add_ok_action(actions.SnsAction(topic))
        return alarm

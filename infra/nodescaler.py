"""`Nodescaler`: the whole autoscaler as one construct, for this repo's stack or your own app.

tick (EventBridge Scheduler) ──┐
alarm state change (rule) ─────┴─► dispatch ─► evaluation queue (FIFO, DLQ) ─► evaluate
                                                                                 │
                                    state table ◄────────────────────────────────┤
                                    ASG SetDesiredCapacity / EKS UpdateNodegroupConfig
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_eks as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_sqs as sqs
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct
from nodescaler.config import DispatchSettings, EvaluateSettings
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.wiring import uses_kubernetes

from infra import permissions
from infra.alarms import Alarms
from infra.dashboard import Dashboard
from infra.functions import NodescalerFunction
from infra.layers import Layers
from infra.settings import DeploySettings, VpcSettings
from infra.state import StateTable

# evaluate: ten requests a batch, each a few AWS calls; 60 s leaves room for throttled
# calls retried by botocore. SQS wants a visibility timeout of six times the function's.
EVALUATE_TIMEOUT = Duration.seconds(60)
# dispatch: one paged describe and a send per ten groups; 250 groups take about a second.
DISPATCH_TIMEOUT = Duration.seconds(60)
# A tick or alarm older than this is not worth acting on: the next tick is due.
MAX_EVENT_AGE = Duration.minutes(10)
ASYNC_RETRIES = 2
KUBERNETES_GROUP = "nodescaler"  # the group infra/kubernetes/rbac.yaml binds


def _secure_queue(scope: Construct, construct_id: str, **props: object) -> sqs.Queue:
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        **props,  # type: ignore[arg-type]
    )


class Nodescaler(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploySettings,
        policies: Mapping[str, NodeGroupPolicy],
        policies_folder: Path,
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = settings
        self.policies = dict(policies)
        self.reads_kubernetes = uses_kubernetes(self.policies)
        tags = settings.tags.names()
        self.state = StateTable(self, "State", deletion_protection=settings.deletion_protection)
        self.layers = Layers(self, "Layers", policies_folder=policies_folder)

        # --- the evaluation queue: one message group per node group ---------------------
        self.evaluation_dlq = _secure_queue(
            self, "EvaluationDeadLetters", fifo=True, retention_period=Duration.days(14)
        )
        self.evaluation_queue = _secure_queue(
            self,
            "Evaluations",
            fifo=True,
            visibility_timeout=Duration.seconds(EVALUATE_TIMEOUT.to_seconds() * 6),
            retention_period=Duration.hours(1),  # an evaluation an hour late is worthless
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.evaluation_dlq, max_receive_count=settings.max_receive_count
            ),
        )
        # Ticks and alarm events that failed every retry.
        self.dispatch_dlq = _secure_queue(
            self, "DispatchDeadLetters", retention_period=Duration.days(14)
        )

        common: dict[str, Any] = {
            "policies_path": Path(Layers.POLICIES_PATH),
            "cluster_name": settings.cluster_name,
            "tag_enabled": tags.enabled,
            "tag_policy": tags.policy,
            "tag_cluster": tags.cluster,
            "tag_dry_run": tags.dry_run,
        }

        # --- dispatch: ticks and alarm state changes → the queue -------------------------
        self.dispatch = NodescalerFunction(
            self,
            "Dispatch",
            folder="dispatch",
            description="nodescaler: queue an evaluation of each managed node group",
            layers=self.layers.for_function(kubernetes=False),
            environment=DispatchSettings.model_construct(
                evaluation_queue_url=self.evaluation_queue.queue_url, **common
            ).environment(),
            memory_mb=256,
            timeout=DISPATCH_TIMEOUT,
        )
        self.dispatch.function.configure_async_invoke(
            retry_attempts=ASYNC_RETRIES,
            max_event_age=MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(self.dispatch_dlq),
        )
        self.evaluation_queue.grant_send_messages(self.dispatch.role)
        self.dispatch.allow(permissions.describe_node_groups(), permissions.deny_tag_changes())

        self.tick_role = self._scheduler_role()
        self.tick = scheduler.Schedule(
            self,
            "Tick",
            description="nodescaler: evaluate every managed node group",
            schedule=scheduler.ScheduleExpression.rate(Duration.minutes(settings.tick_minutes)),
            target=scheduler_targets.LambdaInvoke(
                self.dispatch.function,
                role=self.tick_role,
                input=scheduler.ScheduleTargetInput.from_object(self._scheduled_event()),
                retry_attempts=ASYNC_RETRIES,
                max_event_age=MAX_EVENT_AGE,
                dead_letter_queue=self.dispatch_dlq,
            ),
        )
        self.alarm_rule = self._alarm_rule()

        # --- evaluate: one decision per request -------------------------------------------
        self.evaluate = NodescalerFunction(
            self,
            "Evaluate",
            folder="evaluate",
            description="nodescaler: decide and resize one node group per request",
            layers=self.layers.for_function(kubernetes=self.reads_kubernetes),
            environment=EvaluateSettings.model_construct(
                state_table=self.state.table.table_name,
                dry_run=settings.dry_run,
                audit_ttl_days=settings.audit_ttl_days,
                expanders=settings.expanders,
                **common,
            ).environment(),
            # boto3, pydantic and Powertools need ~100 MB; memory also buys CPU for cold starts.
            memory_mb=512,
            timeout=EVALUATE_TIMEOUT,
        )
        self.evaluate.function.add_event_source(
            event_sources.SqsEventSource(
                self.evaluation_queue,
                batch_size=10,
                report_batch_item_failures=True,
                max_concurrency=settings.evaluate_concurrency,
            )
        )
        self.evaluate.allow(
            permissions.describe_node_groups(),
            permissions.write_opted_in_groups(["SetDesiredCapacity"], tags, settings.cluster_name),
            permissions.resize_eks_node_groups(settings.cluster_name),
            permissions.deny_tag_changes(),
            permissions.read_cloudwatch_metrics(),
            permissions.read_write_state(self.state.table.table_arn),
        )
        queues = permissions.read_policy_queues(self.policies.values())
        if queues is not None:
            self.evaluate.allow(queues)
        if self.reads_kubernetes:
            self._read_the_cluster()
        if settings.vpc is not None:
            self._run_in_vpc(self.evaluate, settings.vpc)

        # --- what operators see -----------------------------------------------------------
        dead_letters = {"evaluation": self.evaluation_dlq, "dispatch": self.dispatch_dlq}
        self.dashboard = Dashboard(
            self,
            "Dashboard",
            policies=self.policies,
            dispatch=self.dispatch.function,
            evaluate=self.evaluate.function,
            evaluate_logs=self.evaluate.log_group,
            evaluation_queue=self.evaluation_queue,
            dead_letter_queues=dead_letters,
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            settings=settings.alarms,
            functions={"dispatch": self.dispatch.function, "evaluate": self.evaluate.function},
            dead_letter_queues=dead_letters,
        )
        self._explain_findings()

    def _read_the_cluster(self) -> None:
        """What evaluate needs to read the cluster and plan for pending pods."""
        cluster = self.settings.cluster_name
        self.evaluate.allow(
            *permissions.read_eks_cluster(cluster),
            permissions.read_instance_shapes(),
            *permissions.invoke_custom_expanders(self.settings.expanders),
        )
        # The role's Kubernetes identity: the group bound by infra/kubernetes/rbac.yaml.
        eks.CfnAccessEntry(
            self,
            "ClusterAccess",
            cluster_name=cluster,
            principal_arn=self.evaluate.role.role_arn,
            kubernetes_groups=[KUBERNETES_GROUP],
            type="STANDARD",
        )

    def _run_in_vpc(self, function: NodescalerFunction, vpc: VpcSettings) -> None:
        """Into the cluster's VPC, for a private API endpoint (VPC endpoints or NAT for AWS)."""
        cfn = function.function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.vpc_config = lambda_.CfnFunction.VpcConfigProperty(
            subnet_ids=vpc.subnet_ids, security_group_ids=vpc.security_group_ids
        )
        function.allow(permissions.manage_network_interfaces())

    def _scheduler_role(self) -> iam.Role:
        """The role Scheduler takes to invoke dispatch (LambdaInvoke grants it the invoke),
        only on behalf of this account's schedules."""
        return iam.Role(
            self,
            "TickRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(self).account}},
            ),
        )

    def _explain_findings(self) -> None:
        """cdk-nag: what AwsSolutions flags here, and why it is intended."""
        NagSuppressions.add_resource_suppressions(
            self.dispatch_dlq,
            [
                NagPackSuppression(
                    id="AwsSolutions-SQS3",
                    reason="It is a dead-letter queue: the failure destination of the dispatch "
                    "function, its schedule and its alarm rule.",
                )
            ],
            apply_to_children=True,
        )
        no_resource_level = NagPackSuppression(
            id="AwsSolutions-IAM5",
            reason="The Describe calls (Auto Scaling groups and launch configurations, EC2 "
            "instance types and launch template versions), cloudwatch:GetMetricData and the "
            "network-interface actions of a function in a VPC support no resource-level "
            "permissions; the Deny on ASG tag changes covers every group on purpose.",
            applies_to=["Resource::*"],
        )
        NagSuppressions.add_resource_suppressions(
            self.dispatch.role, [no_resource_level], apply_to_children=True
        )
        NagSuppressions.add_resource_suppressions(
            self.tick_role,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="CDK's grantInvoke allows the dispatch function and its versions "
                    "(ARN:*); the schedule invokes only the unqualified function.",
                    applies_to=[RegexAppliesTo(regex=r"/^Resource::<.*Dispatch.*\.Arn>:\*$/g")],
                )
            ],
            apply_to_children=True,
        )
        NagSuppressions.add_resource_suppressions(
            self.evaluate.role,
            [
                no_resource_level,
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="Node groups are opted in by tag, at run time: SetDesiredCapacity is "
                    "allowed on any ASG only under an IAM condition on its opt-in (and cluster) "
                    "tags.",
                    applies_to=[permissions.ALL_GROUPS_FINDING],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="EKS node groups are found at run time: UpdateNodegroupConfig is "
                    "scoped to the configured cluster's node groups (to the account's, when no "
                    "cluster is configured).",
                    applies_to=[
                        RegexAppliesTo(regex=r"/^Resource::arn:.*:eks:.*:nodegroup\/.*$/g")
                    ],
                ),
            ],
            apply_to_children=True,
        )

    @property
    def alarm_names(self) -> list[str]:
        return sorted({alarm for p in self.policies.values() for alarm in p.spec.alarms})

    def _scheduled_event(self) -> dict[str, object]:
        """What Scheduler sends: the shape of an EventBridge scheduled event, so one parser
        reads both. Its id is the scheduled time, the same on every retry of one tick, so
        a retried tick is recognised downstream."""
        return {
            "version": "0",
            "id": f"tick-{scheduler.ContextAttribute.scheduled_time}",
            "detail-type": "Scheduled Event",
            "source": "aws.scheduler",
            "account": Stack.of(self).account,
            "time": scheduler.ContextAttribute.scheduled_time,
            "region": Stack.of(self).region,
            "resources": [scheduler.ContextAttribute.schedule_arn],
            "detail": {},
        }

    def _alarm_rule(self) -> events.Rule | None:
        """The fast path: state changes of the alarms the policies name."""
        if not self.alarm_names:
            return None
        return events.Rule(
            self,
            "AlarmStateChanges",
            description="nodescaler: evaluate at once the groups whose policy names this alarm",
            event_pattern=events.EventPattern(
                source=["aws.cloudwatch"],
                detail_type=["CloudWatch Alarm State Change"],
                detail={"alarmName": self.alarm_names},
            ),
            targets=[
                events_targets.LambdaFunction(
                    self.dispatch.function,
                    retry_attempts=ASYNC_RETRIES,
                    max_event_age=MAX_EVENT_AGE,
                    dead_letter_queue=self.dispatch_dlq,
                )
            ],
        )

    @property
    def functions(self) -> list[lambda_.Function]:
        return [self.dispatch.function, self.evaluate.function]

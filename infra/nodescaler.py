"""`Nodescaler`: the whole autoscaler as one construct, for this repo's stack or your own app.

tick (EventBridge Scheduler) ────┐
alarm state change (rule) ───────┼─► dispatch ─► evaluation queue (FIFO, DLQ) ─► evaluate
ASG launch unsuccessful (rule) ──┘      │             ▲                            │
                                        ▼             │                            │
                          state table (backoffs) ◄────┼────────────────────────────┤
                                                      │ (Spot: re-evaluate)        ▼
terminate lifecycle action (rule) ─┐                  │           ASG SetDesiredCapacity /
Spot warning, rebalance (rule) ────┴─► drain ─────────┘           EKS UpdateNodegroupConfig
  (with a cluster)                     cordon, evict, complete the lifecycle action
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_autoscaling as autoscaling
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
from nodescaler.config import DispatchSettings, DrainSettings, EvaluateSettings
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.events.drain import (
    LIFECYCLE_ACTION,
    REBALANCE_RECOMMENDATION,
    SPOT_INTERRUPTION,
)

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
LAUNCH_UNSUCCESSFUL = "EC2 Instance Launch Unsuccessful"
# drain: its longest drain (drain.timeoutSeconds, at most 840 s) plus a minute for the
# cold start, the last eviction and CompleteLifecycleAction; Lambda's maximum.
DRAIN_TIMEOUT = Duration.seconds(900)
# The terminate hook the drain answers to: the stack's, and the one README has operators add.
DRAIN_HOOK = "nodescaler-drain"
# Auto Scaling waits this long for a heartbeat (the drain sends one a minute) before it lets
# the instance go undrained (DefaultResult): long enough for a cold start and a slow minute.
HOOK_HEARTBEAT_TIMEOUT = Duration.minutes(5)
# Past the hook's timeout the instance is gone: an older terminate event is not worth acting on.
DRAIN_MAX_EVENT_AGE = HOOK_HEARTBEAT_TIMEOUT


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
        self.reads_kubernetes = any(p.reads_kubernetes for p in self.policies.values())
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
        # Ticks, alarm state changes and launch failures that failed every retry.
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
        # dispatch records a group's backoff after a failed launch, evaluate heeds it.
        backoff = settings.backoff
        capacity: dict[str, Any] = {
            "state_table": self.state.table.table_name,
            "backoff_initial_seconds": backoff.initial_seconds,
            "backoff_max_seconds": backoff.max_seconds,
            "backoff_reset_seconds": backoff.reset_seconds,
            "max_provision_seconds": backoff.max_provision_seconds,
        }

        # --- dispatch: ticks, alarm state changes and launch failures → the queue ---------
        self.dispatch = NodescalerFunction(
            self,
            "Dispatch",
            folder="dispatch",
            description="nodescaler: queue an evaluation of each managed node group",
            layers=self.layers.for_function(kubernetes=False),
            environment=DispatchSettings.model_construct(
                evaluation_queue_url=self.evaluation_queue.queue_url, **capacity, **common
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
        self.dispatch.allow(
            permissions.describe_node_groups(),
            permissions.deny_tag_changes(),
            permissions.read_write_state(self.state.table.table_arn, query=False),
        )

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
        self.launch_failure_rule = self._launch_failure_rule()

        # --- evaluate: one decision per request -------------------------------------------
        self.evaluate = NodescalerFunction(
            self,
            "Evaluate",
            folder="evaluate",
            description="nodescaler: decide and resize one node group per request",
            layers=self.layers.for_function(kubernetes=self.reads_kubernetes),
            environment=EvaluateSettings.model_construct(
                dry_run=settings.dry_run,
                audit_ttl_days=settings.audit_ttl_days,
                kubernetes_timeout_seconds=settings.kubernetes_timeout_seconds,
                expanders=settings.expanders,
                cluster_max_nodes=settings.cluster_limits.max_nodes,
                cluster_max_vcpus=settings.cluster_limits.max_vcpus,
                cluster_max_memory_gib=settings.cluster_limits.max_memory_gib,
                **capacity,
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
            permissions.describe_node_groups("DescribeScalingActivities"),
            permissions.write_opted_in_groups(
                ["SetDesiredCapacity", "SetInstanceProtection"], tags, settings.cluster_name
            ),
            permissions.resize_eks_node_groups(settings.cluster_name),
            permissions.deny_tag_changes(),
            permissions.read_cloudwatch_metrics(),
            permissions.read_write_state(self.state.table.table_arn),
        )
        queues = permissions.read_policy_queues(self.policies.values())
        if queues is not None:
            self.evaluate.allow(queues)
        if self.reads_kubernetes or settings.cluster_limits.by_size:
            self.evaluate.allow(*permissions.read_instance_shapes(settings.cluster_name))
        if self.reads_kubernetes:
            self._read_the_cluster()
        if settings.vpc is not None:
            self._run_in_vpc(self.evaluate, settings.vpc)

        # --- drain: nodes leave the cluster before their instances go (needs a cluster) ---
        self.drain: NodescalerFunction | None = None
        self.drain_dlq: sqs.Queue | None = None
        self.drain_hooks: list[autoscaling.CfnLifecycleHook] = []
        if settings.cluster_name:
            self._add_drain(common)

        # --- what operators see -----------------------------------------------------------
        dead_letters = {"evaluation": self.evaluation_dlq, "dispatch": self.dispatch_dlq}
        functions = {"dispatch": self.dispatch.function, "evaluate": self.evaluate.function}
        if self.drain is not None and self.drain_dlq is not None:
            dead_letters["drain"] = self.drain_dlq
            functions["drain"] = self.drain.function
        self.dashboard = Dashboard(
            self,
            "Dashboard",
            policies=self.policies,
            functions=functions,
            evaluate_logs=self.evaluate.log_group,
            drain_logs=self.drain.log_group if self.drain else None,
            evaluation_queue=self.evaluation_queue,
            dead_letter_queues=dead_letters,
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            settings=settings.alarms,
            tick_minutes=settings.tick_minutes,
            functions=functions,
            dead_letter_queues=dead_letters,
            drains=self.drain is not None,
        )
        self._explain_findings()

    def _add_drain(self, common: Mapping[str, Any]) -> None:
        """The drain function, its triggers, and the terminate hooks of `drainGroups`."""
        settings, tags = self.settings, self.settings.tags.names()
        drain = settings.drain
        self.drain_dlq = _secure_queue(self, "DrainDeadLetters", retention_period=Duration.days(14))
        self.drain = NodescalerFunction(
            self,
            "Drain",
            folder="drain",
            description="nodescaler: cordon and drain a node before its instance goes",
            layers=self.layers.for_function(kubernetes=True),
            environment=DrainSettings.model_construct(
                evaluation_queue_url=self.evaluation_queue.queue_url,
                drain_timeout_seconds=drain.timeout_seconds,
                max_grace_seconds=drain.max_grace_seconds,
                drain_timeout_result=drain.timeout_result,
                **common,
            ).environment(),
            memory_mb=512,  # as evaluate: the same packages, and the Kubernetes client
            timeout=DRAIN_TIMEOUT,
        )
        # A failed drain has already completed its lifecycle action (or found it expired),
        # and a Spot warning's two minutes are gone by a retry: retrying would only drain a
        # node that is leaving anyway. Every failed event is kept for reading instead.
        self.drain.function.configure_async_invoke(
            retry_attempts=0,
            max_event_age=DRAIN_MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(self.drain_dlq),
        )
        self.evaluation_queue.grant_send_messages(self.drain.role)  # Spot: re-evaluate now
        self.drain.allow(
            permissions.describe_node_groups("DescribeAutoScalingInstances"),
            *permissions.drain_lifecycle_actions(
                tags, settings.cluster_name, settings.drain_groups
            ),
            permissions.deny_tag_changes(),
            permissions.describe_eks_cluster(settings.cluster_name),
        )
        self._cluster_access("DrainClusterAccess", self.drain.role)
        if settings.vpc is not None:
            self._run_in_vpc(self.drain, settings.vpc)

        target = events_targets.LambdaFunction(
            self.drain.function,
            retry_attempts=ASYNC_RETRIES,  # delivery to Lambda; the function itself: none
            max_event_age=DRAIN_MAX_EVENT_AGE,
            dead_letter_queue=self.drain_dlq,
        )
        self.lifecycle_rule = events.Rule(
            self,
            "TerminateLifecycleActions",
            description="nodescaler: drain the node of an instance its group is terminating",
            # Only the drain's own hook: another hook on the group belongs to someone else.
            event_pattern=events.EventPattern(
                source=["aws.autoscaling"],
                detail_type=[LIFECYCLE_ACTION],
                detail={"LifecycleHookName": [DRAIN_HOOK]},
            ),
            targets=[target],
        )
        self.spot_rule = events.Rule(
            self,
            "SpotWarnings",
            description="nodescaler: drain a Spot node before EC2 reclaims it",
            event_pattern=events.EventPattern(
                source=["aws.ec2"], detail_type=[SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION]
            ),
            targets=[target],
        )
        # No notification target: Auto Scaling sends lifecycle actions to EventBridge anyway.
        self.drain_hooks = [
            autoscaling.CfnLifecycleHook(
                self,
                f"DrainHook-{group}",  # by name: reordering the list replaces nothing
                auto_scaling_group_name=group,
                lifecycle_hook_name=DRAIN_HOOK,
                lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
                heartbeat_timeout=int(HOOK_HEARTBEAT_TIMEOUT.to_seconds()),
                default_result="CONTINUE",
            )
            for group in settings.drain_groups
        ]

    def _read_the_cluster(self) -> None:
        """What evaluate needs to read the cluster and plan for pending pods."""
        self.evaluate.allow(
            permissions.describe_eks_cluster(self.settings.cluster_name),
            *permissions.invoke_custom_expanders(self.settings.expanders),
        )
        self._cluster_access("ClusterAccess", self.evaluate.role)

    def _cluster_access(self, construct_id: str, role: iam.IRole) -> None:
        """The role's Kubernetes identity: the group bound by infra/kubernetes/rbac.yaml."""
        eks.CfnAccessEntry(
            self,
            construct_id,
            cluster_name=self.settings.cluster_name,
            principal_arn=role.role_arn,
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
            reason="The Describe calls (Auto Scaling groups, instances, scaling activities and "
            "launch configurations, EC2 instance types and launch template versions), "
            "cloudwatch:GetMetricData and the network-interface actions of a function in a VPC "
            "support no resource-level permissions; the Deny on ASG tag changes covers every "
            "group on purpose.",
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
                    reason="EKS node groups are found at run time: UpdateNodegroupConfig and "
                    "DescribeNodegroup are scoped to the configured cluster's node groups (to "
                    "the account's, when no cluster is configured).",
                    applies_to=[
                        RegexAppliesTo(regex=r"/^Resource::arn:.*:eks:.*:nodegroup\/.*$/g")
                    ],
                ),
            ],
            apply_to_children=True,
        )

        if self.drain is not None and self.drain_dlq is not None:
            self._explain_drain_findings(self.drain, self.drain_dlq, no_resource_level)

    @staticmethod
    def _explain_drain_findings(
        drain: NodescalerFunction, dlq: sqs.Queue, no_resource_level: NagPackSuppression
    ) -> None:
        NagSuppressions.add_resource_suppressions(
            dlq,
            [
                NagPackSuppression(
                    id="AwsSolutions-SQS3",
                    reason="It is a dead-letter queue: the failure destination of the drain "
                    "function and of its lifecycle-action and Spot-warning rules.",
                )
            ],
            apply_to_children=True,
        )
        NagSuppressions.add_resource_suppressions(
            drain.role,
            [
                no_resource_level,
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="Terminating instances of any opted-in group are drained: the "
                    "lifecycle actions are allowed on any ASG only under an IAM condition on "
                    "its opt-in (and cluster) tags.",
                    applies_to=[permissions.ALL_GROUPS_FINDING],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="The groups of drainGroups are named in cdk.json, their ids only "
                    "known once they exist: the lifecycle actions are allowed on those names.",
                    applies_to=[
                        RegexAppliesTo(
                            regex=r"/^Resource::arn:.*:autoscaling:.*:autoScalingGroup:\*:"
                            r"autoScalingGroupName\/[\w.\-]+$/g"
                        )
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

    def _launch_failure_rule(self) -> events.Rule:
        """Every group's failed launches: dispatch backs off the ones it manages."""
        return events.Rule(
            self,
            "LaunchFailures",
            description="nodescaler: back off a node group whose instances failed to launch",
            event_pattern=events.EventPattern(
                source=["aws.autoscaling"], detail_type=[LAUNCH_UNSUCCESSFUL]
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
        drain = [self.drain.function] if self.drain else []
        return [self.dispatch.function, self.evaluate.function, *drain]

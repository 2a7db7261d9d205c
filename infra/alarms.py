"""The alarms worth waking someone for, sent to an optional SNS topic.

Function errors and throttles, dead letters, ticks that stopped arriving, slow evaluations
(from the tick or alarm to the decision), a group rejected or with a metric unavailable for
15 minutes, a node group whose in-service count stays below its desired count or that stays
backed off after failed launches, drains that failed or ran out of time, and what
nodescaler refused or forced (a source not allowed, an event AWS does not bear out, a
termination that could not wait).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jsii
from aws_cdk import (
    Annotations,
    ArnFormat,
    Duration,
    IStableListProducer,
    Lazy,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IConstruct
from nodescaler.observability.metric_names import MetricName

from .dashboard import MINUTE, ServiceMetrics
from .settings import AlarmSettings

FIVE_MINUTES = Duration.minutes(5)
TICKS_MISSED = 3  # schedule periods without a dispatch before the ticks are said to stop
UNSERVED_MINUTES = 15
_NOWHERE = (
    "nodescaler's alarms have no destination: a dead-lettered evaluation, a failed drain or "
    "a starved group will wake no one. "
)
ALARMS_GO_NOWHERE = (  # to whoever deploys with cdk.json (app.py)
    _NOWHERE + 'Set "alarms": {"email": ...} or {"topicArn": ...} in cdk.json\'s '
    "nodescaler context (README, Deploy)."
)
ALARMS_GO_NOWHERE_CONSTRUCT = (  # to a Nodescaler construct's user, in their own code
    _NOWHERE + "Pass DeploySettings(alarms=AlarmSettings(email=...)) or "
    "AlarmSettings(topic_arn=...) to your Nodescaler construct "
    "(from nodescaler_cdk.settings import AlarmSettings; docs/deploy.md)."
)


class Alarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: AlarmSettings,
        deployment: str,
        service: str,  # the `service` dimension its functions report under
        tick_minutes: int,
        functions: Mapping[str, lambda_.Function],
        dead_letter_queues: Mapping[str, sqs.Queue],
        drains: bool,
        nowhere: str = ALARMS_GO_NOWHERE,  # the warning without a destination: what to do
    ) -> None:
        super().__init__(scope, construct_id)
        self.deployment = deployment  # each alarm's name starts with it: one set per deployment
        self.metrics = ServiceMetrics(service)  # and it watches this deployment's figures only
        self.topic = self._topic(settings)
        if self.topic is None:  # shown by cdk synth and deploy, once for the stack
            Annotations.of(self).add_warning_v2("nodescaler:alarms-go-nowhere", nowhere)
        self.alarms: list[cloudwatch.Alarm] = []
        # Each group reports once per evaluation, at least once a tick: a shorter period
        # would see gaps, and a gap never breaches.
        tick = Duration.minutes(tick_minutes)

        self._function_alarms(functions, tick)
        self._evaluation_alarms(settings, dead_letter_queues, tick, tick_minutes)
        self._capacity_alarms(settings, tick, tick_minutes)
        self._reliance_alarms()
        self._trust_alarms()
        if drains:
            self._drain_alarms()

    def _function_alarms(self, functions: Mapping[str, lambda_.Function], tick: Duration) -> None:
        """Each function's errors and throttles, and the tick that stopped."""
        for name, function in functions.items():
            self._add(
                f"{name}-errors",
                function.metric_errors(period=FIVE_MINUTES),
                f"The {name} function failed an invocation (see its log group).",
            )
            self._add(
                f"{name}-throttles",
                function.metric_throttles(period=FIVE_MINUTES),
                f"The {name} function was throttled: raise the account's Lambda concurrency.",
            )
        self._add(
            "ticks-stopped",
            functions["dispatch"].metric_invocations(period=tick, statistic="Sum"),
            f"The dispatch function has not run for {TICKS_MISSED} tick periods: no group is "
            "being evaluated. Check the EventBridge Scheduler schedule (disabled, deleted, or "
            "its role refused) and the dispatch function's throttles.",
            periods=TICKS_MISSED,
            operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.BREACHING,  # no invocation sends no datapoint
        )

    def _evaluation_alarms(
        self,
        settings: AlarmSettings,
        dead_letter_queues: Mapping[str, sqs.Queue],
        tick: Duration,
        tick_minutes: int,
    ) -> None:
        """Groups not served, evaluations failing, dead-lettered or slow."""
        self._add(
            "node-group-unserved",
            self.metrics.system(MetricName.UNSERVED, "Maximum").with_(period=tick),
            f"A node group has been rejected (a bad tag or an unknown policy) or a metric of "
            f"its policy unavailable for {UNSERVED_MINUTES} minutes: it is not scaled on what "
            "it asks. The dashboard's rejected groups and unavailable metrics name it; its "
            "decisions and `nodescaler status` say why.",
            periods=math.ceil(UNSERVED_MINUTES / tick_minutes),
        )
        self._add(
            "evaluation-errors",
            self._sum_over_five_minutes(MetricName.EVALUATION_ERRORS),
            "An evaluation failed and will be retried; the log line names the group and cause.",
        )
        for name, queue in dead_letter_queues.items():
            self._add(
                f"{name}-dead-letters",
                queue.metric_approximate_number_of_messages_visible(
                    period=MINUTE, statistic="Maximum"
                ),
                f"{name.capitalize()} messages were dead-lettered; each says what failed. "
                "Read them from the queue, fix the cause, then redrive or delete them.",
            )
        self._add(
            "evaluation-latency",
            self.metrics.system(MetricName.EVALUATION_LATENCY, "p90"),
            f"Decisions take over {settings.evaluation_latency_seconds} s from the tick or "
            "alarm (p90): the evaluation queue is backing up or AWS calls are slow.",
            threshold=settings.evaluation_latency_seconds * 1000,
            periods=3,
            operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )

    def _capacity_alarms(self, settings: AlarmSettings, tick: Duration, tick_minutes: int) -> None:
        """Groups short of nodes, or backed off after failed launches."""
        self._add(
            "capacity-shortfall",
            self.metrics.system(MetricName.SHORTFALL_NODES, "Maximum").with_(period=tick),
            f"A node group has had fewer nodes in service than desired for "
            f"{settings.shortfall_minutes} minutes: launches are failing or slow (see the "
            "dashboard's per-policy graphs and the group's scaling activities).",
            periods=math.ceil(settings.shortfall_minutes / tick_minutes),
            operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            threshold=0,
        )
        # Backoffs come and go between failed launches (5 minutes, doubling): most of the
        # window, not all of it, says a group can't get its instances.
        backoff_periods = math.ceil(settings.backoff_minutes / tick_minutes)
        self._add(
            "node-group-backed-off",
            self.metrics.system(MetricName.BACKED_OFF, "Maximum").with_(period=tick),
            f"Node groups have been backed off after failed launches for most of "
            f"{settings.backoff_minutes} minutes: no capacity of their instance types, a "
            "quota, or a bad launch template (see the dashboard's launch failures and backoff "
            "graphs and the group's scaling activities).",
            periods=backoff_periods,
            datapoints=math.ceil(backoff_periods * 0.8),
        )

    def _reliance_alarms(self) -> None:
        """What operators rely on without watching it: their applied policies, their events."""
        self._add(
            "stored-policy-read-failures",
            self._sum_over_five_minutes(MetricName.STORED_POLICY_READ_FAILURES),
            "The functions could not read the policies applied with `nodescaler apply` for 15 "
            "minutes (a throttle passes; this does not): they use those last read, or the "
            "deployed ones. The groups' notes in `nodescaler status` say why.",
            periods=3,
        )
        self._add(
            "drain-hooks-unread",
            self._sum_over_five_minutes(MetricName.DRAIN_HOOKS_UNREAD),
            "The termination policy could not read whether a group carries the drain hook for "
            "15 minutes (a throttle passes; this does not): nodes with pods to move stay, so "
            "the group sheds only empty nodes. The termination log line names the group and "
            "Auto Scaling's answer.",
            periods=3,
        )
        self._add(
            "scaling-events-not-put",
            self._sum_over_five_minutes(MetricName.SCALING_EVENTS_NOT_PUT),
            "Scaling events could not be put on EventBridge (the bus missing, or refusing): "
            "the rules routing them saw nothing. The scaling itself happened; the functions' "
            "log lines name the events lost and why.",
        )

    def _trust_alarms(self) -> None:
        """What nodescaler refused or forced on its own: each wants a person to look."""
        self._add(
            "metric-sources-refused",
            self._sum_over_five_minutes(MetricName.SOURCES_REFUSED),
            "A policy asked for a source the deployment does not allow (a bearer token sent "
            "to a server its secret was not deployed for): the metric reads as missing. The "
            "evaluation's log line names the group, policy, secret and server.",
        )
        self._add(
            "unconfirmed-events",
            self._sum_over_five_minutes(MetricName.UNCONFIRMED_EVENTS),
            "An event (a lifecycle action, Spot warning or launch failure) was refused because "
            "Auto Scaling or EC2 does not bear it out: someone may be invoking the functions "
            "by hand. The log line names the event, instance or group, and why.",
        )
        self._add(
            "termination-errors",
            self._sum_over_five_minutes(MetricName.TERMINATION_ERRORS),
            "The termination policy could not choose and answered none for now (Auto Scaling "
            "asks again): a request it could not read or a failed choice. Its log line says why.",
        )
        self._add(
            "terminations-forced",
            self._sum_over_five_minutes(MetricName.TERMINATIONS_FORCED),
            "An instance refresh, lifetime or rebalance waited 30 minutes on nodes whose pods "
            "could not move, and the least-bad one was let go: check the pods and budgets the "
            "termination log line names.",
        )

    def _drain_alarms(self) -> None:
        self._add(
            "drain-failures",
            self._sum_over_five_minutes(MetricName.DRAIN_FAILURES),
            "A drain failed part-way (the Kubernetes API unreachable or refusing); its "
            "instance went with pods on it. The drain's log line and dead letter say why.",
        )
        self._add(
            "drain-timeouts",
            self._sum_over_five_minutes(MetricName.DRAIN_TIMEOUTS),
            "A node still had pods when its drain ran out of time (drain.timeoutSeconds): a "
            "PodDisruptionBudget blocked eviction or pods were slow to stop. The drain's log "
            "line names the pods left and why.",
        )
        self._add(
            "lifecycle-actions-expired",
            self._sum_over_five_minutes(MetricName.LIFECYCLE_ACTIONS_EXPIRED),
            "Auto Scaling gave up waiting for a drain (the hook's heartbeat timeout passed): "
            "the drain started late (throttled, or the event delayed) or a heartbeat failed.",
        )

    def _topic(self, settings: AlarmSettings) -> sns.ITopic | None:
        if settings.topic_arn:
            return sns.Topic.from_topic_arn(self, "Topic", settings.topic_arn)
        if not settings.email:
            return None
        # CloudWatch publishes as a service: the AWS-managed SNS key's policy, which no one
        # can change, shuts it out, so the topic has a key of its own that lets it in.
        key = kms.Key(
            self,
            "TopicKey",
            description="nodescaler alarms topic: CloudWatch encrypts alarms into it",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,  # it protects only the topic's messages
        )
        topic = sns.Topic(
            self,
            "Topic",
            display_name="nodescaler alarms",
            enforce_ssl=True,
            master_key=key,
        )
        alarm_actions = self._this_deployments_alarms()
        key.add_to_resource_policy(
            alarm_actions.copy(actions=["kms:Decrypt", "kms:GenerateDataKey*"], resources=["*"])
        )
        # The topic's policy replaces SNS's default, which let the account's alarms publish.
        topic.add_to_resource_policy(
            alarm_actions.copy(actions=["sns:Publish"], resources=[topic.topic_arn])
        )
        topic.add_subscription(subscriptions.EmailSubscription(settings.email))
        return topic

    def _this_deployments_alarms(self) -> iam.PolicyStatement:
        """CloudWatch, acting for this account's alarms of this deployment only: each by its
        ARN, listed when the template is made (the fast path's alarm comes later). A prefix
        (`<deployment>-*`) would also let in another deployment whose name starts the same
        way: `nodescaler-prod-*` matches the alarms of `nodescaler-prod-eu`."""
        stack = Stack.of(self)
        return iam.PolicyStatement(
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnEquals": {"aws:SourceArn": Lazy.list(_AlarmArns(self.node.scope))},
            },
        )

    def _sum_over_five_minutes(self, name: MetricName) -> cloudwatch.IMetric:
        """A count over all groups, summed per five minutes."""
        return self.metrics.system(name, "Sum").with_(period=FIVE_MINUTES)

    def _add(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        description: str,
        *,
        threshold: float = 1,
        periods: int = 1,
        datapoints: int | None = None,
        operator: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            name,
            alarm_name=f"{self.deployment}-{name}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=periods if datapoints is None else datapoints,
            comparison_operator=operator,
            treat_missing_data=missing,
        )
        if self.topic is not None:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
            alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms.append(alarm)


@jsii.implements(IStableListProducer)
class _AlarmArns:
    """The ARN of every alarm under `scope` (the deployment's construct), from each alarm's
    name as written (its `Ref` would make the topic's policy depend on the alarm, whose
    actions depend on the topic)."""

    def __init__(self, scope: IConstruct | None) -> None:
        self._scope = scope

    def produce(self) -> list[str]:
        if self._scope is None:
            return []
        stack = Stack.of(self._scope)
        names = sorted(
            str(child.alarm_name)
            for child in self._scope.node.find_all()
            if isinstance(child, cloudwatch.CfnAlarm) and child.alarm_name
        )
        return [
            stack.format_arn(
                service="cloudwatch",
                resource="alarm",
                resource_name=name,
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for name in names
        ]

"""The alarms worth waking someone for, sent to an optional SNS topic.

Function errors and throttles, dead letters, slow evaluations (from the tick or alarm to
the decision), and a node group whose in-service count stays below its desired count.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from nodescaler.observability import MetricName

from infra.dashboard import MINUTE, system_metric
from infra.settings import AlarmSettings

FIVE_MINUTES = Duration.minutes(5)


class Alarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: AlarmSettings,
        functions: Mapping[str, lambda_.Function],
        dead_letter_queues: Mapping[str, sqs.Queue],
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = self._topic(settings)
        self.alarms: list[cloudwatch.Alarm] = []

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
            "evaluation-errors",
            system_metric(MetricName.EVALUATION_ERRORS, "Sum").with_(period=FIVE_MINUTES),
            "An evaluation failed and will be retried; the log line names the group and cause.",
        )
        for name, queue in dead_letter_queues.items():
            self._add(
                f"{name}-dead-letters",
                queue.metric_approximate_number_of_messages_visible(
                    period=MINUTE, statistic="Maximum"
                ),
                f"{name.capitalize()} messages were dead-lettered after their retries; "
                "read them from the queue, fix the cause, then redrive or delete them.",
            )
        self._add(
            "evaluation-latency",
            system_metric(MetricName.EVALUATION_LATENCY, "p90"),
            f"Decisions take over {settings.evaluation_latency_seconds} s from the tick or "
            "alarm (p90): the evaluation queue is backing up or AWS calls are slow.",
            threshold=settings.evaluation_latency_seconds * 1000,
            periods=3,
            operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        )
        self._add(
            "capacity-shortfall",
            system_metric(MetricName.SHORTFALL_NODES, "Maximum"),
            f"A node group has had fewer nodes in service than desired for "
            f"{settings.shortfall_minutes} minutes: launches are failing or slow (see the "
            "dashboard's per-policy graphs and the group's scaling activities).",
            periods=settings.shortfall_minutes,
            operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            threshold=0,
        )

    def _topic(self, settings: AlarmSettings) -> sns.ITopic | None:
        if settings.topic_arn:
            return sns.Topic.from_topic_arn(self, "Topic", settings.topic_arn)
        if not settings.email:
            return None
        topic = sns.Topic(
            self,
            "Topic",
            display_name="nodescaler alarms",
            enforce_ssl=True,
            master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
        )
        topic.add_subscription(subscriptions.EmailSubscription(settings.email))
        return topic

    def _add(
        self,
        name: str,
        metric: cloudwatch.IMetric,
        description: str,
        *,
        threshold: float = 1,
        periods: int = 1,
        operator: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        ),
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            name,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            comparison_operator=operator,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if self.topic is not None:
            alarm.add_alarm_action(actions.SnsAction(self.topic))
            alarm.add_ok_action(actions.SnsAction(self.topic))
        self.alarms.append(alarm)

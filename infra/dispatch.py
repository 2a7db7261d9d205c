"""The dispatch function and what triggers it: the tick (EventBridge Scheduler), the state
changes of the alarms the policies name, and Auto Scaling's launch failures."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as scheduler_targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from nodescaler.config import DispatchSettings

from . import permissions
from .functions import NodescalerFunction, Shared

# dispatch: one paged describe and a send per ten groups; 250 groups take about a second.
DISPATCH_TIMEOUT = Duration.seconds(60)
# A tick or alarm older than this is not worth acting on: the next tick is due.
MAX_EVENT_AGE = Duration.minutes(10)
ASYNC_RETRIES = 2
LAUNCH_UNSUCCESSFUL = "EC2 Instance Launch Unsuccessful"


class DispatchFunction:
    """Ticks, alarm state changes and launch failures → one queued evaluation per group."""

    def __init__(self, shared: Shared, dead_letters: sqs.Queue) -> None:
        scope, settings = shared.scope, shared.settings
        self.dead_letters = dead_letters  # events that failed every retry
        self.lambda_ = NodescalerFunction(
            scope,
            "Dispatch",
            service=settings.deployment,
            folder="dispatch",
            description="nodescaler: queue an evaluation of each managed node group",
            layers=shared.layers.for_function(kubernetes=False),
            environment=DispatchSettings.model_construct(
                evaluation_queue_url=shared.evaluation_queue.queue_url,
                **shared.capacity,
                **shared.events,
                **shared.common,
            ).environment(),
            memory_mb=256,
            timeout=DISPATCH_TIMEOUT,
        )
        function = self.lambda_.function
        function.configure_async_invoke(
            retry_attempts=ASYNC_RETRIES,
            max_event_age=MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(dead_letters),
        )
        shared.evaluation_queue.grant_send_messages(self.lambda_.role)
        self.lambda_.allow(
            # a launch-failure event's failed activity, before backing its group off
            permissions.describe_node_groups("DescribeScalingActivities"),
            permissions.deny_tag_changes(),
            permissions.put_scaling_events(settings.event_bus),
            permissions.read_write_state(shared.table.table_arn, query=False),
            permissions.read_stored_policies(shared.table.table_arn),
            permissions.deny_policy_writes(shared.table.table_arn),
        )

        self._tick(scope, settings.tick_minutes, function, dead_letters)
        self._rules(shared, function, dead_letters)

    def _tick(
        self,
        scope: Construct,
        tick_minutes: int,
        function: lambda_.Function,
        dead_letters: sqs.Queue,
    ) -> None:
        """The schedule that invokes dispatch every tick, and the role it takes."""
        # The role Scheduler takes to invoke dispatch (LambdaInvoke grants it the invoke),
        # only on behalf of this account's schedules.
        self.tick_role = iam.Role(
            scope,
            "TickRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Stack.of(scope).account}},
            ),
        )
        self.tick = scheduler.Schedule(
            scope,
            "Tick",
            description="nodescaler: evaluate every managed node group",
            schedule=scheduler.ScheduleExpression.rate(Duration.minutes(tick_minutes)),
            target=scheduler_targets.LambdaInvoke(
                function,
                role=self.tick_role,
                input=scheduler.ScheduleTargetInput.from_object(_scheduled_event(scope)),
                retry_attempts=ASYNC_RETRIES,
                max_event_age=MAX_EVENT_AGE,
                dead_letter_queue=dead_letters,
            ),
        )

    def _rules(self, shared: Shared, function: lambda_.Function, dead_letters: sqs.Queue) -> None:
        """The EventBridge rules: the policies' alarms changing state, failed launches."""
        scope = shared.scope

        def target() -> events_targets.LambdaFunction:
            return events_targets.LambdaFunction(
                function,
                retry_attempts=ASYNC_RETRIES,
                max_event_age=MAX_EVENT_AGE,
                dead_letter_queue=dead_letters,
            )

        alarms = sorted({alarm for p in shared.policies.values() for alarm in p.spec.alarms})
        # The fast path: state changes of the alarms the policies name.
        self.alarm_rule = (
            events.Rule(
                scope,
                "AlarmStateChanges",
                description="nodescaler: evaluate at once the groups whose policy names this alarm",
                event_pattern=events.EventPattern(
                    source=["aws.cloudwatch"],
                    detail_type=["CloudWatch Alarm State Change"],
                    detail={"alarmName": alarms},
                ),
                targets=[target()],
            )
            if alarms
            else None
        )
        # Every group's failed launches: dispatch backs off the ones it manages.
        self.launch_failure_rule = events.Rule(
            scope,
            "LaunchFailures",
            description="nodescaler: back off a node group whose instances failed to launch",
            event_pattern=events.EventPattern(
                source=["aws.autoscaling"], detail_type=[LAUNCH_UNSUCCESSFUL]
            ),
            targets=[target()],
        )


def _scheduled_event(scope: Stack | object) -> dict[str, object]:
    """What Scheduler sends: the shape of an EventBridge scheduled event, so one parser
    reads both. Context attributes only as whole values, as AWS documents them replaced:
    dispatch takes a tick's identity from its `time`, the scheduled time, the same on every
    retry of one tick (the execution id is new on each)."""
    stack = Stack.of(scope)  # type: ignore[arg-type]
    return {
        "version": "0",
        "id": scheduler.ContextAttribute.execution_id,
        "detail-type": "Scheduled Event",
        "source": "aws.scheduler",
        "account": stack.account,
        "time": scheduler.ContextAttribute.scheduled_time,
        "region": stack.region,
        "resources": [scheduler.ContextAttribute.schedule_arn],
        "detail": {},
    }

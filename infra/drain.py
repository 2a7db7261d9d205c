"""The drain function (deployed with a cluster): Auto Scaling's terminate lifecycle actions
and EC2's Spot warnings as its triggers, and the terminate hooks of `drainGroups`."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as events_targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from nodescaler.config import DrainSettings
from nodescaler.deployment import (
    DRAIN_HOOK_DEFAULT_RESULT,
    DRAIN_HOOK_HEARTBEAT_SECONDS,
    DRAIN_HOOK_TRANSITION,
)
from nodescaler.events import LIFECYCLE_ACTION, REBALANCE_RECOMMENDATION, SPOT_INTERRUPTION

from . import permissions
from .dispatch import ASYNC_RETRIES
from .functions import NodescalerFunction, Shared, secure_queue

# drain: its longest drain (drain.timeoutSeconds, at most 840 s) plus a minute for the
# cold start, the last eviction and CompleteLifecycleAction; Lambda's maximum.
DRAIN_TIMEOUT = Duration.seconds(900)
# Auto Scaling waits this long for a heartbeat (the drain sends one a minute) before it lets
# the instance go undrained (DefaultResult): long enough for a cold start and a slow minute.
# evaluate puts the same hook on an opted-in group (`adapters.aws.drain_hooks`).
HOOK_HEARTBEAT_TIMEOUT = Duration.seconds(DRAIN_HOOK_HEARTBEAT_SECONDS)
# Past the hook's timeout the instance is gone: an older terminate event is not worth acting on.
DRAIN_MAX_EVENT_AGE = HOOK_HEARTBEAT_TIMEOUT


class DrainFunction:
    """Terminate lifecycle actions and Spot warnings → the instance's node drained, the
    lifecycle action completed; a Spot warning first re-evaluates its group."""

    def __init__(self, shared: Shared) -> None:
        scope, settings = shared.scope, shared.settings
        tags, drain = settings.tags.names(), settings.drain
        self.dead_letters = secure_queue(
            scope, "DrainDeadLetters", retention_period=Duration.days(14)
        )
        self.lambda_ = NodescalerFunction(
            scope,
            "Drain",
            service=settings.deployment,
            folder="drain",
            description="nodescaler: cordon and drain a node before its instance goes",
            layers=shared.layers.for_function(kubernetes=True),
            environment=DrainSettings.model_construct(
                evaluation_queue_url=shared.evaluation_queue.queue_url,
                drain_timeout_seconds=drain.timeout_seconds,
                max_grace_seconds=drain.max_grace_seconds,
                drain_timeout_result=drain.timeout_result,
                drain_groups=settings.drain_groups,  # drained though not opted in
                # The hook the stack creates and README has operators add: this deployment's.
                drain_hook=settings.drain_hook,
                **shared.events,
                **shared.cluster_connection,
                **shared.common,
            ).environment(),
            memory_mb=512,  # as evaluate: the same packages, and the Kubernetes client
            timeout=DRAIN_TIMEOUT,
        )
        function = self.lambda_.function
        # A failed drain has already completed its lifecycle action (or found it expired),
        # and a Spot warning's two minutes are gone by a retry: retrying would only drain a
        # node that is leaving anyway. Every failed event is kept for reading instead.
        function.configure_async_invoke(
            retry_attempts=0,
            max_event_age=DRAIN_MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(self.dead_letters),
        )
        shared.evaluation_queue.grant_send_messages(self.lambda_.role)  # Spot: re-evaluate now
        self.lambda_.allow(
            # an event's instance in Terminating:Wait, or a Spot Instance, before draining it
            permissions.describe_node_groups("DescribeAutoScalingInstances"),
            permissions.describe_instances(),
            *permissions.drain_lifecycle_actions(
                tags, settings.cluster_name, settings.drain_groups
            ),
            permissions.deny_tag_changes(),
            permissions.put_scaling_events(settings.event_bus),
            *shared.cluster_rights(),
        )
        shared.cluster_access(
            "DrainClusterAccess", self.lambda_.role, kubernetes_group="nodescaler-drain"
        )
        self.lambda_.run_in_vpc(settings.vpc)

        self._triggers(shared, function)

    def _triggers(self, shared: Shared, function: lambda_.Function) -> None:
        """What invokes the drain: this deployment's lifecycle hook (created on the groups
        cdk.json names, and output for the others) and Spot warnings."""
        scope, settings = shared.scope, shared.settings
        target = events_targets.LambdaFunction(
            function,
            retry_attempts=ASYNC_RETRIES,  # delivery to Lambda; the function itself: none
            max_event_age=DRAIN_MAX_EVENT_AGE,
            dead_letter_queue=self.dead_letters,
        )
        self.lifecycle_rule = events.Rule(
            scope,
            "TerminateLifecycleActions",
            description="nodescaler: drain the node of an instance its group is terminating",
            # Only this deployment's hook: another hook on the group (another deployment's
            # among them) belongs to someone else.
            event_pattern=events.EventPattern(
                source=["aws.autoscaling"],
                detail_type=[LIFECYCLE_ACTION],
                detail={"LifecycleHookName": [settings.drain_hook]},
            ),
            targets=[target],
        )
        self.spot_rule = events.Rule(
            scope,
            "SpotWarnings",
            description="nodescaler: drain a Spot node before EC2 reclaims it",
            event_pattern=events.EventPattern(
                source=["aws.ec2"], detail_type=[SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION]
            ),
            targets=[target],
        )
        # No notification target: Auto Scaling sends lifecycle actions to EventBridge anyway.
        self.hooks = [
            autoscaling.CfnLifecycleHook(
                scope,
                f"DrainHook-{group}",  # by name: reordering the list replaces nothing
                auto_scaling_group_name=group,
                lifecycle_hook_name=settings.drain_hook,
                lifecycle_transition=DRAIN_HOOK_TRANSITION,
                heartbeat_timeout=int(HOOK_HEARTBEAT_TIMEOUT.to_seconds()),
                default_result=DRAIN_HOOK_DEFAULT_RESULT,
            )
            for group in settings.drain_groups
        ]
        CfnOutput(
            scope,
            "DrainHookName",
            value=settings.drain_hook,
            description="the terminate lifecycle hook this deployment drains: aws autoscaling "
            "put-lifecycle-hook --lifecycle-hook-name <this name>",
        )

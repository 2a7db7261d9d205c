"""The drain's Auto Scaling and EC2 side: heartbeats and completion of a terminate lifecycle
action, which group an instance is in and in which state, and how EC2 launched it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from nodescaler.domain.scale_down.drain import LifecycleAction, LifecycleResult, Membership
from nodescaler.errors import LifecycleActionExpiredError

# What Auto Scaling answers (ValidationError) once the action's heartbeat timeout has
# passed or the action was completed: "No active Lifecycle Action found with instance ID i-…"
NO_ACTIVE_ACTION = "No active Lifecycle Action found"


class AsgLifecycleActions:
    """`LifecycleActions` over EC2 Auto Scaling."""

    def __init__(self, autoscaling: Any) -> None:
        self._autoscaling = autoscaling

    def heartbeat(self, action: LifecycleAction) -> None:
        heartbeat = self._autoscaling.record_lifecycle_action_heartbeat
        self._call(heartbeat, "RecordLifecycleActionHeartbeat", action)

    def complete(self, action: LifecycleAction, result: LifecycleResult) -> None:
        complete = self._autoscaling.complete_lifecycle_action
        self._call(complete, "CompleteLifecycleAction", action, LifecycleActionResult=result.value)

    def _call(
        self, method: Callable[..., Any], operation: str, action: LifecycleAction, **extra: str
    ) -> None:
        try:
            method(
                AutoScalingGroupName=action.group,
                LifecycleHookName=action.hook,
                InstanceId=action.instance_id,
                LifecycleActionToken=action.token,
                **extra,
            )
        except ClientError as error:
            answer = error.response.get("Error", {})
            message = str(answer.get("Message", ""))
            if answer.get("Code") == "ValidationError" and NO_ACTIVE_ACTION in message:
                raise LifecycleActionExpiredError(
                    f"node group {action.group}, lifecycle hook {action.hook}: the action for "
                    f"instance {action.instance_id} has expired (its heartbeat timeout passed, "
                    f"or it was completed already); {operation} answered: {message}"
                ) from None
            raise


class AsgInstanceGroups:
    """`InstanceGroups` over EC2 Auto Scaling."""

    def __init__(self, autoscaling: Any) -> None:
        self._autoscaling = autoscaling

    def membership(self, instance_id: str) -> Membership | None:
        found = self._autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])
        instances: list[dict[str, Any]] = found.get("AutoScalingInstances", [])
        if not instances:
            return None
        described = instances[0]
        return Membership(str(described["AutoScalingGroupName"]), str(described["LifecycleState"]))


# What EC2 answers for an instance id it has never had (or for no instance id at all).
NO_SUCH_INSTANCE = ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed")


class Ec2InstanceMarkets:
    """`InstanceMarkets` over EC2: DescribeInstances' InstanceLifecycle, which it gives
    only for a Spot (or Scheduled, or Capacity Block) instance."""

    def __init__(self, ec2: Any) -> None:
        self._ec2 = ec2

    def market_of(self, instance_id: str) -> str | None:
        try:
            found = self._ec2.describe_instances(InstanceIds=[instance_id])
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in NO_SUCH_INSTANCE:
                return None
            raise
        for reservation in found.get("Reservations", []):
            for instance in reservation.get("Instances", []):
                return str(instance.get("InstanceLifecycle", "on-demand"))
        return None

"""The drain's Auto Scaling side: heartbeats and completion of a terminate lifecycle action,
and which group an interrupted instance is in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from nodescaler.domain.draining import LifecycleAction, LifecycleResult
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

    def _described(self, instance_id: str) -> dict[str, Any] | None:
        found = self._autoscaling.describe_auto_scaling_instances(InstanceIds=[instance_id])
        instances: list[dict[str, Any]] = found.get("AutoScalingInstances", [])
        return instances[0] if instances else None

    def group_of(self, instance_id: str) -> str | None:
        instance = self._described(instance_id)
        return str(instance["AutoScalingGroupName"]) if instance else None

    def state_of(self, instance_id: str) -> str | None:
        instance = self._described(instance_id)
        return str(instance["LifecycleState"]) if instance else None

"""The drain's Auto Scaling and EC2 side: heartbeats and completion of a terminate lifecycle
action, which group an instance is in and in which state, and how EC2 launched it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.domain.outside_text import outside
from nodescaler.domain.scale_down.drain import LifecycleAction, LifecycleResult, Membership
from nodescaler.errors import DrainHookUnreadError, LifecycleActionExpiredError

if TYPE_CHECKING:
    from nodescaler.ports import Clock

# What Auto Scaling answers (ValidationError) once the action's heartbeat timeout has
# passed or the action was completed: "No active Lifecycle Action found with instance ID i-…"
NO_ACTIVE_ACTION = "No active Lifecycle Action found"
TERMINATING = "autoscaling:EC2_INSTANCE_TERMINATING"


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


class AsgDrainHooks:
    """`DrainHooks` over EC2 Auto Scaling: DescribeLifecycleHooks for the deployment's hook,
    each group's answer kept `KEPT` (Auto Scaling asks again every short while a
    scale-in waits; a hook added is seen within that), an unread one raised, never kept. The client
    given here should carry a budget of its own: the termination policy answers within
    Auto Scaling's two seconds (`wiring.terminator`)."""

    KEPT = timedelta(minutes=1)

    def __init__(self, autoscaling: Any, hook: str, clock: Clock) -> None:
        self._autoscaling = autoscaling
        self._hook = hook
        self._clock = clock
        self._known: dict[str, tuple[datetime, bool]] = {}  # group → (read at, drains)

    def drains(self, group: str) -> bool:
        now = self._clock.now()
        known = self._known.get(group)
        if known is not None and known[0] <= now < known[0] + self.KEPT:
            return known[1]
        try:
            found = self._autoscaling.describe_lifecycle_hooks(
                AutoScalingGroupName=group, LifecycleHookNames=[self._hook]
            )
        except (BotoCoreError, ClientError) as error:
            raise DrainHookUnreadError(
                f"node group {group}: DescribeLifecycleHooks for hook {self._hook} failed: "
                f"{outside(f'{type(error).__name__}: {error}')}"
            ) from None
        drains = any(
            hook.get("LifecycleHookName") == self._hook
            and hook.get("LifecycleTransition") == TERMINATING
            for hook in found.get("LifecycleHooks", [])
        )
        self._known[group] = (now, drains)
        return drains


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

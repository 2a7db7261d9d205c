"""What moto does not do that nodescaler depends on, supplied faithfully on a client.

Each is a botocore `before-call` hook on a moto-backed client, answering as AWS would:
- `AwsRefusal`: SetDesiredCapacity outside the group's [min, max] is refused (moto sets it);
- `LifecycleActionRecorder`: CompleteLifecycleAction and RecordLifecycleActionHeartbeat,
  which moto lacks, for the lifecycle actions a hook holds.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from botocore.awsrequest import AWSResponse


class AwsRefusal:
    """What moto lets through and AWS does not: a desired capacity outside [min, max]."""

    def __init__(self, autoscaling: Any) -> None:
        self._autoscaling = autoscaling

    def watch(self, autoscaling: Any) -> Any:
        autoscaling.meta.events.register(
            "before-call.auto-scaling.SetDesiredCapacity", self, unique_id=f"refusal-{id(self)}"
        )
        return autoscaling

    def __call__(self, params: dict[str, Any], **_: Any) -> Any:
        body = params.get("body") or {}
        group, desired = body.get("AutoScalingGroupName"), body.get("DesiredCapacity")
        if group is None or desired is None:
            return None
        described = self._autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
        asg = described["AutoScalingGroups"][0]
        desired = int(desired)
        if asg["MinSize"] <= desired <= asg["MaxSize"]:
            return None
        side, bound = (
            ("above max", asg["MaxSize"])
            if desired > asg["MaxSize"]
            else ("below min", asg["MinSize"])
        )
        message = (
            f"New SetDesiredCapacity value {desired} is {side} value {bound} for the "
            "AutoScalingGroup."
        )
        return _refused(message)


def _refused(message: str) -> tuple[AWSResponse, dict[str, Any]]:
    metadata = {"RequestId": str(uuid.uuid4()), "HTTPHeaders": {}, "RetryAttempts": 0}
    parsed = {
        "Error": {"Type": "Sender", "Code": "ValidationError", "Message": message},
        "ResponseMetadata": metadata | {"HTTPStatusCode": 400},
    }
    return AWSResponse("https://autoscaling.amazonaws.com/", 400, {}, None), parsed


LIFECYCLE_OPERATIONS = ("CompleteLifecycleAction", "RecordLifecycleActionHeartbeat")


@dataclass(frozen=True)
class LifecycleCall:
    operation: str  # CompleteLifecycleAction or RecordLifecycleActionHeartbeat
    params: dict[str, str]  # as sent: AutoScalingGroupName, InstanceId, LifecycleActionResult...
    accepted: bool


class LifecycleActionRecorder:
    """Auto Scaling's CompleteLifecycleAction and RecordLifecycleActionHeartbeat, on a
    moto-backed client.

    moto implements neither, so a botocore `before-call.autoscaling.<operation>` hook
    answers them before any request is made, as Auto Scaling does: an empty success for
    an action the hook holds (`hold`), and the real ValidationError ("No active Lifecycle
    Action found with instance ID i-…") once it is completed, expired (`expire`) or was
    never held. Every call is kept, accepted or not, in `calls`.
    """

    def __init__(self) -> None:
        self.held: dict[tuple[str, str, str], str] = {}  # (group, hook, instance) → token
        self.calls: list[LifecycleCall] = []

    def watch(self, autoscaling: Any) -> Any:
        for operation in LIFECYCLE_OPERATIONS:
            autoscaling.meta.events.register(
                f"before-call.autoscaling.{operation}",
                self._answer,
                unique_id=f"lifecycle-recorder-{id(self)}-{operation}",
            )
        return autoscaling

    def hold(self, group: str, hook: str, instance_id: str, token: str) -> None:
        """The hook holds this instance in Terminating:Wait until the action is completed."""
        self.held[(group, hook, instance_id)] = token

    def expire(self, instance_id: str) -> None:
        """The hook's heartbeat timeout passed: Auto Scaling let the instance go."""
        self.held = {k: t for k, t in self.held.items() if k[2] != instance_id}

    def completed(self) -> list[dict[str, str]]:
        """Every CompleteLifecycleAction call made, accepted or refused."""
        return [c.params for c in self.calls if c.operation == "CompleteLifecycleAction"]

    def heartbeats(self) -> list[dict[str, str]]:
        return [c.params for c in self.calls if c.operation == "RecordLifecycleActionHeartbeat"]

    def _answer(self, model: Any, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        # The query protocol's body, still a dict here: the API parameters by their names.
        sent = {k: str(v) for k, v in params["body"].items() if k not in ("Action", "Version")}
        key = (sent["AutoScalingGroupName"], sent["LifecycleHookName"], sent.get("InstanceId", ""))
        token = self.held.get(key)
        accepted = token is not None and sent.get("LifecycleActionToken", token) == token
        self.calls.append(LifecycleCall(model.name, sent, accepted))
        if accepted and model.name == "CompleteLifecycleAction":
            del self.held[key]
        if not accepted:
            return _refused(f"No active Lifecycle Action found with instance ID {key[2]}")
        metadata = {"RequestId": str(uuid.uuid4()), "HTTPHeaders": {}, "RetryAttempts": 0}
        parsed = {"ResponseMetadata": metadata | {"HTTPStatusCode": 200}}
        return AWSResponse("https://autoscaling.amazonaws.com/", 200, {}, None), parsed

"""What moto does not do that nodescaler depends on, supplied faithfully (moto's server
itself, in this process, is `moto_server`'s). Each is a botocore `before-call` hook on a
moto-backed client, answering as AWS would:
- `AwsRefusal`: SetDesiredCapacity outside the group's [min, max] is refused (moto sets it);
- `LifecycleActionRecorder`: CompleteLifecycleAction and RecordLifecycleActionHeartbeat,
  which moto lacks, for the lifecycle actions a hook holds, and those instances in
  Terminating:Wait in DescribeAutoScalingInstances and in their group's Instances in
  DescribeAutoScalingGroups (moto's hooks never hold one);
- `ScalingActivities`: DescribeScalingActivities, which moto always answers empty, with the
  failed launches the sandbox makes;
- `MetricMath`: GetMetricData with a metric-math expression, which moto leaves empty.
And `launched_as_spot`: a group's instances launched as Spot Instances when its launch
template asks for Spot (moto launches them on demand).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.awsrequest import AWSResponse

from nodescaler_sandbox.provision import moto_groups


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
DESCRIBE_INSTANCES = "DescribeAutoScalingInstances"
DESCRIBE_GROUPS = "DescribeAutoScalingGroups"
# Where a terminate hook holds an instance until its action is completed or times out:
# https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html
HELD_STATE = "Terminating:Wait"


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
    Action found with instance ID i-…") once it is completed, expired (`expire`, or past
    its heartbeat timeout: `expire_overdue`) or was never held. Every call is kept,
    accepted or not, in `calls`.

    With a clock and the hook's heartbeat timeout, each held action has a deadline that an
    accepted heartbeat moves on, as Auto Scaling's does.

    While held, the instance is in its group in Terminating:Wait, and
    DescribeAutoScalingInstances and DescribeAutoScalingGroups say so: moto's answers are
    corrected (moto has it InService, or has dropped it from the group already).
    """

    def __init__(
        self,
        clock: Callable[[], datetime] | None = None,
        heartbeat_timeout: timedelta = timedelta(hours=1),  # Auto Scaling's default
    ) -> None:
        self.held: dict[tuple[str, str, str], str] = {}  # (group, hook, instance) → token
        self.calls: list[LifecycleCall] = []
        self._clock = clock
        self._heartbeat_timeout = heartbeat_timeout
        self._deadlines: dict[tuple[str, str, str], datetime] = {}

    def watch(self, autoscaling: Any) -> Any:
        for operation in LIFECYCLE_OPERATIONS:
            autoscaling.meta.events.register(
                f"before-call.autoscaling.{operation}",
                self._answer,
                unique_id=f"lifecycle-recorder-{id(self)}-{operation}",
            )
        events = autoscaling.meta.events
        unique = f"lifecycle-recorder-{id(self)}-{DESCRIBE_INSTANCES}"
        events.register(f"before-call.autoscaling.{DESCRIBE_INSTANCES}", _asked, f"{unique}-in")
        events.register(f"after-call.autoscaling.{DESCRIBE_INSTANCES}", self._held, f"{unique}-out")
        events.register(
            f"after-call.autoscaling.{DESCRIBE_GROUPS}",
            self._held_in_groups,
            unique_id=f"lifecycle-recorder-{id(self)}-{DESCRIBE_GROUPS}",
        )
        return autoscaling

    def _held_in_groups(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """Each described group's held instances among its Instances, in Terminating:Wait,
        as Auto Scaling lists an instance until it is terminated."""
        for group in parsed.get("AutoScalingGroups", []):
            name = group.get("AutoScalingGroupName")
            listed = {i["InstanceId"]: i for i in group.get("Instances", [])}
            for held_group, _hook, instance_id in self.held:
                if held_group == name:
                    found = listed.get(instance_id) or _held_instance(context, instance_id)
                    listed[instance_id] = found | {"LifecycleState": HELD_STATE}
            if listed:
                group["Instances"] = list(listed.values())

    def _held(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """The held instances asked for, in Terminating:Wait in their group."""
        asked = context.pop("sandbox_asked", None)
        described = {i["InstanceId"]: i for i in parsed.get("AutoScalingInstances", [])}
        for group, _hook, instance_id in self.held:
            if asked is not None and instance_id not in asked:
                continue
            moto = described.get(instance_id) or _held_instance(context, instance_id)
            described[instance_id] = moto | {
                "AutoScalingGroupName": group,
                "LifecycleState": HELD_STATE,
            }
        parsed["AutoScalingInstances"] = list(described.values())

    def hold(self, group: str, hook: str, instance_id: str, token: str) -> None:
        """The hook holds this instance in Terminating:Wait until the action is completed."""
        self.held[(group, hook, instance_id)] = token
        self._keep_alive((group, hook, instance_id))

    def expire(self, instance_id: str) -> None:
        """The hook's heartbeat timeout passed: Auto Scaling let the instance go."""
        self.held = {k: t for k, t in self.held.items() if k[2] != instance_id}

    def expire_overdue(self, now: datetime) -> None:
        """Let go every action whose heartbeat timeout has passed by `now`."""
        for key in [k for k, deadline in self._deadlines.items() if now >= deadline]:
            self.held.pop(key, None)
            del self._deadlines[key]

    def _keep_alive(self, key: tuple[str, str, str]) -> None:
        if self._clock is not None:
            self._deadlines[key] = self._clock() + self._heartbeat_timeout

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
            self._deadlines.pop(key, None)
        elif accepted:  # a heartbeat
            self._keep_alive(key)
        if not accepted:
            return _refused(f"No active Lifecycle Action found with instance ID {key[2]}")
        metadata = {"RequestId": str(uuid.uuid4()), "HTTPHeaders": {}, "RetryAttempts": 0}
        parsed = {"ResponseMetadata": metadata | {"HTTPStatusCode": 200}}
        return AWSResponse("https://autoscaling.amazonaws.com/", 200, {}, None), parsed


def _asked(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """The InstanceIds a DescribeAutoScalingInstances asks for (none: every instance)."""
    body = params.get("body") or {}
    ids = {str(v) for k, v in body.items() if k.startswith("InstanceIds.member.")}
    context["sandbox_asked"] = ids or None


def _held_instance(context: dict[str, Any], instance_id: str) -> dict[str, Any]:
    """A held instance moto no longer lists in its group: as Auto Scaling describes it,
    its zone from moto's EC2 record (an instance moto never launched has none to give)."""
    described: dict[str, Any] = {
        "InstanceId": instance_id,
        "HealthStatus": "HEALTHY",
        "ProtectedFromScaleIn": False,
    }
    instance = _moto_instance(str(context.get("client_region")), instance_id)
    if instance is not None:
        described |= {
            "AvailabilityZone": instance.placement.zone,
            "InstanceType": instance.instance_type,
        }
    return described


def _moto_instance(region: str, instance_id: str) -> Any:
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    instances = ec2_backends[DEFAULT_ACCOUNT_ID][region].all_instances()
    return next((i for i in instances if i.id == instance_id), None)


def launched_as_spot(region: str, group: str) -> list[str]:
    """What EC2 does for a group whose launch template asks for Spot
    (InstanceMarketOptions.MarketType "spot"), which moto launches on demand: its instances
    are Spot Instances, "InstanceLifecycle": "spot" in DescribeInstances
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Instance.html). Returns them;
    none for a group whose template does not ask for Spot."""
    moto_group = _moto_group(region, group)
    template = moto_group.ec2_launch_template
    if template is None:
        return []
    version = template.get_version(moto_group.launch_template_version or "$Default")
    market = version.data.get("InstanceMarketOptions") or {}
    if market.get("MarketType") != "spot":
        return []
    for state in moto_group.instance_states:
        state.instance.lifecycle = "spot"
    return [state.instance.id for state in moto_group.instance_states]


class ScalingActivities:
    """DescribeScalingActivities, which moto always answers empty, on a moto-backed client:
    answered from the activities recorded here (`launch_failed`), newest first, as Auto
    Scaling lists them; an ActivityIds filter keeps the ones asked for and ignores unknown
    ids without an error, and a group name keeps that group's
    (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_DescribeScalingActivities.html)."""

    def __init__(self) -> None:
        self.activities: list[dict[str, Any]] = []

    def watch(self, autoscaling: Any) -> Any:
        autoscaling.meta.events.register(
            "before-call.autoscaling.DescribeScalingActivities",
            self._answer,
            unique_id=f"scaling-activities-{id(self)}",
        )
        return autoscaling

    def launch_failed(
        self,
        group: str,
        at: datetime,
        message: str,
        activity_id: str | None = None,
        status: str = "Failed",
    ) -> str:
        """A launch that ended at `at` (StatusCode `status`: "Failed" or "Cancelled" when it
        failed, "Successful" when it did not), `message` its StatusMessage. Returns its id
        (`activity_id`, or a new one, a UUID as Auto Scaling's are)."""
        activity_id = activity_id or str(uuid.uuid4())
        self.activities.insert(
            0,
            {
                "ActivityId": activity_id,
                "AutoScalingGroupName": group,
                "Description": "Launching a new EC2 instance.  Status Reason: " + message,
                "Cause": f"At {at:%Y-%m-%dT%H:%M:%SZ} an instance was started in response to a "
                "difference between desired and actual capacity.",
                "StartTime": at,
                "EndTime": at,
                "StatusCode": status,
                "StatusMessage": message,
                "Progress": 100,
            },
        )
        return activity_id

    def _answer(self, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        body = params["body"]
        group = body.get("AutoScalingGroupName")
        ids = {str(v) for k, v in body.items() if k.startswith("ActivityIds.member.")}
        found = [
            a
            for a in self.activities
            if (group is None or a["AutoScalingGroupName"] == group)
            and (not ids or a["ActivityId"] in ids)
        ]
        metadata = {"RequestId": str(uuid.uuid4()), "HTTPStatusCode": 200, "HTTPHeaders": {}}
        url = "https://autoscaling.amazonaws.com/"
        return AWSResponse(url, 200, {}, None), {"Activities": found, "ResponseMetadata": metadata}


class MetricMath:
    """GetMetricData with a metric-math expression, which moto answers with no values:
    the expression's metrics are read from moto one by one and the expression evaluated
    (`metric_math`), timestamp by timestamp. Calls without an expression go to moto."""

    def __init__(self, cloudwatch: Any) -> None:
        self._cloudwatch = cloudwatch  # the sandbox's own, unwatched

    def watch(self, cloudwatch: Any) -> Any:
        events = cloudwatch.meta.events
        # The request as the caller gave it is seen only before it is serialized (CBOR).
        events.register(
            "before-parameter-build.cloudwatch.GetMetricData", self._evaluate, f"math-in-{id(self)}"
        )
        events.register(
            "before-call.cloudwatch.GetMetricData", self._answer, f"math-out-{id(self)}"
        )
        return cloudwatch

    def _evaluate(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        from nodescaler_sandbox import metric_math

        queries = params.get("MetricDataQueries", [])
        if not any("Expression" in q for q in queries):
            return
        window: dict[str, Any] = {k: params[k] for k in ("StartTime", "EndTime") if k in params}
        series = {q["Id"]: self._series(q, window) for q in queries if "MetricStat" in q}
        results = []
        for query in queries:
            if not query.get("ReturnData", True):
                continue
            if "Expression" in query:
                values = metric_math.evaluate(query["Expression"], series)
            else:
                values = series[query["Id"]]
            latest_first = sorted(values.items(), reverse=True)
            results.append(
                {
                    "Id": query["Id"],
                    "Label": query.get("Label", query["Id"]),
                    "Timestamps": [at for at, _ in latest_first],
                    "Values": [value for _, value in latest_first],
                    "StatusCode": "Complete",
                }
            )
        metadata = {"RequestId": str(uuid.uuid4()), "HTTPHeaders": {}, "RetryAttempts": 0}
        context["sandbox_answer"] = (
            AWSResponse("https://monitoring.amazonaws.com/", 200, {}, None),
            {
                "MetricDataResults": results,
                "Messages": [],
                "ResponseMetadata": metadata | {"HTTPStatusCode": 200},
            },
        )

    def _series(self, query: dict[str, Any], window: dict[str, Any]) -> dict[datetime, float]:
        one = {"Id": query["Id"], "MetricStat": query["MetricStat"], "ReturnData": True}
        (result,) = self._cloudwatch.get_metric_data(MetricDataQueries=[one], **window)[
            "MetricDataResults"
        ]
        return dict(zip(result["Timestamps"], result["Values"], strict=True))

    @staticmethod
    def _answer(context: dict[str, Any], **_: Any) -> Any:
        return context.pop("sandbox_answer", None)


def _moto_group(region: str, name: str) -> Any:
    return moto_groups(region)[name]


class TerminationPolicies:
    """Which instances a scale-in takes, as Auto Scaling picks them (moto takes the oldest
    unprotected): the group's custom termination policy when it has one, invoked with the
    payload AWS sends and its answer obeyed (none, an error or a timeout: asked again a
    minute later, for as long as the group is above its desired capacity); else, and among
    more instances than needed, the default policy: the zone with the most instances, then
    instances of an older launch configuration, then the one closest to its next billing
    hour. An instance protected from scale-in is never taken."""

    def __init__(
        self,
        region: str,
        launched: Callable[[str], datetime | None],
        now: Callable[[], datetime],
        custom: Callable[[str, dict[str, Any]], Any] | None = None,
    ) -> None:
        self._region = region
        self._launched = launched
        self._now = now
        self._custom = custom
        self.custom_groups: set[str] = set()  # groups whose policy is the custom one
        self.waiting: dict[str, datetime] = {}  # group → when it last asked, in vain
        self.invocations: list[tuple[str, list[str]]] = []  # (group, instances answered)
        self.failures: list[tuple[str, str]] = []  # (group, why)

    def watch(self, autoscaling: Any) -> Any:
        events = autoscaling.meta.events
        operation = "auto-scaling.SetDesiredCapacity"
        events.register(f"before-call.{operation}", self._before, f"termination-{id(self)}")
        events.register(f"after-call.{operation}", self._after, f"termination-after-{id(self)}")
        return autoscaling

    def _before(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        body = params.get("body") or {}
        name, desired = body.get("AutoScalingGroupName"), body.get("DesiredCapacity")
        if name is None or desired is None:
            return
        group = _moto_group(self._region, name)
        excess = len(group.instance_states) - int(desired)
        if excess > 0:  # a scale-in: the instances to take are ours to choose, not moto's
            context["sandbox_scale_in"] = (name, self._protect_all(group))

    def _after(self, context: dict[str, Any], **_: Any) -> None:
        if "sandbox_scale_in" in context:
            name, protection = context.pop("sandbox_scale_in")
            self._scale_in(name, protection)

    def retry(self) -> None:
        """A group still above its desired capacity asks its policy again, a minute on."""
        for name, asked in list(self.waiting.items()):
            if self._now() - asked >= timedelta(minutes=1):
                group = _moto_group(self._region, name)
                self._scale_in(name, self._protect_all(group))

    @staticmethod
    def _protect_all(group: Any) -> dict[str, bool]:
        """Every instance protected while moto applies the call (so it takes none); their
        own protection, to restore."""
        protection = {s.instance.id: bool(s.protected_from_scale_in) for s in group.instance_states}
        for state in group.instance_states:
            state.protected_from_scale_in = True
        return protection

    def _scale_in(self, name: str, protection: dict[str, bool]) -> None:
        from moto.autoscaling.models import autoscaling_backends
        from moto.core.models import DEFAULT_ACCOUNT_ID

        backend = autoscaling_backends[DEFAULT_ACCOUNT_ID][self._region]
        group = backend.autoscaling_groups[name]
        try:
            excess = len(group.instance_states) - (group.desired_capacity or 0)
            candidates = [s for s in group.instance_states if not protection.get(s.instance.id)]
            chosen = self._choose(name, group, candidates, excess) if excess > 0 else []
            for instance_id in chosen:  # everything else protected: moto takes only these
                backend.terminate_instance(instance_id, should_decrement=False)
        finally:
            for state in group.instance_states:
                state.protected_from_scale_in = protection.get(state.instance.id, False)
        if len(group.instance_states) > (group.desired_capacity or 0):
            self.waiting[name] = self._now()
        else:
            self.waiting.pop(name, None)

    def _choose(self, name: str, group: Any, candidates: list[Any], count: int) -> list[str]:
        zones: dict[str, list[Any]] = {}
        for state in candidates:
            zones.setdefault(state.availability_zone, []).append(state)
        if not zones:
            return []
        most = max(len(states) for states in zones.values())
        offered = [s for states in zones.values() if len(states) == most for s in states]
        if name not in self.custom_groups or self._custom is None:
            return self._by_default(offered, count)
        payload = {
            "AutoScalingGroupARN": group.arn,
            "AutoScalingGroupName": name,
            "CapacityToTerminate": [
                {"AvailabilityZone": zone, "Capacity": count, "InstanceMarketOption": "on-demand"}
                for zone in sorted({s.availability_zone for s in offered})
            ][:1],
            "Instances": [
                {
                    "AvailabilityZone": s.availability_zone,
                    "InstanceId": s.instance.id,
                    "InstanceType": s.instance.instance_type,
                    "InstanceMarketOption": "on-demand",
                }
                for s in offered
            ],
            "Cause": "SCALE_IN",
            "HasMoreInstances": False,
        }
        try:
            answer = self._custom(name, payload)
            ids = [i for i in answer["InstanceIDs"] if isinstance(i, str)]
        except Exception as error:  # an error or a timeout: Auto Scaling asks again later
            self.failures.append((name, str(error)))
            return []
        self.invocations.append((name, ids))
        allowed = [s for s in offered if s.instance.id in set(ids)]
        return self._by_default(allowed, count)  # more than needed: the next policy

    def _by_default(self, states: list[Any], count: int) -> list[str]:
        """Auto Scaling's default termination policy among `states` (one zone's): the
        oldest launch configuration first (a sandbox group keeps one, so this never
        separates them), then the instance closest to its next billing hour."""

        def rank(state: Any) -> tuple[float, str]:
            launched = self._launched(state.instance.id) or self._now()
            minutes = (self._now() - launched).total_seconds() / 60
            return (60 - minutes % 60, state.instance.id)

        return [s.instance.id for s in sorted(states, key=rank)[:count]]

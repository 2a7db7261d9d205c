""" "CA tuned": the Cluster Autoscaler settings an operator would pick to match a group's
nodescaler policy, so the baseline is compared with what its users run, not its defaults.

Read from the policy model alone (none of nodescaler's scaling logic), one group at a time:
- its scale-down window → the group's unneeded time, as the per-ASG tag
  `k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtime`
  (Cluster Autoscaler's cloudprovider/aws/README.md; it overrides --scale-down-unneeded-time
  for that group; a policy without one has nodescaler's 10 minutes, CA's default too);
- its consolidation `WhenEmpty` (shed only nodes no pod runs on: an eviction would restart
  a job) → the group's utilization threshold at 0, as the per-ASG tag
  `.../autoscaling-options/scaledownutilizationthreshold`: the FAQ's answer to "How can I
  prevent Cluster Autoscaler from scaling down non-empty nodes?" (empty nodes still go:
  kubernetes/autoscaler#8975). Without it CA would evict the jobs to pack them;
- its capacity buffer → overprovisioning placeholders (the FAQ, "How can I configure
  overprovisioning with Cluster Autoscaler?"): a Deployment of pause pods at priority -1,
  one of the buffer's shape for each of its pods, kept on the group's nodes by a
  nodeSelector on the label EKS gives them (`eks.amazonaws.com/nodegroup`, which the
  operator also tags the group with so CA knows it at zero). Real pods preempt them; the
  placeholders then pending drive CA's scale-up. A buffer sized from arrivals
  (`fromArrivals`) becomes its `maxPods` placeholders: CA's count is fixed, so an operator
  covers the fastest arrivals the policy allows;
- its reservation target (a `CapacityReservation` metric at T % of cpu or memory) →
  proportional placeholders (the FAQ's "dynamic overprovisioning"): a Deployment of pause
  pods of an eighth of a node at priority -1 on the group's nodes, scaled every 10 s by a
  cluster-proportional-autoscaler counting the group's nodes alone so that they take
  (100 - T) % of its allocatable (`baseline_proportional`, which states the rule);
- its bounds → the group's MinSize and MaxSize (the policy's inside the group's own);
- its schedule → Auto Scaling scheduled actions, the pattern AWS shows for CA users: at
  each entry's start the group's minimum is raised to its replicas, at its end lowered to
  the schedule's default, so CA cannot go below it while it is open and scales down
  gracefully after (https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-scheduled-scaling.html).
  moto stores scheduled actions and never runs them: `ScheduledActions` runs them here;
- the cluster's CapacityBuffers → read, as Cluster Autoscaler 1.34 reads them with
  --capacity-buffer-controller-enabled and --capacity-buffer-pod-injection-enabled (both
  off by default: its FAQ's flag table), which an operator whose teams write buffers
  turns on: each buffer's pods are injected, in memory, beside the pending pods
  (cluster-autoscaler/proposals/buffers.md: "translated to pod specs that could be
  injected in memory by autoscaler"). In memory or as placeholders the effect is one:
  the room they fit is held, the rest drive a scale-up, a node they fill is not
  unneeded; so each becomes placeholders of its template's shape;
- its warm pool: the group's own, as the operator configured it, in both runs (CA cannot
  size one; nodescaler's `warmPool: true` sizing is its own);
- its forecast (a Predictive metric: the group's own history, a day of it before it acts)
  → scheduled minimums an operator sets from the same day of history (`forecast_minimums`):
  for each hour of that day, the most nodes its pods needed within the hour (their
  requests over a node's allocatable, the largest over resources, rounded up), as an Auto
  Scaling scheduled action raising or lowering the group's minimum to it one boot time
  (from the warm pool, if the group has one) before the hour, every day from the second on;
- the cluster's flags (`cluster_flags`), the same for every scenario: frequent loops on
  (--frequent-loops-enabled, the 1.37 default), --max-scale-down-parallelism sized to the
  groups (the sum of their maximums: a whole group may go in one loop), and
  --scale-down-delay-after-add no longer than the shortest unneeded time of a group (a
  global flag: one placeholder preemption's scale-up then holds no deletion longer than
  the group waits anyway); --ignore-daemonsets-utilization (a DaemonSet's pod is on every
  node and goes with it: counted, it keeps a node that holds nothing else above a `WhenEmpty`
  group's threshold of 0 for good, and every node busier than its workload) and
  --ignore-mirror-pods-utilization (nodescaler's own rule leaves both out); and
  --startup-taint for the startup taints its groups' nodes
  register with (`controllers._tune`: the operator set those agents up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from croniter import croniter
from nodescaler.domain.policy import (
    Consolidation,
    NodeGroupPolicy,
    PendingPodsMetric,
    PredictiveMetric,
    ScheduleMetric,
)

from nodescaler_sandbox.baseline_flags import (
    DELAY_AFTER_ADD,
    MAX_SCALE_DOWN_PARALLELISM,
    TEMPLATE_TAG,
    UNREMOVABLE_RECHECK,
    Flags,
)
from nodescaler_sandbox.baseline_proportional import Proportional
from nodescaler_sandbox.baseline_scale_down import (
    GPU_UTILIZATION_TAG,
    UNNEEDED_TIME_TAG,
    UTILIZATION_TAG,
    unneeded_time,
)
from nodescaler_sandbox.cluster import NAMESPACE
from nodescaler_sandbox.workloads import Deployment, pod

if TYPE_CHECKING:
    from nodescaler_sandbox.scenario_file import CapacityBufferSpec

GROUP_LABEL = "eks.amazonaws.com/nodegroup"  # on an EKS node group's nodes
TEMPLATE_LABEL_TAG = TEMPLATE_TAG + "label/"
PLACEHOLDER_PRIORITY = -1  # the FAQ: "Priority -1 will be reserved for overprovisioning pods"
PLACEHOLDER_PREFIX = "overprovisioning-"


@dataclass(frozen=True)
class Placeholders:
    """A Deployment of pause pods holding room in a group: `pods` of one shape."""

    group: str
    pods: int
    requests: dict[str, str]  # cpu, memory and extended resources
    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]


@dataclass(frozen=True)
class ScheduledAction:
    """An Auto Scaling scheduled action: at each `recurrence` (cron, in `time_zone`), the
    group's minimum set to `min_size`; from `start` on, if given."""

    name: str
    recurrence: str
    time_zone: str
    min_size: int
    start: datetime | None = None


@dataclass(frozen=True)
class GroupTuning:
    group: str
    min_size: int
    max_size: int
    tags: dict[str, str]  # added to the Auto Scaling group's
    labels: dict[str, str]  # the operator's kubelet gives its nodes
    placeholders: list[Placeholders] = field(default_factory=list)
    scheduled_actions: list[ScheduledAction] = field(default_factory=list)
    proportional: Proportional | None = None  # placeholders a CPA scales to the group


def tune(policy: NodeGroupPolicy, group: str, min_size: int, max_size: int) -> GroupTuning:
    """The Cluster Autoscaler settings matching `policy` for `group` (whose own bounds are
    `min_size`, `max_size`)."""
    low = min(max(policy.spec.min_replicas, min_size), max_size)
    high = min(max(policy.spec.max_replicas, min_size), max_size)
    window = policy.spec.behavior.down.stabilization_window_seconds
    tags = {UNNEEDED_TIME_TAG: go_duration(window), TEMPLATE_LABEL_TAG + GROUP_LABEL: group}
    if _empty_only(policy):  # on a GPU node its GPU threshold decides: both at 0
        tags[UTILIZATION_TAG] = tags[GPU_UTILIZATION_TAG] = "0"
    return GroupTuning(
        group,
        low,
        high,
        tags,
        {GROUP_LABEL: group},
        _placeholders(policy, group),
        _scheduled_actions(policy, group, low, high),
    )


def go_duration(seconds: int) -> str:
    """A duration as Go's time.Duration prints it, as the tag is written: 120 → "2m0s"."""
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{seconds}s"
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


def _empty_only(policy: NodeGroupPolicy) -> bool:
    """Whether the policy sheds only empty nodes (`consolidation: WhenEmpty`)."""
    return any(
        isinstance(metric, PendingPodsMetric)
        and metric.pending_pods.consolidation is Consolidation.WHEN_EMPTY
        for metric in policy.spec.metrics
    )


def _placeholders(policy: NodeGroupPolicy, group: str) -> list[Placeholders]:
    return [
        Placeholders(
            group,
            # sized from arrivals: CA's placeholders are fixed, so an operator provisions
            # the most the policy allows
            buffer.least if buffer.from_arrivals is None else buffer.from_arrivals.max_pods,
            {name: str(amount) for name, amount in buffer.requests.items()},
            dict(buffer.node_selector) | {GROUP_LABEL: group},
            [t.model_dump(exclude_defaults=True) for t in buffer.tolerations],
        )
        for metric in policy.spec.metrics
        if isinstance(metric, PendingPodsMetric)
        for buffer in metric.pending_pods.buffer
    ]


def buffer_placeholders(buffers: Sequence[CapacityBufferSpec]) -> list[Placeholders]:
    """The fake pods CA injects for the cluster's CapacityBuffers, as placeholders."""
    return [
        Placeholders(
            f"buffer-{buffer.namespace}-{buffer.name}",
            buffer.replicas,
            {"cpu": buffer.pod.cpu, "memory": buffer.pod.memory}
            | {name: str(amount) for name, amount in buffer.pod.extended.items()},
            dict(buffer.pod.node_selector),
            [t.model_dump() for t in buffer.pod.tolerations],
        )
        for buffer in buffers
    ]


def _scheduled_actions(
    policy: NodeGroupPolicy, group: str, low: int, high: int
) -> list[ScheduledAction]:
    actions = []
    for metric in policy.spec.metrics:
        if not isinstance(metric, ScheduleMetric):
            continue
        schedule = metric.schedule
        after = min(max(schedule.default_replicas, low), high)
        for index, entry in enumerate(schedule.entries):
            name = entry.name or f"entry-{index}"
            during = min(max(entry.replicas, low), high)
            actions += [
                ScheduledAction(f"{group}-{name}-start", entry.start, schedule.time_zone, during),
                ScheduledAction(f"{group}-{name}-end", entry.end, schedule.time_zone, after),
            ]
    return actions


def has_forecast(policy: NodeGroupPolicy) -> bool:
    """Whether the policy scales on a forecast of the group's own demand."""
    return any(isinstance(metric, PredictiveMetric) for metric in policy.spec.metrics)


LEARNING = timedelta(hours=24)  # the history a forecast has before it acts


def forecast_minimums(
    group: str,
    needed: Sequence[int],
    start: datetime,
    lead: timedelta,
    bounds: tuple[int, int],
) -> list[ScheduledAction]:
    """Scheduled minimums from a day of history: `needed`, the nodes the group's pods
    needed at each minute of the day from `start` (UTC); for each hour the most
    of its minutes', clamped to `bounds`, set `lead` before the hour (only where it
    changes from the hour before), daily from the day after `start`."""
    low, high = bounds
    actions: list[ScheduledAction] = []
    last: int | None = None
    for hour in range(24):
        within = needed[hour * 60 : (hour + 1) * 60]
        peak = min(max(max(within, default=0), low), high)
        if peak == last:
            continue
        last = peak
        since_midnight = timedelta(hours=start.hour, minutes=start.minute)
        fires = (since_midnight + timedelta(hours=hour) - lead) % timedelta(days=1)
        minutes = int(fires.total_seconds() // 60)
        recurrence = f"{minutes % 60} {minutes // 60} * * *"
        name = f"{group}-forecast-{hour:02d}"
        actions.append(ScheduledAction(name, recurrence, "UTC", peak, start + LEARNING))
    return actions


def cluster_flags(tunings: Sequence[GroupTuning]) -> Flags:
    """The cluster-wide flags an operator sets for these groups (see the module's docstring)."""
    shortest = min((unneeded_time(t.tags) for t in tunings), default=DELAY_AFTER_ADD)
    return Flags(
        scale_down_delay_after_add=min(DELAY_AFTER_ADD, shortest),
        unremovable_node_recheck_timeout=min(UNREMOVABLE_RECHECK, shortest),
        max_scale_down_parallelism=max(
            MAX_SCALE_DOWN_PARALLELISM, sum(t.max_size for t in tunings)
        ),
        frequent_loops_enabled=True,
        ignore_daemonsets_utilization=True,
        ignore_mirror_pods_utilization=True,  # as nodescaler's own rule leaves them out
    )


def settings(
    flags: Flags, tunings: Sequence[GroupTuning], buffers: Sequence[Placeholders]
) -> dict[str, Any]:
    """What CA tuned ran with, as summary.json gives it: its flags, each group's tags,
    bounds, placeholders, proportional placeholders (their shape and their CPA's flags)
    and scheduled actions, and the CapacityBuffers' placeholders."""

    def placeholders(found: Sequence[Placeholders]) -> list[dict[str, Any]]:
        return [
            {"pods": p.pods, "requests": p.requests, "nodeSelector": p.node_selector} for p in found
        ]

    return {
        "flags": flags.as_flags(),
        "groups": {
            t.group: {
                "min": t.min_size,
                "max": t.max_size,
                "tags": t.tags,
                "placeholders": placeholders(t.placeholders),
                "proportional": _proportional(t.proportional),
                "scheduled_actions": [
                    {"name": a.name, "recurrence": a.recurrence, "min_size": a.min_size}
                    | ({"start": a.start.isoformat()} if a.start else {})
                    for a in t.scheduled_actions
                ],
            }
            for t in tunings
        },
        "capacity_buffers": placeholders(buffers),
    }


def _proportional(found: Proportional | None) -> dict[str, Any] | None:
    if found is None:
        return None
    return {
        "requests": found.requests,
        "nodeSelector": found.node_selector,
        "cluster-proportional-autoscaler": found.flags(proportional_name(found)),
    }


# --- in the sandbox --------------------------------------------------------------------


def proportional_name(found: Proportional) -> str:
    """The Deployment of a group's proportional placeholders."""
    return f"{PLACEHOLDER_PREFIX}{found.group}-proportional"


def proportional_deployment(found: Proportional) -> Deployment:
    """The proportional placeholders as a Deployment, none until their CPA's first poll."""
    shape = Placeholders(found.group, 0, found.requests, found.node_selector, found.tolerations)
    deployment = placeholder_deployment(shape, 0)
    deployment.name = proportional_name(found)
    return deployment


def placeholder_deployment(placeholders: Placeholders, index: int) -> Deployment:
    """The placeholders as a Deployment the sandbox keeps: a preempted pod is replaced by
    a new, pending one, as its ReplicaSet does."""
    asked = dict(placeholders.requests)
    return _PlaceholderDeployment(
        f"{PLACEHOLDER_PREFIX}{placeholders.group}-{index}",
        asked.pop("cpu", "0"),
        asked.pop("memory", "0"),
        [(0, placeholders.pods)],
        node_selector=placeholders.node_selector,
        tolerations=placeholders.tolerations,
        extended={name: int(amount) for name, amount in asked.items()},
        priority=PLACEHOLDER_PRIORITY,
        namespace=NAMESPACE,
    )


@dataclass
class _PlaceholderDeployment(Deployment):
    def _pod(self, now: datetime) -> dict[str, Any]:
        self.created += 1
        made = pod(
            f"{self.name}-{self.created}",
            self.name,
            self.cpu,
            self.memory,
            created=now,
            extended=self.extended,
            priority=self.priority,
            node_selector=self.node_selector,
        )
        if self.tolerations:  # as written: Exists or Equal
            made["spec"]["tolerations"] = [dict(t) for t in self.tolerations]
        return made


def is_placeholder(found: dict[str, Any]) -> bool:
    """An overprovisioning pod: room held, not work (left out of waits and of use)."""
    return str(found["metadata"].get("labels", {}).get("app", "")).startswith(PLACEHOLDER_PREFIX)


def configure(autoscaling: Any, tuning: GroupTuning) -> None:
    """The tuning written to the Auto Scaling group: tags, bounds, scheduled actions."""
    autoscaling.create_or_update_tags(
        Tags=[
            {
                "ResourceId": tuning.group,
                "ResourceType": "auto-scaling-group",
                "Key": key,
                "Value": value,
                "PropagateAtLaunch": False,
            }
            for key, value in tuning.tags.items()
        ]
    )
    autoscaling.update_auto_scaling_group(
        AutoScalingGroupName=tuning.group, MinSize=tuning.min_size, MaxSize=tuning.max_size
    )
    for action in tuning.scheduled_actions:
        autoscaling.put_scheduled_update_group_action(
            AutoScalingGroupName=tuning.group,
            ScheduledActionName=action.name,
            Recurrence=action.recurrence,
            TimeZone=action.time_zone,
            MinSize=action.min_size,
            **({"StartTime": action.start} if action.start else {}),
        )


@dataclass
class ScheduledActions:
    """Runs the groups' scheduled actions at their times, as Auto Scaling does (moto only
    stores them): each action whose recurrence came due since the last look sets the
    group's bounds, its desired capacity moved inside them
    (https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-scheduled-scaling.html:
    the capacity must fall within the minimum and maximum)."""

    autoscaling: Any
    last: datetime

    def run(self, now: datetime) -> list[str]:
        """Each group's latest action due in (last, now], applied (the earlier ones would
        be overridden by it: what a first look from long ago catches up on); their names.
        A recurrence comes due only on a whole minute: a look with none in (last, now]
        (most steps of a world in seconds) has nothing to run and reads nothing."""
        if now.replace(second=0, microsecond=0) <= self.last:
            self.last = now
            return []
        latest: dict[str, tuple[datetime, dict[str, Any]]] = {}
        for action in self._actions():
            at = last_fire(action["Recurrence"], action.get("TimeZone"), now)
            group = action["AutoScalingGroupName"]
            if "StartTime" in action and at < _aware(action["StartTime"]):
                continue  # not started yet: it runs from its StartTime on
            if at > self.last and (group not in latest or at > latest[group][0]):
                latest[group] = (at, action)
        for _, action in latest.values():
            self._apply(action)
        self.last = now
        return [action["ScheduledActionName"] for _, action in latest.values()]

    def _actions(self) -> list[dict[str, Any]]:
        return list(self.autoscaling.describe_scheduled_actions()["ScheduledUpdateGroupActions"])

    def _apply(self, action: dict[str, Any]) -> None:
        name = action["AutoScalingGroupName"]
        group = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])[
            "AutoScalingGroups"
        ][0]
        low = action.get("MinSize", group["MinSize"])
        high = action.get("MaxSize", group["MaxSize"])
        desired = action.get("DesiredCapacity", group["DesiredCapacity"])
        self.autoscaling.update_auto_scaling_group(
            AutoScalingGroupName=name,
            MinSize=low,
            MaxSize=high,
            DesiredCapacity=min(max(desired, low), high),
        )


def last_fire(recurrence: str, time_zone: str | None, now: datetime) -> datetime:
    """When the cron `recurrence`, read in `time_zone` (UTC by default), last came due at
    or before `now`."""
    local = now.astimezone(ZoneInfo(time_zone or "UTC"))
    fired: datetime = croniter(recurrence, local + timedelta(seconds=1)).get_prev(datetime)
    return fired


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)

"""A node group as its provider reports it, and which of the cluster's nodes are its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nodescaler.domain.cluster.snapshot import Node

# The label EKS puts on every node of a managed node group.
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
MAX_GROUP_NAME = 255  # characters of an Auto Scaling group's name: Auto Scaling's limit


@dataclass(frozen=True)
class WarmPool:
    """An Auto Scaling group's warm pool as configured: Auto Scaling keeps
    max(maxPrepared − desired, minSize) instances warm (maxPrepared unset: the group's
    MaxSize), so only equal values give the pool a fixed size."""

    min_size: int
    max_prepared: int | None  # MaxGroupPreparedCapacity; None when unset
    pool_state: str  # Stopped, Running or Hibernated
    reuse_on_scale_in: bool | None = None  # its InstanceReusePolicy, None when unset
    problem: str = ""  # why its configuration can't be read as one: nodescaler leaves it be

    def holds(self, size: int) -> bool:
        """Whether the pool is set to exactly `size` instances."""
        return self.min_size == size and self.max_prepared == size


@dataclass(frozen=True)
class NodeGroup:
    """A node group as its provider reports it."""

    name: str  # the Auto Scaling Group name: nodescaler's id for the group
    desired: int
    min_size: int
    max_size: int
    in_service: int
    tags: Mapping[str, str] = field(default_factory=dict)
    eks_cluster: str | None = None  # set for EKS managed node groups
    eks_nodegroup: str | None = None
    instance_ids: frozenset[str] = frozenset()  # its instances, to find their nodes
    launched: int | None = None  # instances launching or running (not terminating); None: unknown
    protected_ids: frozenset[str] = frozenset()  # instances protected from scale-in
    # What it launches, for a template of its nodes when it has none: an instance type if
    # the group says (instances, mixed-instances overrides), else where to look it up.
    instance_type: str | None = None
    launch_template: tuple[str, str] | None = None  # (id, version)
    launch_configuration: str | None = None
    warm_pool: WarmPool | None = None  # pre-initialised instances scale-outs take first
    zones: tuple[str, ...] = ()  # its Availability Zones by name (us-east-1a); () unknown
    # Where min_size and max_size come from when not the ASG's own: an EKS managed node
    # group's scalingConfig (EKS refuses a desiredSize outside it), named for explain
    bounds_from: str = ""
    bounds_doubt: str = ""  # why its bounds could not be read: no scale-in on that doubt

    @property
    def is_eks_managed(self) -> bool:
        return self.eks_cluster is not None and self.eks_nodegroup is not None


@dataclass(frozen=True)
class LaunchFailure:
    activity_id: str  # the same id the launch-failure event carries: one failure, counted once
    at: datetime
    reason: str


# A scaling activity whose launch failed, as DescribeScalingActivities reports it:
# https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_DescribeScalingActivities.html
FAILED_STATUSES = ("Failed", "Cancelled")
# A failure's event comes within minutes (Lambda's two retries add a few): one about a
# launch older than this replays a failure the group has long moved past (Auto Scaling
# keeps six weeks of activities, the group's state only its last events).
FAILURE_EVENT_MAX_AGE = timedelta(hours=1)


@dataclass(frozen=True)
class ScalingActivity:
    """One of a group's scaling activities, as much as confirms a launch failure."""

    activity_id: str
    status: str  # StatusCode: Successful, Failed, Cancelled, InProgress, ...
    launch: bool  # it launched instances ("Launching a new EC2 instance...")
    started: datetime | None = None  # StartTime


def unconfirmed_launch_failure(
    group: str, activity_id: str, activity: ScalingActivity | None, now: datetime | None = None
) -> str | None:
    """Why the group's own scaling activities do not bear a launch-failure event out (a
    forged, mistaken or replayed event), or None: the activity it names is a launch that
    failed, within `FAILURE_EVENT_MAX_AGE` of `now` (the function's clock, not the event's)."""
    event = f"launch failure {activity_id} of node group {group}"
    if activity is None:
        return f"{event}: the group has no such scaling activity"
    if not activity.launch:
        return f"{event}: the activity launched no instances"
    if activity.status not in FAILED_STATUSES:
        return f"{event}: the launch is {activity.status}, not failed"
    started = activity.started
    if now is not None and started is not None and now - started > FAILURE_EVENT_MAX_AGE:
        return (
            f"{event}: the launch failed at {started:%Y-%m-%d %H:%MZ}, over "
            f"{FAILURE_EVENT_MAX_AGE.total_seconds() / 60:g} minutes ago: a stale or replayed event"
        )
    return None


def belongs(node: Node, group: NodeGroup) -> bool:
    """By the EKS node group label, else by the node's instance being one of the ASG's."""
    label = node.labels.get(EKS_NODEGROUP_LABEL)
    if label is not None and group.eks_nodegroup is not None:
        return label == group.eks_nodegroup
    return node.instance_id in group.instance_ids

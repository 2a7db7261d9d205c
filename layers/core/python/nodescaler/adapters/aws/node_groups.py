"""Node groups on AWS: discovered from Auto Scaling tags, resized through ASG or EKS."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from random import Random
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.domain.groups.node_group import LaunchFailure, NodeGroup, ScalingActivity, WarmPool
from nodescaler.domain.groups.optin import TagNames, is_managed
from nodescaler.domain.outside_text import outside
from nodescaler.errors import RefusedError
from nodescaler.ports import Clock

if TYPE_CHECKING:  # its cache comes with a clock: the evaluate function's, not dispatch's
    from nodescaler.adapters.aws.instance_types import TtlCache
    from nodescaler.deadline import Deadline

# EKS puts these on the Auto Scaling Group of every managed node group.
EKS_CLUSTER_TAG = "eks:cluster-name"
EKS_NODEGROUP_TAG = "eks:nodegroup-name"
PAGE_SIZE = 100  # the most DescribeAutoScalingGroups returns per call
PROTECTION_BATCH = 50  # the most instances SetInstanceProtection takes per call
BOUNDS_JITTER = timedelta(seconds=5)
GONE = ("Terminat", "Detach", "Warmed")  # lifecycle states of instances on their way out
POOL_STATES = ("Stopped", "Running", "Hibernated")  # a warm pool's PoolState


def _launch_template(asg: Mapping[str, Any]) -> Mapping[str, Any] | None:
    mixed = (asg.get("MixedInstancesPolicy") or {}).get("LaunchTemplate") or {}
    found: Mapping[str, Any] | None = asg.get("LaunchTemplate") or mixed.get(
        "LaunchTemplateSpecification"
    )
    return found


def _instance_type(asg: Mapping[str, Any]) -> str | None:
    for instance in asg.get("Instances", []):
        if instance.get("InstanceType"):
            return str(instance["InstanceType"])
    mixed = (asg.get("MixedInstancesPolicy") or {}).get("LaunchTemplate") or {}
    for override in mixed.get("Overrides") or []:
        if override.get("InstanceType"):
            return str(override["InstanceType"])
    return None


def _warm_pool(asg: Mapping[str, Any]) -> WarmPool | None:
    configured = asg.get("WarmPoolConfiguration")
    if not configured:
        return None
    minimum, prepared = configured.get("MinSize") or 0, configured.get("MaxGroupPreparedCapacity")
    state, reuse = configured.get("PoolState") or "Stopped", configured.get("InstanceReusePolicy")
    reuse_on_scale_in = reuse.get("ReuseOnScaleIn") if isinstance(reuse, Mapping) else None
    if problem := _warm_pool_problem(minimum, prepared, state, reuse_on_scale_in):
        return WarmPool(0, None, "Stopped", problem=problem)  # sent nowhere: left be
    return WarmPool(
        min_size=minimum,
        max_prepared=None if prepared is None or prepared < 0 else prepared,
        pool_state=state,
        reuse_on_scale_in=reuse_on_scale_in,
    )


def _warm_pool_problem(minimum: Any, prepared: Any, state: Any, reuse: Any) -> str:
    """Why a warm pool's configuration is not one Auto Scaling would answer (its sizes
    whole numbers, its state one of three, its reuse a yes or no), or ""; PutWarmPool and
    warmPoolConfig send the state and reuse back, so nothing odd is echoed to them."""
    for name, value in (("MinSize", minimum), ("MaxGroupPreparedCapacity", prepared)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return f"its warm pool's {name} is {outside(repr(value))}, not a whole number"
    if minimum < 0:
        return f"its warm pool's MinSize {minimum} is negative"
    if state not in POOL_STATES:
        return f"its warm pool's PoolState {outside(repr(state))} is not one of {POOL_STATES}"
    if reuse is not None and not isinstance(reuse, bool):
        return f"its warm pool's ReuseOnScaleIn is {outside(repr(reuse))}, not true or false"
    return ""


def _is_launch(activity: Mapping[str, Any]) -> bool:
    return str(activity.get("Description", "")).startswith("Launching")


def _to_node_group(asg: Mapping[str, Any]) -> NodeGroup:
    tags = {t["Key"]: t.get("Value", "") for t in asg.get("Tags", [])}
    instances = asg.get("Instances", [])
    in_service = sum(1 for i in instances if i.get("LifecycleState") == "InService")
    return NodeGroup(
        name=asg["AutoScalingGroupName"],
        desired=asg["DesiredCapacity"],
        min_size=asg["MinSize"],
        max_size=asg["MaxSize"],
        in_service=in_service,
        tags=tags,
        eks_cluster=tags.get(EKS_CLUSTER_TAG),
        eks_nodegroup=tags.get(EKS_NODEGROUP_TAG),
        instance_ids=frozenset(i["InstanceId"] for i in instances),
        launched=sum(1 for i in instances if not i.get("LifecycleState", "").startswith(GONE)),
        protected_ids=frozenset(
            i["InstanceId"] for i in instances if i.get("ProtectedFromScaleIn")
        ),
        instance_type=_instance_type(asg),
        launch_template=(
            (
                template.get("LaunchTemplateId") or template.get("LaunchTemplateName", ""),
                str(template.get("Version") or "$Default"),
            )
            if (template := _launch_template(asg))
            else None
        ),
        launch_configuration=asg.get("LaunchConfigurationName"),
        warm_pool=_warm_pool(asg),
        zones=tuple(asg.get("AvailabilityZones") or ()),
    )


@dataclass(frozen=True)
class EksBounds:
    """A managed node group's scalingConfig bounds as read, or why they could not be."""

    low: int | None = None
    high: int | None = None
    source: str = ""
    doubt: str = ""


def _nodegroup(group: NodeGroup) -> tuple[str, str]:
    return group.eks_cluster or "", group.eks_nodegroup or ""


def _bounded(group: NodeGroup, bounds: EksBounds) -> NodeGroup:
    if bounds.low is None or bounds.high is None:
        return replace(group, bounds_doubt=bounds.doubt)
    return replace(group, min_size=bounds.low, max_size=bounds.high, bounds_from=bounds.source)


def _scaling_range(scaling: Any, group: NodeGroup) -> tuple[int, int]:
    """[minSize, maxSize] of a scalingConfig, within its Auto Scaling group's own bounds
    (which refuse a size outside them, whatever EKS allows); ValueError naming what is not
    a range of sizes: a value that is no whole number, a negative one, min above max."""
    if not isinstance(scaling, Mapping):
        raise ValueError(f"scalingConfig is {outside(repr(scaling))}, not a map")
    sizes = []
    for key in ("minSize", "maxSize"):
        value = scaling.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"scalingConfig {key} is {outside(repr(value))}, not a whole number")
        if value < 0:
            raise ValueError(f"scalingConfig {key} {value} is negative")
        sizes.append(value)
    low, high = sizes
    if low > high:
        raise ValueError(f"scalingConfig minSize {low} is above its maxSize {high}")
    if max(low, group.min_size) > min(high, group.max_size):
        raise ValueError(
            f"scalingConfig [{low}, {high}] and its Auto Scaling group's "
            f"[{group.min_size}, {group.max_size}] share no size"
        )
    return max(low, group.min_size), min(high, group.max_size)


class AsgNodeGroups:
    """`NodeGroups` over EC2 Auto Scaling, and EKS for managed node groups."""

    def __init__(
        self,
        autoscaling: Any,
        eks: Any,
        *,
        tag_names: TagNames,
        cluster_name: str = "",
        clock: Clock | None = None,
        scaling_config: bool = True,
        invocation: Deadline | None = None,
    ) -> None:
        self._autoscaling = autoscaling
        self._eks = eks
        self._tags = tag_names
        self._cluster = cluster_name
        # False: a managed group's bounds are its ASG's (a role without DescribeNodegroup)
        self._scaling_config = scaling_config
        # managed groups' bounds for discover, kept a minute as their labels are
        self._bounds: TtlCache[tuple[str, str], EksBounds] | None = None
        if clock is not None and scaling_config:
            from nodescaler.adapters.aws.instance_types import NODEGROUP_TTL, TtlCache

            self._bounds = TtlCache(clock, NODEGROUP_TTL, BOUNDS_JITTER, Random())
        self._owners: set[tuple[str, str, str]] = set()  # (cluster, node group, ASG) confirmed
        # Given the invocation's deadline, the opted-in groups read once an invocation until
        # it writes (`_opted_in`): a batch's discover and gets, one DescribeAutoScalingGroups
        self._invocation = invocation
        self._listed: tuple[int, list[Mapping[str, Any]]] | None = None

    def _pages(self, **request: Any) -> Iterator[Mapping[str, Any]]:
        paginator = self._autoscaling.get_paginator("describe_auto_scaling_groups")
        for page in paginator.paginate(**request, PaginationConfig={"PageSize": PAGE_SIZE}):
            yield from page["AutoScalingGroups"]

    def _filters(self) -> list[dict[str, Any]]:
        # The API filters on tag values case-sensitively; is_managed re-checks below, so a
        # group the filter lets through by mistake is still never written to.
        filters = [{"Name": f"tag:{self._tags.enabled}", "Values": ["true", "True", "TRUE"]}]
        if self._cluster:
            filters.append({"Name": f"tag:{self._tags.cluster}", "Values": [self._cluster]})
        return filters

    def _opted_in(self) -> list[Mapping[str, Any]]:
        """The opted-in groups' descriptions: as read earlier in this invocation, unless
        it wrote to a group since; else read now (and kept within the invocation, never
        into the next: `Deadline.invocation` counts them)."""
        invocation = self._invocation.invocation if self._invocation is not None else 0
        if self._listed is not None and self._listed[0] == invocation:
            return self._listed[1]
        listed = list(self._pages(Filters=self._filters()))
        self._listed = (invocation, listed) if invocation else None
        return listed

    def discover(self) -> Sequence[NodeGroup]:
        """The opted-in groups; a managed one bounded by its scalingConfig as read within
        the last minute (given a clock), so the expanders size it as EKS allows."""
        groups = (_to_node_group(asg) for asg in self._opted_in())
        managed = [g for g in groups if is_managed(g.tags, self._tags, self._cluster)]
        if self._bounds is None:
            return managed
        return [_bounded(g, self._kept_bounds(g)) if g.is_eks_managed else g for g in managed]

    def _kept_bounds(self, group: NodeGroup) -> EksBounds:
        assert self._bounds is not None
        # a failed read is not kept: the next discover asks EKS again
        return self._bounds.get(
            _nodegroup(group), lambda: self._eks_bounds(group), keep=lambda b: not b.doubt
        )

    def get(self, name: str) -> NodeGroup | None:
        """The group as it is now (within an invocation: as read in it since its last
        write, or by its name if not opted in); a managed one bounded by its scalingConfig,
        read afresh: what an evaluation decides and acts within."""
        invoked = self._invocation is not None and self._invocation.invocation
        listed = self._opted_in() if invoked else []
        found = [_to_node_group(a) for a in listed if a["AutoScalingGroupName"] == name]
        if not found:
            found = [_to_node_group(asg) for asg in self._pages(AutoScalingGroupNames=[name])]
        if not found:
            return None
        group = found[0]
        if not (group.is_eks_managed and self._scaling_config):
            return group
        return _bounded(group, self._eks_bounds(group))

    def _eks_bounds(self, group: NodeGroup) -> EksBounds:
        """A managed node group's bounds: its scalingConfig, as EKS refuses a desiredSize
        outside it and keeps its ASG's MinSize and MaxSize in line with it (Cluster
        Autoscaler reads the ASG's alone). Unread, or not a range of sizes: the ASG's, and
        that doubt named."""
        what = f"EKS node group {group.eks_nodegroup} of cluster {group.eks_cluster}"
        try:
            described = self._eks.describe_nodegroup(
                clusterName=group.eks_cluster, nodegroupName=group.eks_nodegroup
            )
            scaling = described["nodegroup"]["scalingConfig"]
        except (BotoCoreError, ClientError) as error:
            return EksBounds(doubt=f"{what} could not be described ({outside(error)})")
        except (KeyError, TypeError) as error:
            return EksBounds(doubt=f"{what}: no scalingConfig {outside(error)} in its answer")
        try:
            low, high = _scaling_range(scaling, group)
        except ValueError as error:
            return EksBounds(doubt=f"{what}: {error}")
        return EksBounds(low, high, f"{what}'s scalingConfig")

    def _check_managed(self, group: NodeGroup, what: str) -> None:
        self._listed = None  # before any write: what was read before it is read again
        if not is_managed(group.tags, self._tags, self._cluster):
            raise RefusedError(f"node group {group.name} is not opted in; refusing to {what}")

    def _check_owns(self, group: NodeGroup) -> None:
        """An EKS node group is resized only if it is the one behind the opted-in ASG, in
        this cluster: the ASG's `eks:nodegroup-name` tag alone could name any node group."""
        cluster, nodegroup = group.eks_cluster or "", group.eks_nodegroup or ""
        if self._cluster and cluster != self._cluster:
            raise RefusedError(
                f"node group {group.name}: tagged as EKS node group {nodegroup} of cluster "
                f"{cluster}, not of {self._cluster}; refusing to resize it"
            )
        if (cluster, nodegroup, group.name) in self._owners:
            return
        described = self._eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)
        resources = described["nodegroup"].get("resources") or {}
        asgs = {a.get("name") for a in resources.get("autoScalingGroups") or []}
        if group.name not in asgs:
            raise RefusedError(
                f"node group {group.name}: tagged as EKS node group {nodegroup} of cluster "
                f"{cluster}, whose Auto Scaling groups are {', '.join(sorted(asgs)) or 'none'}; "
                "refusing to resize a node group this ASG is not part of"
            )
        self._owners.add((cluster, nodegroup, group.name))  # an ASG keeps its node group

    def set_desired(self, group: NodeGroup, desired: int) -> None:
        self._check_managed(group, "resize")
        if group.is_eks_managed:
            self._check_owns(group)
            self._eks.update_nodegroup_config(
                clusterName=group.eks_cluster,
                nodegroupName=group.eks_nodegroup,
                scalingConfig={"desiredSize": desired},
            )
        else:
            self._autoscaling.set_desired_capacity(
                AutoScalingGroupName=group.name, DesiredCapacity=desired, HonorCooldown=False
            )

    def size_warm_pool(self, group: NodeGroup, size: int) -> None:
        """Keep exactly `size` instances warm (MinSize = MaxGroupPreparedCapacity), the
        rest of the pool as its operator set it: PutWarmPool replaces the whole
        configuration, so its state and reuse policy are sent back as they were. An EKS
        managed node group's pool is EKS's to configure (UpdateNodegroupConfig's
        warmPoolConfig): a PutWarmPool on its Auto Scaling group is a change EKS does not
        expect and may undo."""
        self._check_managed(group, "size its warm pool")
        pool = group.warm_pool
        state = pool.pool_state if pool else "Stopped"
        reuse = pool.reuse_on_scale_in if pool else None
        if group.is_eks_managed:
            self._check_owns(group)
            config: dict[str, Any] = {"enabled": True, "minSize": size, "poolState": state}
            config["maxGroupPreparedCapacity"] = size
            if reuse is not None:
                config["reuseOnScaleIn"] = reuse
            self._eks.update_nodegroup_config(
                clusterName=group.eks_cluster,
                nodegroupName=group.eks_nodegroup,
                warmPoolConfig=config,
            )
            return
        kept: dict[str, Any] = {"PoolState": state}
        if reuse is not None:
            kept["InstanceReusePolicy"] = {"ReuseOnScaleIn": reuse}
        self._autoscaling.put_warm_pool(
            AutoScalingGroupName=group.name, MinSize=size, MaxGroupPreparedCapacity=size, **kept
        )

    def remove_instances(self, group: NodeGroup, instance_ids: Sequence[str]) -> None:
        """Each instance terminated with the desired capacity lowered by one, as Cluster
        Autoscaler scales in an EKS managed node group (it takes no termination policy)."""
        self._check_managed(group, "scale in")
        if group.is_eks_managed:
            self._check_owns(group)
        for instance_id in instance_ids:
            self._autoscaling.terminate_instance_in_auto_scaling_group(
                InstanceId=instance_id, ShouldDecrementDesiredCapacity=True
            )

    def failed_launches(self, group: NodeGroup, since: datetime) -> Sequence[LaunchFailure]:
        paginator = self._autoscaling.get_paginator("describe_scaling_activities")
        failures: list[LaunchFailure] = []
        for page in paginator.paginate(AutoScalingGroupName=group.name):
            activities = page["Activities"]  # newest first
            for activity in activities:
                if activity["StartTime"] < since:
                    return failures
                if _is_launch(activity) and activity.get("StatusCode") == "Failed":
                    failures.append(
                        LaunchFailure(
                            activity_id=activity["ActivityId"],
                            at=activity["StartTime"],
                            reason=activity.get("StatusMessage") or activity.get("Cause", ""),
                        )
                    )
        return failures

    def scaling_activity(self, group: NodeGroup, activity_id: str) -> ScalingActivity | None:
        found = self._autoscaling.describe_scaling_activities(
            AutoScalingGroupName=group.name, ActivityIds=[activity_id]
        )
        for activity in found.get("Activities", []):  # unknown ids are left out, no error
            if activity.get("ActivityId") == activity_id:
                return ScalingActivity(
                    activity_id=activity_id,
                    status=str(activity.get("StatusCode", "")),
                    launch=_is_launch(activity),
                    started=activity.get("StartTime"),
                )
        return None

    def protect(self, group: NodeGroup, instance_ids: frozenset[str], protected: bool) -> None:
        self._check_managed(group, "change instance protection")
        ordered = sorted(instance_ids)
        for start in range(0, len(ordered), PROTECTION_BATCH):
            self._autoscaling.set_instance_protection(
                AutoScalingGroupName=group.name,
                InstanceIds=ordered[start : start + PROTECTION_BATCH],
                ProtectedFromScaleIn=protected,
            )

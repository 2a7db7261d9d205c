"""What a node group launches, and the shape of that instance type, from EC2.

Only groups at zero need this (the others have a live node to copy), and the answers
rarely change, so both lookups are cached in the warm container for about 20 minutes
(Airbnb's launch-template cache): 200 empty groups sharing 5 launch templates cost 5
lookups and one DescribeInstanceTypes per type, per TTL. Each entry's TTL has its own
jitter, so a fleet of containers does not refresh in step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from random import Random
from typing import Any, Generic, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.domain.cluster.instance_templates import (
    EKS_TAINT_EFFECTS,
    InstanceShape,
    NodegroupLabels,
)
from nodescaler.domain.cluster.snapshot import Taint
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.errors import InstanceTypeUnknownError
from nodescaler.ports import Clock

ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}  # EC2's names → Kubernetes'
NODEGROUP_TTL = timedelta(minutes=1)


K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """Entries that expire `ttl` ± `jitter` after they were stored."""

    def __init__(self, clock: Clock, ttl: timedelta, jitter: timedelta, rng: Random) -> None:
        self._clock = clock
        self._ttl = ttl
        self._jitter = jitter.total_seconds()
        self._rng = rng
        self._entries: dict[K, tuple[datetime, V]] = {}

    def get(self, key: K, load: Callable[[], V], keep: Callable[[V], bool] = lambda _: True) -> V:
        """The entry, loaded when missing or expired; a loaded value `keep` refuses (a
        failed read) is returned but not stored: the next get loads it again."""
        now = self._clock.now()
        entry = self._entries.get(key)
        if entry is None or now >= entry[0]:
            value = load()
            if not keep(value):
                self._entries.pop(key, None)
                return value
            jitter = timedelta(seconds=self._rng.uniform(-self._jitter, self._jitter))
            entry = self._entries[key] = (now + self._ttl + jitter, value)
        return entry[1]


class Ec2InstanceTypes:
    """`InstanceTypes` over EC2 (and EKS, for a managed node group's instance types)."""

    def __init__(
        self,
        ec2: Any,
        autoscaling: Any,
        eks: Any,
        *,
        clock: Clock,
        ttl: timedelta = timedelta(minutes=20),
        jitter: timedelta = timedelta(minutes=2),
        rng: Random | None = None,
    ) -> None:
        self._ec2 = ec2
        self._autoscaling = autoscaling
        self._eks = eks
        rng = rng or Random()
        self._types: TtlCache[tuple[str, ...], str] = TtlCache(clock, ttl, jitter, rng)
        self._shapes: TtlCache[str, InstanceShape] = TtlCache(clock, ttl, jitter, rng)
        # A managed node group's labels and taints change with UpdateNodegroupConfig: kept
        # a minute, as Cluster Autoscaler's managed node group cache keeps them.
        self._nodegroups: TtlCache[tuple[str, str], NodegroupLabels | None] = TtlCache(
            clock, NODEGROUP_TTL, timedelta(seconds=5), rng
        )

    def instance_type(self, group: NodeGroup) -> str:
        if group.instance_type:
            return group.instance_type
        key: tuple[str, ...]
        if group.is_eks_managed:
            key = ("eks", group.eks_cluster or "", group.eks_nodegroup or "")
        elif group.launch_template:
            key = ("template", *group.launch_template)
        elif group.launch_configuration:
            key = ("configuration", group.launch_configuration)
        else:
            raise InstanceTypeUnknownError(f"node group {group.name}: no launch template")
        return self._types.get(key, lambda: self._look_up(group, key))

    def _look_up(self, group: NodeGroup, key: tuple[str, ...]) -> str:
        found: str | None = None
        if key[0] == "eks":
            nodegroup = self._eks.describe_nodegroup(clusterName=key[1], nodegroupName=key[2])
            found = next(iter(nodegroup["nodegroup"].get("instanceTypes") or []), None)
        elif key[0] == "template":
            template_id, version = key[1], key[2]
            reference = (
                {"LaunchTemplateId": template_id}
                if template_id.startswith("lt-")
                else {"LaunchTemplateName": template_id}
            )
            versions = self._ec2.describe_launch_template_versions(**reference, Versions=[version])[
                "LaunchTemplateVersions"
            ]
            found = versions[0]["LaunchTemplateData"].get("InstanceType") if versions else None
        else:
            configurations = self._autoscaling.describe_launch_configurations(
                LaunchConfigurationNames=[key[1]]
            )["LaunchConfigurations"]
            found = configurations[0].get("InstanceType") if configurations else None
        if not found:
            raise InstanceTypeUnknownError(
                f"node group {group.name}: its {key[0]} names no instance type"
            )
        return str(found)

    def shape(self, instance_type: str) -> InstanceShape:
        return self._shapes.get(instance_type, lambda: self._describe(instance_type))

    def nodegroup_labels(self, group: NodeGroup) -> NodegroupLabels | None:
        """What DescribeNodegroup says the group's nodes register with. A managed group's
        ASG often carries no node-template tags (50 tags at most), so Cluster Autoscaler
        reads them from EKS for a group at zero, and falls back to the tags alone when
        it can't (cluster-autoscaler/proposals/circumvent-tag-limit-eks.md)."""
        if not group.is_eks_managed:
            return None
        key = (group.eks_cluster or "", group.eks_nodegroup or "")
        return self._nodegroups.get(key, lambda: self._nodegroup_labels(*key))

    def _nodegroup_labels(self, cluster: str, nodegroup: str) -> NodegroupLabels | None:
        try:
            described = self._eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)
        except (BotoCoreError, ClientError):
            return None  # the tags alone, as Cluster Autoscaler without eks:DescribeNodegroup
        found = described["nodegroup"]
        taints = tuple(
            Taint(t["key"], t.get("value", ""), EKS_TAINT_EFFECTS.get(t.get("effect", ""), ""))
            for t in found.get("taints") or []
            if t.get("effect") in EKS_TAINT_EFFECTS
        )
        return NodegroupLabels(dict(found.get("labels") or {}), taints)

    def _describe(self, instance_type: str) -> InstanceShape:
        described = self._ec2.describe_instance_types(InstanceTypes=[instance_type])
        return shape_of(instance_type, described["InstanceTypes"][0])


def shape_of(instance_type: str, info: Mapping[str, Any]) -> InstanceShape:
    """An instance type's shape from its DescribeInstanceTypes entry."""
    architectures = info.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    return InstanceShape(
        instance_type=instance_type,
        vcpus=int(info["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(info["MemoryInfo"]["SizeInMiB"]),
        architecture=next((ARCHITECTURES[a] for a in architectures if a in ARCHITECTURES), "amd64"),
        nvidia_gpus=sum(
            int(gpu.get("Count", 0))
            for gpu in info.get("GpuInfo", {}).get("Gpus", [])
            if gpu.get("Manufacturer") == "NVIDIA"
        ),
    )

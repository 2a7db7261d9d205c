"""What a node group launches, and the shape of that instance type, from EC2.

Only groups at zero need this (the others have a live node to copy), and the answers
rarely change, so both lookups are cached for the warm container.
"""

from __future__ import annotations

from typing import Any

from nodescaler.domain.scheduling import InstanceShape
from nodescaler.ports import NodeGroup

ARCHITECTURES = {"x86_64": "amd64", "arm64": "arm64"}  # EC2's names → Kubernetes'


class InstanceTypeUnknownError(LookupError):
    """Nothing says which instance type the group launches; names the group."""


class Ec2InstanceTypes:
    def __init__(self, ec2: Any, autoscaling: Any, eks: Any) -> None:
        self._ec2 = ec2
        self._autoscaling = autoscaling
        self._eks = eks
        self._types: dict[tuple[str, ...], str] = {}
        self._shapes: dict[str, InstanceShape] = {}

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
        if key not in self._types:
            self._types[key] = self._look_up(group, key)
        return self._types[key]

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
        if instance_type not in self._shapes:
            described = self._ec2.describe_instance_types(InstanceTypes=[instance_type])
            info = described["InstanceTypes"][0]
            architectures = info.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
            self._shapes[instance_type] = InstanceShape(
                instance_type=instance_type,
                vcpus=int(info["VCpuInfo"]["DefaultVCpus"]),
                memory_mib=int(info["MemoryInfo"]["SizeInMiB"]),
                architecture=next(
                    (ARCHITECTURES[a] for a in architectures if a in ARCHITECTURES), "amd64"
                ),
                nvidia_gpus=sum(
                    int(gpu.get("Count", 0))
                    for gpu in info.get("GpuInfo", {}).get("Gpus", [])
                    if gpu.get("Manufacturer") == "NVIDIA"
                ),
            )
        return self._shapes[instance_type]

"""A new node of a group at zero, as EKS would register it: from its instance type (what
EC2 says of it), its EKS managed node group's labels and taints, and Cluster Autoscaler's
node-template tags, which win where they name the same key. A group with a live node takes
that node as its template instead (`predicates.live_template`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.quantity import millicores, whole_units
from nodescaler.domain.cluster.snapshot import Resources, Taint, is_extended
from nodescaler.errors import QuantityError


@dataclass(frozen=True, slots=True)
class InstanceShape:
    """What EC2 says of an instance type (DescribeInstanceTypes)."""

    instance_type: str
    vcpus: int
    memory_mib: int
    architecture: str = "amd64"  # as Kubernetes names it: amd64, arm64
    nvidia_gpus: int = 0


@dataclass(frozen=True, slots=True)
class NodegroupLabels:
    """What EKS says a managed node group's nodes register with (DescribeNodegroup):
    read for a group at zero, where its ASG often carries no node-template tags."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


# EKS's names of the taint effects → Kubernetes'.
EKS_TAINT_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}


# Cluster Autoscaler's tags describing the nodes of a group at zero.
TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template/"
DEFAULT_MAX_PODS = 110
EVICTION_THRESHOLD_MIB = 100


def reserved_cpu_millis(vcpus: int) -> int:
    """EKS's kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the next
    two, 0.25% of the rest."""
    shares = [60, 10, 5, 5] + [2.5] * max(vcpus - 4, 0)
    return round(sum(shares[:vcpus]))


def instance_labels(instance_type: str, architecture: str) -> dict[str, str]:
    """The well-known labels the kubelet and the cloud provider put on every EKS node."""
    return {
        "node.kubernetes.io/instance-type": instance_type,
        "kubernetes.io/arch": architecture,
        "kubernetes.io/os": "linux",
    }


def zone_labels(zones: Sequence[str]) -> dict[str, str]:
    """The zone and region labels a new node of a group in one Availability Zone registers
    with (the kubelet's, and the EBS CSI driver's zone), as Cluster Autoscaler's AWS
    template gives them (`aws_manager.go`, `buildGenericLabels`), the region its parent
    region (`us-west-2` for the Local Zone `us-west-2-lax-1a`, where Cluster Autoscaler's
    takes the zone less its letter). A group of several zones gets none: Auto Scaling picks
    the zone, so a pod pinned to one is no reason to grow it (Cluster Autoscaler takes the
    group's first zone, and may launch where the pod cannot go)."""
    if len(zones) != 1:
        return {}
    (zone,) = zones
    parent = _REGION.match(zone)
    return {
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": parent.group(0) if parent else zone[:-1],
        "topology.ebs.csi.aws.com/zone": zone,
    }


_REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d+")  # eu-west-1, us-gov-west-1


def template_from_instance_type(
    group: str,
    shape: InstanceShape,
    tags: Mapping[str, str],
    extra_labels: Mapping[str, str],
    managed: NodegroupLabels | None = None,
) -> NodeTemplate:
    """A node of a group at zero, as EKS would register it (with its managed node group's
    labels and taints), overridden by the CA tags: where a tag and EKS name the same label
    or taint key, the tag wins, as in Cluster Autoscaler."""
    managed = managed or NodegroupLabels()
    labels = (
        instance_labels(shape.instance_type, shape.architecture)
        | dict(extra_labels)
        | dict(managed.labels)
    )
    taints: list[Taint] = []
    amounts: dict[str, int] = {}  # resources/<name> tags: millicores for cpu, else units
    for key, value in tags.items():
        if not key.startswith(TEMPLATE_TAG):
            continue
        kind, _, name = key.removeprefix(TEMPLATE_TAG).partition("/")
        if kind == "label":
            labels[name] = value
        elif kind == "taint":
            # "value:Effect", as Cluster Autoscaler reads it; a bare "value" is NoSchedule
            taint_value, colon, effect = value.rpartition(":")
            if not colon:
                taint_value, effect = value, ""
            taints.append(Taint(name, taint_value, effect or "NoSchedule"))
        elif kind == "resources":
            try:
                amounts[name] = millicores(value) if name == "cpu" else whole_units(value)
            except QuantityError as error:
                raise QuantityError(f"tag {key}: {error}") from None
    pods = amounts.pop("pods", DEFAULT_MAX_PODS)
    memory_mib = shape.memory_mib - (255 + 11 * pods) - EVICTION_THRESHOLD_MIB
    allocatable = Resources(
        amounts.pop("cpu", shape.vcpus * 1000 - reserved_cpu_millis(shape.vcpus)),
        amounts.pop("memory", max(memory_mib, 0) * 2**20),
        pods,
    )
    extended = {"nvidia.com/gpu": shape.nvidia_gpus} if shape.nvidia_gpus else {}
    extended |= {name: amount for name, amount in amounts.items() if is_extended(name)}
    tagged = {t.key for t in taints}
    taints = [t for t in managed.taints if t.key not in tagged] + taints
    source = f"instance type {shape.instance_type} and its tags"
    if managed.labels or managed.taints:
        source = f"instance type {shape.instance_type}, its EKS node group and its tags"
    return NodeTemplate(group, allocatable, labels, tuple(taints), source, extended)

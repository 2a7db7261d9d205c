"""Would a pending pod fit a new node of this group? The scheduler's predicates, and packing.

A node template stands for a node the group would launch: from a live node of the group,
or, for a group at zero, from its instance type and Cluster Autoscaler's node-template
tags. Each predicate says why a pod does not fit, so a decision can explain itself.
First-fit-decreasing packing then estimates how many new nodes the fitting pods need.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from nodescaler.domain.cluster.quantity import millicores, whole_units
from nodescaler.domain.cluster.snapshot import Node, Placement, Pod, Resources, Taint, is_extended
from nodescaler.domain.cluster.state_taints import keeps_pods_off, of_state
from nodescaler.domain.groups.node_group import NodeGroup, belongs
from nodescaler.errors import QuantityError

NOTHING = Resources()
HOSTNAME_LABEL = "kubernetes.io/hostname"  # a template stands for a node not yet named
ENFORCED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True, slots=True)
class NodeTemplate:
    group: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    source: str = ""  # "node ip-10-0-1-5" or "instance type m5.large + tags", for explain
    extended: Mapping[str, int] = field(default_factory=dict)  # nvidia.com/gpu: 1
    # What DaemonSets take of each node, already off `allocatable` (a live node's template):
    # the node registers both, which is how similar groups are compared.
    daemon_sets: Resources = NOTHING
    # the `Placement.apart` keys of the pods on it (a node's room): a pod holding one stays off
    holding: frozenset[str] = frozenset()

    @classmethod
    def from_node(cls, group: str, node: Node, daemon_sets: Resources = NOTHING) -> NodeTemplate:
        """A new node like this one, less what the DaemonSets will take on it and the taints
        of its state (`state_taints`)."""
        labels = {k: v for k, v in node.labels.items() if k != HOSTNAME_LABEL}
        free = node.allocatable - daemon_sets
        taints = tuple(t for t in node.taints if not of_state(t))
        return cls(group, free, labels, taints, f"node {node.name}", node.extended, daemon_sets)


def live_template(
    group: NodeGroup, nodes: Iterable[Node], pods_by_node: Mapping[str, Sequence[Pod]]
) -> NodeTemplate | None:
    """A new node like the group's first ready, schedulable node (by name) of those with
    the fewest taints that keep pods off, less what its DaemonSet pods take (those of
    `pods_by_node`); None when the group has no such node. A taint some of its nodes carry
    and others do not is a node's (an agent of its own still starting), not the group's."""
    live = sorted(
        (n for n in nodes if n.usable and n.schedulable and belongs(n, group)),
        key=lambda n: (sum(keeps_pods_off(t) for t in n.taints), n.name),
    )
    if not live:
        return None
    node = live[0]
    daemon_sets, holding = Resources(), frozenset[str]()
    for pod in pods_by_node.get(node.name, ()):
        if pod.daemon_set and not pod.terminal:
            daemon_sets = daemon_sets + pod.requests
            holding |= pod.placement.apart if pod.placement else frozenset()
    # a new node runs them too: their host ports are taken there as well
    template = NodeTemplate.from_node(group.name, node, daemon_sets)
    return replace(template, holding=holding) if holding else template


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


def why_not(pod: Pod, template: NodeTemplate) -> str | None:
    """None if the pod fits an empty node of the template, else the first reason it does not."""
    placement = pod.placement or Placement()
    need, have = pod.requests, template.allocatable
    for name, wanted, available in (
        ("cpu", need.cpu_millis, have.cpu_millis),
        ("memory", need.memory_bytes, have.memory_bytes),
        ("pods", need.pods, have.pods),
    ):
        if wanted > available:
            return f"needs more {name} than a node of the group has"
    for name, wanted in placement.extended_resources.items():
        if wanted > template.extended.get(name, 0):
            return f"needs more {name} than a node of the group has"
    for key, value in placement.node_selector.items():
        if template.labels.get(key) != value:
            return f"nodeSelector {key}={value} does not match"
    if placement.required_terms and not any(
        all(r.matches(template.labels) for r in term) for term in placement.required_terms
    ):
        return "required node affinity does not match"
    if (taint := _untolerated(placement, template)) is not None:
        return f"does not tolerate taint {taint.key}={taint.value}:{taint.effect}"
    if shared := placement.apart & template.holding:
        return f"may not share a node with the pods there ({min(shared)})"
    return None


def _untolerated(placement: Placement, template: NodeTemplate) -> Taint | None:
    """The first of the template's taints that keeps pods off and the pod does not tolerate."""
    return next(
        (
            taint
            for taint in template.taints
            if taint.effect in ENFORCED_EFFECTS
            and not any(t.tolerates(taint) for t in placement.tolerations)
        ),
        None,
    )


def _size(pod: Pod) -> tuple[int, int]:
    return pod.requests.cpu_millis, pod.requests.memory_bytes


def nodes_needed(pods: Sequence[Pod], template: NodeTemplate) -> int:
    """First-fit decreasing: new nodes of the template that hold all `pods` (which fit one)."""
    return pack(pods, template)[0]


def pack(
    pods: Sequence[Pod], template: NodeTemplate, max_nodes: int | None = None
) -> tuple[int, tuple[Pod, ...]]:
    """First-fit decreasing onto new nodes of the template, at most `max_nodes` of them:
    the nodes used, and the pods they hold (a pod that would need one more is left out)."""
    # what is left on each new node, and the `apart` keys its pods hold
    free: list[tuple[Resources, dict[str, int], frozenset[str]]] = []
    placed: list[Pod] = []
    for pod in sorted(pods, key=_size, reverse=True):
        extended = pod.placement.extended_resources if pod.placement else {}
        apart = pod.placement.apart if pod.placement else frozenset()
        for index, (room, spare, held) in enumerate(free):
            if (
                room.covers(pod.requests)
                and all(amount <= spare.get(name, 0) for name, amount in extended.items())
                and not (apart and apart & held)
            ):
                free[index] = (room - pod.requests, _minus(spare, extended), held | apart)
                placed.append(pod)
                break
        else:
            if max_nodes is not None and len(free) >= max_nodes:
                continue
            room, spare = template.allocatable - pod.requests, _minus(template.extended, extended)
            free.append((room, spare, apart))
            placed.append(pod)
    return len(free), tuple(placed)


def nodes_for(pods: Sequence[Pod], template: NodeTemplate) -> int:
    """How many nodes of the template the pods need, estimated in one pass: the larger of
    what their summed requests fill and what the most demanding shape needs on its own (a
    deployment's replicas share a shape, so one shape's count is exact where the sum would
    miss the room each node leaves over)."""
    return nodes_and_share(pods, template)[0]


def nodes_and_share(pods: Sequence[Pod], template: NodeTemplate) -> tuple[int, float]:
    """`nodes_for`, and the share it rounds up: 7.5 where 60 two-core pods fill 16-core
    nodes. A forecast scales the share, not the whole nodes: a busier day's 7 % on 8
    rounded-up nodes would ask for a ninth the pods never fill."""
    if not pods:
        return 0, 0.0
    have = template.allocatable
    total = Resources()
    shapes: Counter[tuple[int, int, int]] = Counter()
    apart: Counter[str] = Counter()  # pods that may share no node: one node each
    for pod in pods:
        total = total + pod.requests
        shapes[(pod.requests.cpu_millis, pod.requests.memory_bytes, pod.requests.pods)] += 1
        if pod.placement is not None and pod.placement.apart:
            apart.update(pod.placement.apart)
    pairs = (
        (total.cpu_millis, have.cpu_millis),
        (total.memory_bytes, have.memory_bytes),
        (total.pods, have.pods),
    )
    summed = max(_share(amount, per_node) for amount, per_node in pairs)
    fraction = max(amount / per_node if per_node > 0 else 0.0 for amount, per_node in pairs)
    alone, alone_fraction = 0, 0.0
    for (cpu, memory, slots), count in shapes.items():
        per_node = min(
            have.cpu_millis // cpu if cpu else count,
            have.memory_bytes // memory if memory else count,
            have.pods // slots if slots else count,
        )
        alone = max(alone, -(-count // max(per_node, 1)))
        alone_fraction = max(alone_fraction, count / max(per_node, 1))
    if apart:
        most = max(apart.values())
        alone, alone_fraction = max(alone, most), max(alone_fraction, float(most))
    return max(summed, alone), max(fraction, alone_fraction)


def _share(amount: int, per_node: int) -> int:
    return -(-amount // per_node) if per_node > 0 else 0


def _minus(spare: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    return {name: amount - used.get(name, 0) for name, amount in spare.items()}


def pending(pods: Iterable[Pod], expendable_priority_cutoff: int) -> list[Pod]:
    """Unschedulable pods worth a node: below the cutoff they may wait (Cluster Autoscaler);
    one whose requests can't be read can't be sized, so it is left to its owner; and a
    DaemonSet's pod waits for the one node it is made for, which no new node helps (as
    Cluster Autoscaler filters them out)."""
    return [
        p
        for p in pods
        if p.unschedulable
        and p.priority >= expendable_priority_cutoff
        and p.problem is None
        and not p.daemon_set
    ]


def room_of(node: Node, pods: Sequence[Pod]) -> NodeTemplate:
    """What is left on a node: its allocatable less what its pods request, and the keys
    its pods hold (`Placement.apart`)."""
    used = Resources()
    extended = dict(node.extended)
    holding: frozenset[str] = frozenset()
    for pod in pods:
        if pod.terminal:
            continue
        used = used + pod.requests
        if pod.placement is None:
            continue
        for name, amount in pod.placement.extended_resources.items():
            extended[name] = extended.get(name, 0) - amount
        holding |= pod.placement.apart
    free = node.allocatable - used
    source = f"node {node.name}"
    return NodeTemplate(
        node.group or "", free, node.labels, node.taints, source, extended, holding=holding
    )


def place(
    pods: Sequence[Pod], rooms: dict[str, NodeTemplate]
) -> tuple[dict[str, NodeTemplate], list[Pod]]:
    """The rooms after moving the pods, first fit, most room first; and the pods that fit
    nowhere."""
    changed, stranded, _ = place_each(pods, rooms)
    return changed, stranded


def place_each(
    pods: Sequence[Pod], rooms: dict[str, NodeTemplate]
) -> tuple[dict[str, NodeTemplate], list[Pod], dict[str, list[Pod]]]:
    """`place`, and the pods each room took."""
    changed: dict[str, NodeTemplate] = {}
    stranded: list[Pod] = []
    took: dict[str, list[Pod]] = {}
    order = sorted(rooms, key=lambda k: (-rooms[k].allocatable.cpu_millis, k))
    for pod in sorted(pods, key=lambda p: (-p.requests.cpu_millis, -p.requests.memory_bytes)):
        target = next((k for k in order if why_not(pod, changed.get(k, rooms[k])) is None), None)
        if target is None:
            stranded.append(pod)
            continue
        room = changed.get(target, rooms[target])
        extended, holding = dict(room.extended), room.holding
        if pod.placement is not None:
            for name, amount in pod.placement.extended_resources.items():
                extended[name] = extended.get(name, 0) - amount
            holding |= pod.placement.apart
        changed[target] = replace(
            room, allocatable=room.allocatable - pod.requests, extended=extended, holding=holding
        )
        took.setdefault(target, []).append(pod)
    return changed, stranded, took

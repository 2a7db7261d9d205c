"""Balanced similar groups (Cluster Autoscaler's --balance-similar-node-groups): which node
groups launch the same node in different places, and how new nodes are split among them.

Two groups are similar when a new node of each would look the same to a pod: the same
allocatable CPU, memory, pod slots and extended resources within a few percent, the same
labels but for those that say where a node is or which group launched it, and the same
taints. Their new nodes go to the smallest first, so sizes stay within one of each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Taint
from nodescaler.domain.groups.node_group import EKS_NODEGROUP_LABEL
from nodescaler.domain.scale_down.marks import CANDIDATE_TAINT, ROOM_TAINT

# Labels that tell where a node is or which group launched it, never what it offers a pod:
# Cluster Autoscaler's basic and AWS lists (`--balancing-ignore-label` adds to them).
IGNORED_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
        "topology.ebs.csi.aws.com/zone",
        EKS_NODEGROUP_LABEL,
        "alpha.eksctl.io/nodegroup-name",
        "alpha.eksctl.io/instance-id",
        "kops.k8s.io/instancegroup",
        "k8s.amazonaws.com/eniConfig",
        "lifecycle",
    }
)
# Cluster Autoscaler's --max-allocatable-difference-ratio: instance types of one shape
# register a little differently (kernel, reserved memory), yet are the same node to a pod.
ALLOCATABLE_TOLERANCE = 0.05


def _within(a: int, b: int) -> bool:
    larger = max(a, b)
    return larger - min(a, b) <= larger * ALLOCATABLE_TOLERANCE


def _shape_of(taints: Sequence[Taint]) -> frozenset[Taint]:
    # a node soft-tainted for scale-in, or kept as buffer room, says nothing of what its
    # group launches
    return frozenset(t for t in taints if t not in (CANDIDATE_TAINT, ROOM_TAINT))


def similar(a: NodeTemplate, b: NodeTemplate, ignored: frozenset[str] = IGNORED_LABELS) -> bool:
    """Whether groups with these templates launch the same node (zones and names aside).

    Allocatable is compared as the node registers it, DaemonSets' share included: a live
    node's template has it taken off, a template built for a group at zero does not."""
    have_a, have_b = a.allocatable + a.daemon_sets, b.allocatable + b.daemon_sets
    if not all(
        _within(x, y)
        for x, y in (
            (have_a.cpu_millis, have_b.cpu_millis),
            (have_a.memory_bytes, have_b.memory_bytes),
            (have_a.pods, have_b.pods),
        )
    ):
        return False
    extended_a = {k: v for k, v in a.extended.items() if v}
    extended_b = {k: v for k, v in b.extended.items() if v}
    if extended_a.keys() != extended_b.keys() or not all(
        _within(v, extended_b[k]) for k, v in extended_a.items()
    ):
        return False
    labels_a = {k: v for k, v in a.labels.items() if k not in ignored}
    labels_b = {k: v for k, v in b.labels.items() if k not in ignored}
    return labels_a == labels_b and _shape_of(a.taints) == _shape_of(b.taints)


def even_split(
    count: int, sizes: Mapping[str, int], room: Mapping[str, int | None], first: str = ""
) -> dict[str, int]:
    """`count` new nodes over the groups of `sizes` (current, upcoming and planned nodes),
    one at a time to the smallest with room left (None: no limit), `first` winning a tie
    (the expander chain's choice), then by name. A group at its room takes no more and
    the others take the rest; what none can take is left out."""
    given = dict.fromkeys(sizes, 0)
    for _ in range(count):
        open_groups = [g for g in sizes if (r := room.get(g)) is None or given[g] < r]
        if not open_groups:
            break
        smallest = min(open_groups, key=lambda g: (sizes[g] + given[g], g != first, g))
        given[smallest] += 1
    return given

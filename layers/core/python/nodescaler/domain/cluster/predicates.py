"""Would a pending pod fit a new node of this group? The scheduler's predicates, and packing.

A node template stands for a node the group would launch: from a live node of the group
(`live_template`), or, for a group at zero, from its instance type and Cluster Autoscaler's
node-template tags (`instance_templates`). Each predicate says why a pod does not fit, so
a decision can explain itself. First-fit-decreasing packing then estimates how many new
nodes the fitting pods need.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from nodescaler.domain.cluster.snapshot import Node, Placement, Pod, Resources, Taint
from nodescaler.domain.cluster.state_taints import keeps_pods_off, of_state
from nodescaler.domain.groups.node_group import NodeGroup, belongs

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


def why_not(pod: Pod, template: NodeTemplate) -> str | None:
    """None if the pod fits an empty node of the template, else the first reason it does not."""
    placement = pod.placement or Placement()
    need, have, daemons = pod.requests, template.allocatable, template.daemon_sets
    for name, wanted, available, taken in (
        ("cpu", need.cpu_millis, have.cpu_millis, daemons.cpu_millis),
        ("memory", need.memory_bytes, have.memory_bytes, daemons.memory_bytes),
        ("pods", need.pods, have.pods, daemons.pods),
    ):
        if wanted > available:
            return f"needs more {name} than a node of the group has" + (
                f" once its DaemonSets take {_amount(name, taken)} ({_amount(name, available)}"
                f" left, {_amount(name, wanted, up=True)} asked)"
                if wanted <= available + taken  # a node without them would hold it
                else ""
            )
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


def _amount(resource: str, amount: int, *, up: bool = False) -> str:
    mib = -(-amount // 2**20) if up else amount // 2**20  # what is asked never reads as less
    return {"cpu": f"{amount}m", "memory": f"{mib}Mi"}.get(resource, str(amount))


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

"""Which of a group's nodes nothing needs: Cluster Autoscaler's *unneeded* nodes.

A node is unneeded when it is Ready, schedulable, not kept (scale-down disabled, or a pod
that may not be evicted) and every pod on it but DaemonSet and mirror pods would fit on
the cluster's other Ready, schedulable nodes, by the predicates pending pods are placed
with (resources, extended resources, pod slots, nodeSelector, required node affinity,
taints). Nodes are taken greedily, cheapest to move first (fewest pods, then least
requested); a pod moved takes room the next node's pods cannot use. Empty nodes cost nothing to find; at most `limit` others are
simulated a call, since a group sheds only a few nodes a minute anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from nodescaler.domain.cluster import Node, Pod, Resources, Snapshot, keeps_node
from nodescaler.domain.scheduling import NodeTemplate, why_not

SIMULATED_PER_CALL = 10


@dataclass(frozen=True)
class Unneeded:
    nodes: tuple[str, ...] = ()  # in the order they could go
    empty: int = 0  # of those, nodes with nothing to move

    def describe(self) -> str:
        moved = len(self.nodes) - self.empty
        return (
            f"{len(self.nodes)} of its nodes unneeded "
            f"({self.empty} empty, {moved} whose pods fit elsewhere)"
        )


def movable(pods: Sequence[Pod]) -> list[Pod]:
    """The pods a drain would move: not finished, not DaemonSet or mirror pods."""
    return [p for p in pods if not p.terminal and not p.daemon_set and not p.mirror]


def unneeded_nodes(
    group_nodes: Sequence[Node], snapshot: Snapshot, *, limit: int = SIMULATED_PER_CALL
) -> Unneeded:
    by_node = snapshot.pods_by_node
    candidates = sorted(
        (
            n
            for n in group_nodes
            if n.ready and n.schedulable and not keeps_node(n, by_node.get(n.name, ()))
        ),
        key=lambda n: _cost(movable(by_node.get(n.name, ())), n.name),
    )
    if not candidates:
        return Unneeded()
    rooms = {
        n.name: _room(n, by_node.get(n.name, ()))
        for n in snapshot.nodes
        if n.ready and n.schedulable
    }
    gone: list[str] = []
    empty = simulated = 0
    for node in candidates:
        pods = movable(by_node.get(node.name, ()))
        if not pods:
            gone.append(node.name)
            empty += 1
            continue
        if simulated >= limit or any(p.problem for p in pods):
            continue
        simulated += 1
        placed = _place(pods, {k: r for k, r in rooms.items() if k != node.name and k not in gone})
        if placed is not None:
            rooms.update(placed)
            gone.append(node.name)
    return Unneeded(tuple(gone), empty)


def _cost(pods: Sequence[Pod], name: str) -> tuple[int, int, int, str]:
    """Cheapest to move first: fewest pods, then least requested."""
    return (
        len(pods),
        sum(p.requests.cpu_millis for p in pods),
        sum(p.requests.memory_bytes for p in pods),
        name,
    )


def _room(node: Node, pods: Sequence[Pod]) -> NodeTemplate:
    """What is left on a node: its allocatable less what its pods request."""
    used = Resources()
    extended = dict(node.extended)
    for pod in pods:
        if pod.terminal:
            continue
        used = used + pod.requests
        for name, amount in (pod.placement.extended_resources if pod.placement else {}).items():
            extended[name] = extended.get(name, 0) - amount
    free = node.allocatable - used
    return NodeTemplate(
        node.group or "", free, node.labels, node.taints, f"node {node.name}", extended
    )


def _place(pods: Sequence[Pod], rooms: dict[str, NodeTemplate]) -> dict[str, NodeTemplate] | None:
    """The rooms after moving every pod, first fit, most room first; None if one does not fit."""
    changed: dict[str, NodeTemplate] = {}
    order = sorted(rooms, key=lambda k: (-rooms[k].allocatable.cpu_millis, k))
    for pod in sorted(pods, key=lambda p: (-p.requests.cpu_millis, -p.requests.memory_bytes)):
        target = next((k for k in order if why_not(pod, changed.get(k, rooms[k])) is None), None)
        if target is None:
            return None
        room = changed.get(target, rooms[target])
        extended = dict(room.extended)
        for name, amount in (pod.placement.extended_resources if pod.placement else {}).items():
            extended[name] = extended.get(name, 0) - amount
        changed[target] = replace(
            room, allocatable=room.allocatable - pod.requests, extended=extended
        )
    return changed

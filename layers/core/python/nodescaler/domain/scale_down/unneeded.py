"""Which of a group's nodes nothing needs: Cluster Autoscaler's *unneeded* nodes.

A node is unneeded when it is Ready, schedulable, not annotated scale-down-disabled,
holds no pod that may not move (`pod_rules`: no controller, local storage, a kube-system
pod without a budget in its first hour, safe-to-evict "false"; else kept,
`pods-may-not-move`),
empty or underutilized (its pods request at most half its CPU and memory, Cluster
Autoscaler's threshold, of what its DaemonSet and mirror pods leave of them, as Cluster
Autoscaler computes it when it leaves those pods out), and every pod on it but DaemonSet
and mirror pods
- would fit on the cluster's other Ready, schedulable nodes, by the predicates pending
  pods are placed with (resources, extended resources, pod slots, nodeSelector, required
  node affinity, taints): else it is kept, `pods-would-not-fit`;
- may be evicted: every disruption budget selecting its pods allows a disruption now, and
  no node chosen before it draws on the same budget; the drain then evicts its pods one
  budget's allowance at a time, each after the last one's replacement is healthy. Else
  `disruption-budget`. When the budgets could not be read, only empty nodes are unneeded;
- and leaves room for the group's capacity buffer on the group's nodes that stay, else
  `capacity-buffer`.
Nodes are taken greedily, cheapest to move first (fewest Jobs' pods at work, which moved
start their work again, then fewest pods, then least requested); a pod moved takes room
the next node's pods cannot use. Empty nodes cost nothing to find; at most `limit` others
are simulated a call, since a group sheds only a few nodes a minute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from nodescaler.domain.cluster.predicates import NodeTemplate, place, place_each, room_of
from nodescaler.domain.cluster.snapshot import DisruptionBudget, Node, Pod, Snapshot
from nodescaler.domain.scale_down.pod_rules import (
    CA_DEFAULTS,
    DrainRules,
    blocking_pods,
    movable,
    restarts_when_moved,
)
from nodescaler.domain.scale_down.spoken_for import Taken

SIMULATED_PER_CALL = 10
UNDERUTILIZED = 0.5  # a node with pods goes only if they request no more of it than this
WOULD_NOT_FIT = "pods-would-not-fit"
DISRUPTION_BUDGET = "disruption-budget"
BUDGETS_UNKNOWN = "disruption-budgets-unread"
BUFFER = "capacity-buffer"  # the group's buffer would no longer fit without it
MAY_NOT_MOVE = "pods-may-not-move"  # a pod Cluster Autoscaler would not move either


@dataclass(frozen=True)
class Kept:
    """A node that must stay, why, and the pods that say so."""

    node: str
    why: str  # WOULD_NOT_FIT, DISRUPTION_BUDGET, BUDGETS_UNKNOWN, BUFFER, MAY_NOT_MOVE
    pods: tuple[str, ...]  # their keys; with MAY_NOT_MOVE, "key: why"


@dataclass(frozen=True)
class Unneeded:
    nodes: tuple[str, ...] = ()  # in the order they could go
    empty: int = 0  # of those, nodes with nothing to move
    kept: tuple[Kept, ...] = field(default_factory=tuple)
    # the buffer's room, marked to hold it (`ROOM_TAINT`): empty nodes kept whole for it,
    # and the nodes it sits on once `nodes` go, the cluster's CapacityBuffers' as the group's
    rooms: tuple[str, ...] = ()
    # for each node whose pods move, in order, what they take on the nodes they move to
    moved: tuple[tuple[str, Mapping[str, Taken]], ...] = ()
    # what the group's buffer takes of each of its nodes that stay once all `nodes` go:
    # where it sits for other groups' scale-ins, once its decision sheds (`SpokenFor`)
    buffer_at: Mapping[str, Taken] = field(default_factory=dict)

    def describe(self) -> str:
        moved = len(self.nodes) - self.empty
        text = (
            f"{len(self.nodes)} of its nodes unneeded "
            f"({self.empty} empty, {moved} whose pods fit elsewhere)"
        )
        for kept in self.kept[:3]:
            shown = ", ".join(kept.pods[:3]) + (", ..." if len(kept.pods) > 3 else "")
            text += f"; {kept.node} kept: {kept.why}" + (f" ({shown})" if shown else "")
        return text


def unneeded_nodes(
    group_nodes: Sequence[Node],
    snapshot: Snapshot,
    *,
    now: datetime,
    limit: int = SIMULATED_PER_CALL,
    buffer: Sequence[Pod] = (),
    reserved: Mapping[str, Taken | None] | None = None,
    rules: DrainRules = CA_DEFAULTS,
) -> Unneeded:
    """`buffer`: the virtual pods of the group's capacity buffer
    (`domain.ahead.group_buffers`), which must still fit on the group's nodes that stay.
    `reserved`: nodes' room already spoken for (other groups' buffers, and the pods their
    scale-ins move; None: a node another group sheds), which a pod moved there cannot
    take, as Cluster Autoscaler's placeholder pods and its one simulation for every group
    leave it; a node of the group other groups' pods move to stays for them.
    `rules`: which pods may not move (at `now`: a system pod's timeout counts from its
    creation)."""
    by_node = snapshot.pods_by_node
    candidates = sorted(
        (n for n in group_nodes if n.ready and n.schedulable and not n.scale_down_disabled),
        key=lambda n: cost_to_move(snapshot.real(movable(by_node.get(n.name, ()))), n.name),
    )
    if not candidates:
        return Unneeded(rooms=tuple(held_for_buffers(group_nodes, snapshot)))
    rooms = {
        n.name: room_of(n, by_node.get(n.name, ()))
        for n in snapshot.nodes
        if n.ready and n.schedulable
    }
    own = frozenset(n.name for n in group_nodes)
    spoken = reserved or {}
    for name, taken in spoken.items():
        if taken is None:
            rooms.pop(name, None)
        elif name in rooms:
            rooms[name] = taken.off(rooms[name])
    candidates = [n for n in candidates if n.name not in spoken]
    shedding = _Shedding(snapshot, rules, now, limit, buffer, own, rooms)
    for node in candidates:
        shedding.consider(node)
    buffer_at = shedding.buffer_kept()
    sits_on = [k for k, taken in buffer_at.items() if taken != Taken()]
    held = held_for_buffers(group_nodes, snapshot, shedding.gone, shedding.arrived)
    return Unneeded(
        tuple(shedding.gone),
        shedding.empty,
        tuple(shedding.kept),
        tuple(dict.fromkeys([*shedding.buffer_rooms, *sits_on, *held])),
        tuple(shedding.moved),
        buffer_at,
    )


@dataclass
class _Shedding:
    """The greedy pass of `unneeded_nodes`: the nodes taken so far, where their pods went
    (`rooms`) and the budgets they draw on, which each next node is judged after."""

    snapshot: Snapshot
    rules: DrainRules
    now: datetime
    limit: int
    buffer: Sequence[Pod]
    own: frozenset[str]  # the group's nodes, where its buffer must still fit
    rooms: dict[str, NodeTemplate]
    drawn: Counter[str] = field(default_factory=Counter)  # budget → chosen nodes it covers
    gone: list[str] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)
    buffer_rooms: list[str] = field(default_factory=list)  # empty nodes kept for it
    moved: list[tuple[str, dict[str, Taken]]] = field(default_factory=list)
    arrived: dict[str, list[Pod]] = field(default_factory=dict)  # the pods moved to each node

    empty: int = 0
    simulated: int = 0

    def consider(self, node: Node) -> None:
        """Take the node if it can go after the nodes taken before it, else say why not.
        Its pods are its own and those the nodes taken before it moved to it: they move
        again, as Cluster Autoscaler's simulation keeps each removal's moves for the next
        (`persistSuccessfulSimulations`), or a chain of nodes each passing its pods on
        would all count as unneeded, and the pods none of them holds any more."""
        own = movable(self.snapshot.pods_by_node.get(node.name, ()))
        pods = [*own, *self.arrived.get(node.name, ())]
        kept = self._move_off(node, pods) if pods else self._take_empty(node)
        if kept is not None:
            self.kept.append(kept)

    def _take_empty(self, node: Node) -> Kept | None:
        if not self._buffer_fits_without(node.name, {}):
            self.buffer_rooms.append(node.name)
            return Kept(node.name, BUFFER, ())
        self.gone.append(node.name)
        self.empty += 1
        return None

    def _move_off(self, node: Node, pods: Sequence[Pod]) -> Kept | None:
        budgets = self.snapshot.budgets
        if blocked := blocking_pods(pods, self.rules, budgets, self.now):
            return Kept(node.name, MAY_NOT_MOVE, tuple(f"{p.key}: {w}" for p, w in blocked))
        if budgets is None:
            return Kept(node.name, BUDGETS_UNKNOWN, tuple(p.key for p in pods))
        if self.simulated >= self.limit or any(p.problem for p in pods):
            return None
        if not _underutilized(node, self.snapshot.pods_by_node.get(node.name, ())):
            return None
        self.simulated += 1
        return self._simulate(node, pods, budgets)

    def _simulate(
        self, node: Node, pods: Sequence[Pod], budgets: Sequence[DisruptionBudget]
    ) -> Kept | None:
        if refused := over_budget(pods, budgets, self.drawn):
            return Kept(node.name, DISRUPTION_BUDGET, tuple(p.key for p in refused))
        open_rooms = {k: r for k, r in self.rooms.items() if k != node.name and k not in self.gone}
        # the buffer's room last, where its mark has the scheduler put them (`marks.ROOM_TAINT`)
        placed, stranded, took = place_each(
            pods, {k: r for k, r in open_rooms.items() if k not in self.buffer_rooms}
        )
        if stranded:
            placed, stranded, took = place_each(pods, open_rooms)
        if stranded:
            return Kept(node.name, WOULD_NOT_FIT, tuple(p.key for p in stranded))
        if not self._buffer_fits_without(node.name, placed):
            return Kept(node.name, BUFFER, ())
        self.moved.append(
            (node.name, {k: Taken.between(self.rooms[k], r) for k, r in placed.items()})
        )
        self.rooms.update(placed)
        for destination, arriving in took.items():
            self.arrived.setdefault(destination, []).extend(arriving)
        self.drawn.update(_budgets_of(pods, budgets))
        self.gone.append(node.name)
        return None

    def buffer_kept(self) -> dict[str, Taken]:
        """What the buffer takes of each of the group's nodes once those taken go: its
        place on the nodes that stay, nothing on the rest (listed too, so another group
        counts this, not where the plan first placed the buffer, which may be a node that
        goes, or one of the unneeded the decision keeps)."""
        if not self.buffer:
            return {}
        own = {k: r for k, r in self.rooms.items() if k in self.own}
        placed = place(self.buffer, {k: r for k, r in own.items() if k not in self.gone})[0]
        return {k: Taken.between(r, placed.get(k, r)) for k, r in own.items()}

    def _buffer_fits_without(self, node: str, placed: Mapping[str, NodeTemplate]) -> bool:
        if not self.buffer:
            return True
        leaving = {*self.gone, node}
        stays = {
            k: placed.get(k, r) for k, r in self.rooms.items() if k in self.own and k not in leaving
        }
        return not place(self.buffer, stays)[1]


def held_for_buffers(
    group_nodes: Sequence[Node],
    snapshot: Snapshot,
    gone: Sequence[str] = (),
    arrived: Mapping[str, Sequence[Pod]] | None = None,
) -> list[str]:
    """The group's nodes a cluster CapacityBuffer's virtual pods sit on once the nodes
    `gone` have gone: bound to them in the snapshot (`capacity_buffers.with_buffers`), or
    moved to them off a node that goes (`arrived`). Their room is held, marked as a
    group's buffer's is (`marks.ROOM_TAINT`), as Cluster Autoscaler's placeholder pods
    hold theirs: else pods smaller than the buffer's spread over it, and the node bought
    for the buffer is bought again."""
    if not snapshot.virtual:
        return []
    by_node, moved = snapshot.pods_by_node, arrived or {}
    return [
        n.name
        for n in group_nodes
        if n.name not in gone
        and any(
            p.key in snapshot.virtual for p in (*by_node.get(n.name, ()), *moved.get(n.name, ()))
        )
    ]


def _underutilized(node: Node, on_node: Sequence[Pod]) -> bool:
    """Its pods request at most half its CPU and at most half its memory (Cluster
    Autoscaler's scale-down utilization threshold, a node at it included:
    `eligibility.go`, kept only above it): a busier node is not worth its evictions. As Cluster
    Autoscaler counts it with DaemonSet and mirror pods left out (simulator/utilization,
    CalculateUtilizationOfResource): their requests leave the allocatable too, so a node
    its DaemonSets half fill is judged on the half they leave (else it looked emptier than
    Cluster Autoscaler sees it, and went sooner)."""
    pods = movable(on_node)
    system = [p for p in on_node if not p.terminal and (p.daemon_set or p.mirror)]
    cpu = sum(p.requests.cpu_millis for p in pods)
    memory = sum(p.requests.memory_bytes for p in pods)
    cpu_left = node.allocatable.cpu_millis - sum(p.requests.cpu_millis for p in system)
    memory_left = node.allocatable.memory_bytes - sum(p.requests.memory_bytes for p in system)
    return cpu <= UNDERUTILIZED * cpu_left and memory <= UNDERUTILIZED * memory_left


def _budgets_of(pods: Sequence[Pod], budgets: Sequence[DisruptionBudget]) -> set[str]:
    """The budgets selecting any of the pods."""
    return {f"{b.namespace}/{b.name}" for p in pods for b in budgets if b.selects(p)}


def over_budget(
    pods: Sequence[Pod], budgets: Sequence[DisruptionBudget], drawn: Mapping[str, int]
) -> list[Pod]:
    """The pods whose budget allows no disruption now, or whose allowance the nodes chosen
    before already draw on (a node each)."""
    return [
        pod
        for pod in pods
        if any(
            drawn.get(f"{b.namespace}/{b.name}", 0) >= b.disruptions_allowed
            for b in budgets
            if b.selects(pod)
        )
    ]


def cost_to_move(pods: Sequence[Pod], name: str) -> tuple[int, int, int, int, str]:
    """Cheapest to drain first: fewest pods that would start their work again
    (`restarts_when_moved`), then `cost_to_empty`."""
    return (sum(map(restarts_when_moved, pods)), *cost_to_empty(pods, name))


def cost_to_empty(pods: Sequence[Pod], name: str) -> tuple[int, int, int, str]:
    """Cheapest to empty first: fewest pods, then least requested."""
    return (
        len(pods),
        sum(p.requests.cpu_millis for p in pods),
        sum(p.requests.memory_bytes for p in pods),
        name,
    )

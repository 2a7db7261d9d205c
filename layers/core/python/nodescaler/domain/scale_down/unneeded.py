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
Nodes are taken greedily, cheapest to move first (fewest pods, then least requested); a
pod moved takes room the next node's pods cannot use. Empty nodes cost nothing to find; at
most `limit` others are simulated a call, since a group sheds only a few nodes a minute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from nodescaler.domain.cluster.predicates import NodeTemplate, place, room_of
from nodescaler.domain.cluster.snapshot import DisruptionBudget, Node, Pod, Snapshot
from nodescaler.domain.groups.node_group import NodeGroup, belongs
from nodescaler.domain.scale_down.marks import kept_as_room
from nodescaler.domain.scale_down.pod_rules import (
    CA_DEFAULTS,
    DrainRules,
    blocking_pods,
    keeps_node,
    movable,
)

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
    rooms: tuple[str, ...] = ()  # empty nodes kept whole for the buffer (`ROOM_TAINT`)

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
    rules: DrainRules = CA_DEFAULTS,
) -> Unneeded:
    """`buffer`: the virtual pods of the group's capacity buffer
    (`domain.ahead.group_buffers`), which must still fit on the group's nodes that stay.
    `rules`: which pods may not move (at `now`: a system pod's timeout counts from its
    creation)."""
    by_node = snapshot.pods_by_node
    candidates = sorted(
        (n for n in group_nodes if n.ready and n.schedulable and not n.scale_down_disabled),
        key=lambda n: _cost(movable(by_node.get(n.name, ())), n.name),
    )
    if not candidates:
        return Unneeded()
    rooms = {
        n.name: room_of(n, by_node.get(n.name, ()))
        for n in snapshot.nodes
        if n.ready and n.schedulable
    }
    own = frozenset(n.name for n in group_nodes)
    shedding = _Shedding(snapshot, rules, now, limit, buffer, own, rooms)
    for node in candidates:
        shedding.consider(node)
    return Unneeded(
        tuple(shedding.gone), shedding.empty, tuple(shedding.kept), tuple(shedding.buffer_rooms)
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
    empty: int = 0
    simulated: int = 0

    def consider(self, node: Node) -> None:
        """Take the node if it can go after the nodes taken before it, else say why not."""
        pods = movable(self.snapshot.pods_by_node.get(node.name, ()))
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
        if refused := _over_budget(pods, budgets, self.drawn):
            return Kept(node.name, DISRUPTION_BUDGET, tuple(p.key for p in refused))
        placed, stranded = place(
            pods, {k: r for k, r in self.rooms.items() if k != node.name and k not in self.gone}
        )
        if stranded:
            return Kept(node.name, WOULD_NOT_FIT, tuple(p.key for p in stranded))
        if not self._buffer_fits_without(node.name, placed):
            return Kept(node.name, BUFFER, ())
        self.rooms.update(placed)
        self.drawn.update(_budgets_of(pods, budgets))
        self.gone.append(node.name)
        return None

    def _buffer_fits_without(self, node: str, placed: Mapping[str, NodeTemplate]) -> bool:
        if not self.buffer:
            return True
        leaving = {*self.gone, node}
        stays = {
            k: placed.get(k, r) for k, r in self.rooms.items() if k in self.own and k not in leaving
        }
        return not place(self.buffer, stays)[1]


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


def _over_budget(
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


def _cost(pods: Sequence[Pod], name: str) -> tuple[int, int, int, str]:
    """Cheapest to move first: fewest pods, then least requested."""
    return (
        len(pods),
        sum(p.requests.cpu_millis for p in pods),
        sum(p.requests.memory_bytes for p in pods),
        name,
    )


@dataclass(frozen=True)
class Removable:
    """The instances a scale-in may take, in order, and why these (and not more)."""

    instance_ids: tuple[str, ...]
    reason: str
    not_nodes: tuple[str, ...] = ()
    busy: tuple[str, ...] = ()  # of those, a node with pods to move: a drain must move them
    next_in_order: tuple[str, ...] = ()  # past `count`: the dead nodes' instances

    def undrained(self, why: str) -> Removable:
        """These without the node whose pods a drain would move, where no drain runs (`why`
        says why: its pods would end with the instance, past their budgets); the next in
        order takes its place (a dead node's instance must still be able to leave)."""
        kept = tuple(i for i in self.instance_ids if i not in self.busy)
        kept += self.next_in_order[: len(self.instance_ids) - len(kept)]
        reason = (
            f"{len(kept)} taken: {self.reason}; {', '.join(self.busy)} stays while its pods "
            f"run: {why} (a node goes once empty; a drain hook lets its pods move, "
            "docs/deploy.md)"
        )
        return Removable(kept, reason, self.not_nodes)


def removable(
    group: NodeGroup,
    offered: Sequence[str],
    count: int,
    snapshot: Snapshot,
    rules: DrainRules = CA_DEFAULTS,
    *,
    now: datetime,
) -> Removable:
    """Of `offered` (the group's instances), up to `count` a scale-in may take: those that
    never became Ready nodes first, then empty nodes, then one node whose pods can move."""
    nodes = {n.instance_id: n for n in snapshot.nodes if belongs(n, group)}
    by_node = snapshot.pods_by_node

    def never_ready(instance: str) -> bool:
        """No node registered, or one not Ready that nothing runs on: a node that went
        NotReady with pods bound was Ready once, and its pods are not free to lose."""
        node = nodes.get(instance)
        return node is None or (not node.ready and not movable(by_node.get(node.name, ())))

    unready = [i for i in offered if never_ready(i)]
    by_name = {n.name: n.instance_id for n in nodes.values()}
    offered_nodes = [nodes[i] for i in offered if i in nodes and nodes[i].ready]
    limit = max(count, SIMULATED_PER_CALL)
    spare = unneeded_nodes(
        [n for n in offered_nodes if not kept_as_room(n)],
        snapshot,
        now=now,
        limit=limit,
        rules=rules,
    )
    # the buffer's room last: the evaluation kept it, so a scale-in takes the nodes it
    # meant (else the room goes, and is bought back a minute later)
    rooms = unneeded_nodes(
        [n for n in offered_nodes if kept_as_room(n)], snapshot, now=now, limit=0, rules=rules
    )
    # Empty nodes together, a node with pods to move one at a time (as Cluster Autoscaler
    # drains them): two drains side by side would move pods onto each other. The group
    # asks again shortly for the rest.
    taken = spare.nodes[: spare.empty + 1] + rooms.nodes[: rooms.empty]
    # a node gone NotReady with pods bound: last, once nothing better can go (its pods may
    # be lost with it, but a dead instance must still be able to leave)
    dead = [i for i in offered if i in nodes and not nodes[i].ready and i not in unready]
    ordered = unready + [by_name[name] for name in taken] + dead
    chosen = tuple(ordered[:count])
    reason = f"{len(chosen)} of {count} asked: {len(unready)} never Ready; {spare.describe()}"
    busy = {by_name[name] for name in spare.nodes[spare.empty : spare.empty + 1]}
    return Removable(
        chosen,
        reason,
        tuple(i for i in offered if i not in nodes),
        tuple(i for i in chosen if i in busy),
        tuple(ordered[count:]),
    )


def awaiting_removal(
    group: NodeGroup, snapshot: Snapshot, excess: int, rooms: frozenset[str] = frozenset()
) -> frozenset[str]:
    """The nodes a shrinking group lets go next, while `excess` more of its instances are in
    service than it desires: its termination policy takes those that never became Ready
    nodes first (`removable`), then of its Ready, schedulable nodes (a cordoned one is
    being drained already) the cheapest to empty, none protected from scale-in or kept by
    annotation. Marked as unneeded nodes are, so new pods (a queue's next workers) land on
    the nodes that stay and these empty; else they are refilled while the termination
    policy waits for their pods to finish. The buffer's room (`rooms`, or a node marked so)
    comes last, as the termination policy takes it last."""
    if excess <= 0:
        return frozenset()
    by_node = snapshot.pods_by_node
    ready = [n for n in snapshot.nodes if belongs(n, group) and n.ready]
    # never Ready (booting, or no node at all): taken first, so fewer Ready nodes go; an
    # instance leaving already counts here too, which only marks fewer
    excess -= len(group.instance_ids - {n.instance_id for n in ready})
    nodes = sorted(
        (
            n
            for n in ready
            if n.schedulable
            and not n.scale_down_disabled
            and n.instance_id not in group.protected_ids
        ),
        key=lambda n: (
            n.name in rooms or kept_as_room(n),
            _cost(movable(by_node.get(n.name, ())), n.name),
        ),
    )
    return frozenset(n.name for n in nodes[: max(excess, 0)])


def least_bad(
    group: NodeGroup,
    offered: Sequence[str],
    snapshot: Snapshot,
    rules: DrainRules = CA_DEFAULTS,
    *,
    now: datetime,
) -> tuple[str, ...]:
    """Every offered instance, least harm first, for a cause that cannot wait for one
    `removable` (`domain.scale_down.termination_policy`): instances that are no node of the
    group, then nodes neither an annotation nor a pod that may not move keeps (`pod_rules`),
    then those
    whose pods no disruption budget holds (a budget allowing none now, or budgets unread),
    each cheapest to move first."""
    nodes = {n.instance_id: n for n in snapshot.nodes if belongs(n, group)}
    by_node = snapshot.pods_by_node

    def harm(instance: str) -> tuple[bool, bool, bool, tuple[int, int, int, str]]:
        node = nodes.get(instance)
        if node is None:
            return (False, False, False, (0, 0, 0, instance))
        pods = by_node.get(node.name, ())
        moved = movable(pods)
        budgets = snapshot.budgets
        held = bool(moved) and (budgets is None or bool(_over_budget(moved, budgets, {})))
        kept = keeps_node(node, pods, rules, budgets, now=now)
        return (True, kept, held, _cost(moved, node.name))

    return tuple(sorted(offered, key=harm))

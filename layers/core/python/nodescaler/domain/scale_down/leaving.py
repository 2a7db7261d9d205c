"""Which of a group's instances a scale-in takes, and in what order: its termination
policy's choice (`removable`, and `least_bad` for a cause that cannot wait), and the nodes
it lets go next, which its evaluation marks (`awaiting_removal`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from nodescaler.domain.cluster.snapshot import Node, Pod, Snapshot
from nodescaler.domain.groups.node_group import NodeGroup, belongs
from nodescaler.domain.scale_down.marks import kept_as_room
from nodescaler.domain.scale_down.pod_rules import (
    CA_DEFAULTS,
    DrainRules,
    keeps_node,
    movable,
    restarts_when_moved,
)
from nodescaler.domain.scale_down.unneeded import (
    SIMULATED_PER_CALL,
    Unneeded,
    cost_to_empty,
    cost_to_move,
    over_budget,
    unneeded_nodes,
)


@dataclass(frozen=True)
class Removable:
    """The instances a scale-in may take, in order, and why these (and not more)."""

    instance_ids: tuple[str, ...]
    reason: str
    not_nodes: tuple[str, ...] = ()
    busy: tuple[str, ...] = ()  # of those, a node with pods to move: a drain must move them
    next_in_order: tuple[str, ...] = ()  # past `count`: the dead nodes' instances
    waiting: tuple[str, ...] = ()  # nodes that go once their Jobs end, none drained now

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
    rooms, reserved = _rooms(offered_nodes, snapshot, {n.name for n in nodes.values()})
    spare = unneeded_nodes(
        [n for n in offered_nodes if n.name not in rooms],
        snapshot,
        now=now,
        limit=max(count, SIMULATED_PER_CALL),
        reserved=reserved,
        rules=rules,
    )
    one_busy, jobs = _empty_then_one_busy(spare, by_node)
    # a node gone NotReady with pods bound: last, once nothing better can go (its pods may
    # be lost with it, but a dead instance must still be able to leave)
    dead = [i for i in offered if i in nodes and not nodes[i].ready and i not in unready]
    room_ids = [by_name[name] for name in rooms]
    ordered = unready + [by_name[name] for name in one_busy] + room_ids + dead
    chosen = tuple(ordered[:count])
    reason = f"{len(chosen)} of {count} asked: {len(unready)} never Ready; {spare.describe()}"
    if rooms:
        reason += f"; {len(rooms)} empty kept as the buffer's room, taken last"
    waiting = tuple(jobs[: max(count - len(chosen), 0)])
    if waiting:
        reason += f"; {len(waiting)} left while their Jobs run, then taken: {', '.join(waiting)}"
    busy = {by_name[name] for name in one_busy[spare.empty :]}
    return Removable(
        chosen,
        reason,
        tuple(i for i in offered if i not in nodes),
        tuple(i for i in chosen if i in busy),
        # what may stand in for a busy node no drain moves: never the buffer's room
        tuple(i for i in ordered[count:] if i not in room_ids),
        waiting,
    )


def _empty_then_one_busy(
    spare: Unneeded, by_node: Mapping[str, Sequence[Pod]]
) -> tuple[list[str], list[str]]:
    """Of the unneeded nodes, the empty ones together and one with pods to move (as
    Cluster Autoscaler drains them one at a time: two drains side by side would move pods
    onto each other; the group asks again shortly for the rest), never one a Job is at
    work on: moved, it starts its work again. And those the Jobs hold: each waits, marked
    (`awaiting_removal`, or the plan's candidates), and goes once empty."""
    jobs = [n for n in spare.nodes if any(map(restarts_when_moved, by_node.get(n, ())))]
    drainable = [n for n in spare.nodes[spare.empty :] if n not in jobs]
    return [*spare.nodes[: spare.empty], *drainable[:1]], jobs


def _rooms(
    offered: Sequence[Node], snapshot: Snapshot, mine: set[str]
) -> tuple[list[str], dict[str, None]]:
    """The empty nodes the group's evaluation kept as its buffer's room
    (`marks.ROOM_TAINT`), taken last so the node it meant goes (else the room went, and was
    bought back a minute later); and the nodes no pod a drain moves may count on: those,
    and other groups' empty nodes marked so (a busy node a buffer sits on, marked too, is
    offered and counted on as any other)."""
    by_node = snapshot.pods_by_node

    def empty_room(n: Node) -> bool:
        return kept_as_room(n) and not movable(by_node.get(n.name, ()))

    rooms = sorted(
        n.name for n in offered if empty_room(n) and n.schedulable and not n.scale_down_disabled
    )
    others = [n.name for n in snapshot.nodes if empty_room(n) and n.name not in mine]
    return rooms, dict.fromkeys([*rooms, *others])


def awaiting_removal(
    group: NodeGroup, snapshot: Snapshot, excess: int, rooms: frozenset[str] = frozenset()
) -> frozenset[str]:
    """The nodes a shrinking group lets go next, while `excess` more of its instances are in
    service than it desires: its termination policy takes those that never became Ready
    nodes first (`removable`), then of its Ready, schedulable nodes (a cordoned one is
    being drained already) the cheapest to empty, none protected from scale-in or kept by
    annotation. Marked as unneeded nodes are, so new pods (a queue's next workers) land on
    the nodes that stay and these empty; else they are refilled while the termination
    policy waits for their pods to finish. The buffer's empty room (`rooms`, or a node
    marked so) comes last, as the termination policy takes it last."""
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
            # last, the rooms: this evaluation's hold no real pod (a CapacityBuffer's
            # virtual ones stay on it), a room marked before none
            (n.name in rooms and not snapshot.real(movable(by_node.get(n.name, ()))))
            or (kept_as_room(n) and not movable(by_node.get(n.name, ()))),
            cost_to_empty(snapshot.real(movable(by_node.get(n.name, ()))), n.name),
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

    def harm(instance: str) -> tuple[bool, bool, bool, tuple[int, int, int, int, str]]:
        node = nodes.get(instance)
        if node is None:
            return (False, False, False, (0, 0, 0, 0, instance))
        pods = by_node.get(node.name, ())
        moved = movable(pods)
        budgets = snapshot.budgets
        held = bool(moved) and (budgets is None or bool(over_budget(moved, budgets, {})))
        kept = keeps_node(node, pods, rules, budgets, now=now)
        return (True, kept, held, cost_to_move(moved, node.name))

    return tuple(sorted(offered, key=harm))

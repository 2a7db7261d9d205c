"""Room already spoken for on a group's nodes, which another group's scale-in cannot move
pods into: as Cluster Autoscaler's placeholder pods hold a buffer's room, and its one
simulation for every group keeps what each removal takes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Resources


@dataclass(frozen=True)
class Taken:
    """What is spoken for on one node: requests, extended resources (GPUs), and the keys of
    the pods that may share no node with the likes of them (`Placement.apart`)."""

    requests: Resources = field(default_factory=Resources)
    extended: Mapping[str, int] = field(default_factory=dict)
    holding: frozenset[str] = frozenset()

    @classmethod
    def between(cls, before: NodeTemplate, after: NodeTemplate) -> Taken:
        """What was taken of a node's room from `before` to `after`."""
        extended = {k: v - after.extended.get(k, 0) for k, v in before.extended.items()}
        return cls(
            before.allocatable - after.allocatable,
            {k: v for k, v in extended.items() if v},
            after.holding - before.holding,
        )

    def plus(self, other: Taken) -> Taken:
        extended = dict(self.extended)
        for name, amount in other.extended.items():
            extended[name] = extended.get(name, 0) + amount
        return Taken(self.requests + other.requests, extended, self.holding | other.holding)

    def off(self, room: NodeTemplate) -> NodeTemplate:
        """The node's room less what is spoken for."""
        extended = {k: v - self.extended.get(k, 0) for k, v in room.extended.items()}
        return replace(
            room,
            allocatable=room.allocatable - self.requests,
            extended=extended,
            holding=room.holding | self.holding,
        )


# for each node whose pods move, in order, what they take on the nodes they move to
Moves = tuple[tuple[str, Mapping[str, Taken]], ...]


@dataclass
class SpokenFor:
    """What the groups evaluated on one listing have spoken for on each other's nodes: a
    node a group sheds is no room for another's pods, and a pod one moves takes room the
    next cannot use. Else two groups shed a node each onto the other's room, and both buy
    one back. A group's unneeded nodes count once its decision sheds them (`commit`): a
    group held at its minimum, by a window or a pause, speaks for nothing."""

    moves: dict[str, dict[str, Taken | None]] = field(default_factory=dict)
    # by group that decided to shed: what its buffer takes of the nodes it keeps, which
    # stands for where the plan placed it (maybe on a node it sheds)
    buffers: dict[str, Mapping[str, Taken]] = field(default_factory=dict)
    # by group, read and not yet decided: its unneeded nodes, in order, what each node's
    # pods take where they move, and its buffer on the nodes that stay (`Unneeded`)
    found: dict[str, tuple[tuple[str, ...], Moves, Mapping[str, Taken]]] = field(
        default_factory=dict
    )

    def reserved_for(
        self, group: str, own: set[str], buffers: Mapping[str, Taken]
    ) -> dict[str, Taken | None]:
        """`unneeded_nodes`' `reserved` for `group`: the other groups' buffers' room
        (`buffers`, placed by each group on its nodes; or, once it decided to shed, where
        its buffer sits on the nodes it keeps; its own left to its own buffer's check), and
        what the other groups' scale-ins shed and move."""
        reserved: dict[str, Taken | None] = {k: t for k, t in buffers.items() if k not in own}
        for other, kept in self.buffers.items():
            if other != group:
                reserved.update({k: t for k, t in kept.items() if k not in own})
        for other, moved in self.moves.items():
            if other == group:
                continue
            for node, taken in moved.items():
                before = reserved.get(node, Taken())
                reserved[node] = None if taken is None or before is None else before.plus(taken)
        return reserved

    def record(
        self,
        group: str,
        nodes: tuple[str, ...],
        moved: Moves,
        buffer_at: Mapping[str, Taken] | None = None,
    ) -> None:
        """The group's unneeded nodes as read, until its decision says how many go; and
        where its buffer sits on the nodes that stay once they all go."""
        self.found[group] = (nodes, moved, buffer_at or {})

    def commit(self, group: str, shedding: int) -> None:
        """The group's decision sheds `shedding` of its nodes: its first unneeded ones."""
        found = self.found.pop(group, None)
        self.moves.pop(group, None)
        self.buffers.pop(group, None)
        if found is None or shedding <= 0:
            return
        nodes, moves, buffer_at = found
        if buffer_at:  # placed on what stays once all its unneeded go: it holds on more
            self.buffers[group] = buffer_at
        going = nodes[:shedding]
        moved: dict[str, Taken | None] = dict.fromkeys(going)
        for node, taken in moves:
            if node not in going:
                continue
            for name, amount in taken.items():
                before = moved.get(name, Taken())
                if before is not None:
                    moved[name] = before.plus(amount)
        self.moves[group] = moved

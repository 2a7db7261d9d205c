"""nodescaler's soft taints on a group's nodes, which steer the scheduler and the
termination policy's order, never a pod's eviction: the deletion candidate's on the nodes
a scale-in means to take, and the buffer room's on the nodes the group's buffer, or a
cluster CapacityBuffer, sits on."""

from __future__ import annotations

from collections.abc import Sequence

from nodescaler.domain.cluster.snapshot import Node, Taint

# Nodes a group means to shed carry this soft taint (Cluster Autoscaler's
# DeletionCandidateOfClusterAutoscaler): the scheduler then prefers other nodes, so a pod
# evicted from one leaving node does not land on the next to go.
CANDIDATE_TAINT = Taint("nodescaler.io/deletion-candidate", "", "PreferNoSchedule")
# A node the group's buffer (or a cluster CapacityBuffer) sits on carries this one: the
# scheduler then fills the cluster's other room first, so new pods and those a scale-in
# moves do not land in the buffer's room (to be bought back a minute later), and the
# buffer's room stays whole for a burst, which still lands on it once nothing else fits.
# Cluster Autoscaler's placeholder pods hold their room the same way, but as pods.
ROOM_TAINT = Taint("nodescaler.io/buffer-room", "", "PreferNoSchedule")


def candidate_marks(
    group_nodes: Sequence[Node], candidates: frozenset[str], taint: Taint = CANDIDATE_TAINT
) -> dict[str, bool]:
    """The group's nodes whose soft taint (`taint`) must change: node → marked or not."""
    changes = {}
    for node in group_nodes:
        marked = any(t.key == taint.key for t in node.taints)
        if marked != (node.name in candidates):
            changes[node.name] = not marked
    return changes


def mark_changes(
    group_nodes: Sequence[Node],
    leaving: frozenset[str],
    rooms: frozenset[str] | None,
    held: frozenset[str] = frozenset(),
) -> list[tuple[str, Taint, bool]]:
    """The soft taints to change on the group's nodes, (node, taint, marked): the deletion
    candidate's on the nodes `leaving`, and the buffer room's on `rooms` (None: those
    marked so already), the nodes its buffer sits on. The scheduler then puts new pods,
    and those moved off the leaving nodes, on other room first, and the termination
    policy takes the nodes meant (`removable`): the buffer's room is held whole, as
    Cluster Autoscaler's placeholder pods hold theirs, rather than spread over by pods
    smaller than its own (each node left a fraction no buffer pod fits) and bought
    again. `held`: the nodes the cluster's CapacityBuffers sit on now
    (`unneeded.held_for_buffers`), their room in every evaluation, the group growing or
    not (`rooms` None)."""
    if rooms is None:
        rooms = frozenset(n.name for n in group_nodes if kept_as_room(n))
    # a room the group lets go after all (nothing else can go) is a candidate as any other
    rooms = (rooms | held) - leaving
    return [
        (node, taint, marked)
        for taint, names in ((CANDIDATE_TAINT, leaving), (ROOM_TAINT, rooms))
        for node, marked in candidate_marks(group_nodes, names, taint).items()
    ]


def kept_as_room(node: Node) -> bool:
    """Whether an evaluation kept the node as its group's buffer room (`ROOM_TAINT`)."""
    return any(t.key == ROOM_TAINT.key for t in node.taints)

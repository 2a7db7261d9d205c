"""Room already spoken for on other groups' nodes: their buffers', the nodes they shed, and
the pods their scale-ins move there, which a group's own scale-in cannot count on (as
Cluster Autoscaler's placeholder pods and its one simulation for every group have it)."""

from __future__ import annotations

from nodescaler.domain.cluster.predicates import room_of
from nodescaler.domain.cluster.snapshot import Node, Pod, Resources, Snapshot
from nodescaler.domain.scale_down.unneeded import WOULD_NOT_FIT, Kept, SpokenFor, unneeded_nodes

from tests.builders import T0

GIB = 2**30


def node(name: str, group: str) -> Node:
    return Node(name, group, True, True, Resources(4000, 16 * GIB, 110))


def pod(name: str, on: str, cpu: int = 1000) -> Pod:
    return Pod("default", name, on, Resources(cpu, GIB, 1))


# web's w1 runs one 1-core pod; batch's b0 is empty, b1 runs a 3-core pod
NODES = (node("w1", "web"), node("b0", "batch"), node("b1", "batch"))
SNAPSHOT = Snapshot(NODES, (pod("one", "w1"), pod("three", "b1", 3000)))
WEB = [NODES[0]]


def shed(reserved: dict) -> tuple[tuple[str, ...], tuple[Kept, ...]]:
    found = unneeded_nodes(WEB, SNAPSHOT, now=T0, reserved=reserved)
    return found.nodes, found.kept


def test_a_pod_to_move_fits_only_in_room_no_other_group_spoke_for() -> None:
    # Given nothing spoken for, w1 goes: its pod fits on b0
    assert shed({}) == (("w1",), ())
    # When batch's buffer fills b0 and b1 is full, Then w1 stays: its pod has nowhere to go
    full = room_of(NODES[1], [pod("buffer", "b0", 4000)])
    no_room = room_of(NODES[2], [pod("three", "b1", 3000), pod("more", "b1")])
    assert shed({"b0": full, "b1": no_room}) == ((), (Kept("w1", WOULD_NOT_FIT, ("default/one",)),))
    # and a node another group sheds (None) is no room either, b1's last core aside
    assert shed({"b0": None}) == (("w1",), ())
    assert shed({"b0": None, "b1": None}) == ((), (Kept("w1", WOULD_NOT_FIT, ("default/one",)),))


def test_a_node_other_groups_pods_move_to_stays_for_them() -> None:
    # Given batch's scale-in moving a pod onto web's w1
    taken = room_of(NODES[0], [pod("one", "w1"), pod("moved", "w1")])
    # When web's unneeded nodes are found, Then w1 is not one of them
    assert shed({"w1": taken}) == ((), ())


def test_each_group_counts_the_others_moves_and_buffers_but_its_own_buffer_alone() -> None:
    spoken = SpokenFor()
    room = room_of(NODES[1], ())
    buffers = {"b0": room, "w1": room}  # each group's buffer, placed on its own nodes
    # web, first: the batch buffer's room, not its own (its own check counts that)
    assert spoken.reserved_for("web", {"w1"}, buffers) == {"b0": room}
    # web sheds w1, its pod moving to b0
    moved_to = room_of(NODES[1], [pod("one", "b0")])
    found = unneeded_nodes(WEB, SNAPSHOT, now=T0)
    assert (found.nodes, found.moved) == (("w1",), (("w1", {"b0": moved_to}),))
    spoken.record("web", found)
    # found, not yet decided: nothing spoken for
    assert spoken.reserved_for("batch", {"b0", "b1"}, buffers) == {"w1": room}
    # Then, once web's decision sheds one node, batch finds w1 shed and b0's room taken
    spoken.commit("web", 1)
    assert spoken.reserved_for("batch", {"b0", "b1"}, buffers) == {
        "w1": None,
        "b0": moved_to,
    }
    # and web's own later look is not held by its own earlier one
    assert spoken.reserved_for("web", {"w1"}, buffers) == {"b0": room}
    # a decision that sheds nothing (a minimum, a window, a pause) speaks for nothing
    spoken.record("web", found)
    spoken.commit("web", 0)
    assert spoken.reserved_for("batch", {"b0", "b1"}, buffers) == {"w1": room}

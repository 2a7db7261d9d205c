"""Room already spoken for on other groups' nodes: their buffers', the nodes they shed, and
the pods their scale-ins move there, which a group's own scale-in cannot count on (as
Cluster Autoscaler's placeholder pods and its one simulation for every group have it)."""

from __future__ import annotations

from dataclasses import replace

from nodescaler.domain.cluster.predicates import NodeTemplate, room_of
from nodescaler.domain.cluster.snapshot import Node, Placement, Pod, Resources, Snapshot
from nodescaler.domain.scale_down.spoken_for import SpokenFor, Taken
from nodescaler.domain.scale_down.unneeded import WOULD_NOT_FIT, Kept, unneeded_nodes

from tests.builders import T0

GIB = 2**30


def node(name: str, group: str) -> Node:
    return Node(name, group, True, True, Resources(4000, 16 * GIB, 110))


def pod(name: str, on: str, cpu: int = 1000) -> Pod:
    return Pod("default", name, on, Resources(cpu, GIB, 1))


def cores(count: int) -> Taken:
    return Taken(Resources(count * 1000, count * GIB, count))


# web's w1 runs one 1-core pod; batch's b0 is empty, b1 runs a 3-core pod
NODES = (node("w1", "web"), node("b0", "batch"), node("b1", "batch"))
SNAPSHOT = Snapshot(NODES, (pod("one", "w1"), pod("three", "b1", 3000)))
WEB = [NODES[0]]
STRANDED = ((), (Kept("w1", WOULD_NOT_FIT, ("default/one",)),))


def shed(reserved: dict[str, Taken | None]) -> tuple[tuple[str, ...], tuple[Kept, ...]]:
    found = unneeded_nodes(WEB, SNAPSHOT, now=T0, reserved=reserved)
    return found.nodes, found.kept


def test_a_pod_to_move_fits_only_in_room_no_other_group_spoke_for() -> None:
    # Given nothing spoken for, w1 goes: its pod fits on b0
    assert shed({}) == (("w1",), ())
    # When batch's buffer takes b0 whole and b1's last core, Then w1 stays
    assert shed({"b0": cores(4), "b1": cores(1)}) == STRANDED
    # and a node another group sheds (None) is no room either, b1's last core aside
    assert shed({"b0": None}) == (("w1",), ())
    assert shed({"b0": None, "b1": None}) == STRANDED


def test_a_node_other_groups_pods_move_to_stays_for_them() -> None:
    # Given batch's scale-in moving a pod onto web's w1, When web's unneeded nodes are
    # found, Then w1 is not one of them
    assert shed({"w1": cores(1)}) == ((), ())


def test_what_is_taken_is_a_difference_of_rooms_and_adds_up() -> None:
    room = room_of(NODES[1], ())
    after = room_of(NODES[1], [pod("a", "b0"), pod("b", "b0", 2000)])
    taken = Taken.between(room, after)
    assert taken == Taken(Resources(3000, 2 * GIB, 2))
    assert taken.plus(cores(1)).off(room).allocatable == Resources(0, 13 * GIB, 107)
    gpu = NodeTemplate("gpu", Resources(4000, GIB, 10), extended={"nvidia.com/gpu": 4})
    used = Taken(extended={"nvidia.com/gpu": 1})
    assert used.plus(used).off(gpu).extended == {"nvidia.com/gpu": 2}


def test_a_replica_another_groups_scale_in_moves_somewhere_keeps_the_next_off_it() -> None:
    # Given batch's scale-in moving a replica spread one a node onto b0 (a key it holds)
    spread = Placement(apart=frozenset({"anti-affinity default/zk"}))
    zk = Pod("default", "zk-1", "x", Resources(500, GIB, 1), placement=spread)
    moved = Taken.between(room_of(NODES[1], ()), room_of(NODES[1], [zk]))
    assert moved.holding == spread.apart
    # When web's own replica on w1 would move, Then b0 is no place for it: w1 stays
    replica = replace(zk, name="zk-2", node_name="w1")
    snapshot = replace(SNAPSHOT, pods=(replica, pod("full", "b1", 4000)))
    found = unneeded_nodes(WEB, snapshot, now=T0, reserved={"b0": moved})
    assert found.nodes == ()
    # and with nothing spoken for, it moves there
    assert unneeded_nodes(WEB, snapshot, now=T0).nodes == ("w1",)


def test_each_group_counts_the_others_decided_moves_and_buffers_not_its_own() -> None:
    spoken = SpokenFor()
    buffers = {"b0": cores(2), "w1": cores(2)}  # each group's buffer, on its own nodes
    # web, first: the batch buffer's room, not its own (its own check counts that)
    assert spoken.reserved_for("web", {"w1"}, buffers) == {"b0": cores(2)}
    # web finds w1 unneeded, its pod to move to b0 (the most room)
    found = unneeded_nodes(WEB, SNAPSHOT, now=T0)
    assert (found.nodes, found.moved) == (("w1",), (("w1", {"b0": cores(1)}),))
    spoken.record("web", found.nodes, found.moved)
    # found, not yet decided: nothing spoken for
    assert spoken.reserved_for("batch", {"b0", "b1"}, buffers) == {"w1": cores(2)}
    # Then, once web's decision sheds one node, batch finds w1 shed and b0's room taken
    spoken.commit("web", 1)
    assert spoken.reserved_for("batch", {"b0", "b1"}, buffers) == {"w1": None, "b0": cores(1)}
    # and a third group counts both web's pod and batch's buffer on b0
    assert spoken.reserved_for("db", set(), buffers)["b0"] == cores(3)
    # while web's own later look is not held by its own earlier one
    assert spoken.reserved_for("web", {"w1"}, buffers) == {"b0": cores(2)}
    # a decision that sheds nothing (a minimum, a window, a pause) speaks for nothing
    spoken.record("web", found.nodes, found.moved)
    spoken.commit("web", 0)
    assert spoken.reserved_for("batch", {"b0", "b1"}, buffers) == {"w1": cores(2)}


def test_room_a_scale_in_takes_on_its_own_nodes_is_spoken_for_too() -> None:
    # Given web's w1 and w2 each running one small pod, w2's moving onto w1 as w2 goes
    nodes = (node("w1", "web"), node("w2", "web"))
    snapshot = Snapshot(nodes, (pod("one", "w1", 500), pod("two", "w2", 500)))
    found = unneeded_nodes(list(nodes), snapshot, now=T0)
    spoken = SpokenFor()
    spoken.record("web", found.nodes, found.moved)
    spoken.commit("web", 1)
    # Then another group sees w1's room less the pod moved there, and the shed node gone
    (gone,) = found.nodes
    kept = "w1" if gone == "w2" else "w2"
    assert spoken.reserved_for("batch", set(), {}) == {
        gone: None,
        kept: Taken(Resources(500, GIB, 1)),
    }


def test_gpus_taken_are_counted_apart_and_a_missing_kind_counts_as_none() -> None:
    room = NodeTemplate("gpu", Resources(8000, 32 * GIB, 110), extended={"nvidia.com/gpu": 4})
    after = NodeTemplate("gpu", Resources(7000, 31 * GIB, 109), extended={"nvidia.com/gpu": 3})
    one = Taken.between(room, after)
    assert one == Taken(Resources(1000, GIB, 1), {"nvidia.com/gpu": 1})
    # nothing of a kind taken is no entry, and a kind one side lacks adds as none
    assert Taken.between(room, room) == Taken()
    assert Taken().plus(one) == one
    assert Taken().off(room) == room


def test_a_group_that_read_nothing_commits_nothing_and_others_records_are_all_counted() -> None:
    spoken = SpokenFor()
    spoken.commit("never-read", 2)
    assert spoken.reserved_for("web", set(), {}) == {}
    # Given web's scale-in decided before batch's, Then web still counts batch's
    found = unneeded_nodes(WEB, SNAPSHOT, now=T0)
    spoken.record("web", found.nodes, found.moved)
    spoken.commit("web", 1)
    spoken.record("batch", ("b0",), ())
    spoken.commit("batch", 1)
    assert spoken.reserved_for("web", {"w1"}, {}) == {"b0": None}


def test_a_group_shedding_the_node_its_buffer_was_placed_on_keeps_it_on_the_node_it_keeps() -> None:
    # Given spot's two empty nodes, its buffer a whole node's room (four one-core pods),
    # placed by the plan on s0 (the most room, then the name), and od's o1 half full
    spot = [node("s0", "spot"), node("s1", "spot")]
    od = [node("o1", "od")]
    snapshot = Snapshot((*spot, *od), (pod("one", "o1"), pod("two", "o1")))
    buffer = [Pod("nodescaler-buffer", f"b{n}", None, Resources(1000, GIB, 1)) for n in range(4)]
    placed = {"s0": cores(4)}
    spoken = SpokenFor()
    # When spot sheds s0 and keeps s1 whole for its buffer
    found = unneeded_nodes(spot, snapshot, now=T0, buffer=buffer)
    assert (found.nodes, found.rooms) == (("s0",), ("s1",))
    assert found.buffer_at == {"s0": Taken(), "s1": cores(4)}  # on what stays alone
    spoken.record("spot", found.nodes, found.moved, found.buffer_at)
    spoken.commit("spot", 1)
    # Then od sees s0 gone and s1 spoken for, and keeps o1: its pods have nowhere to go
    reserved = spoken.reserved_for("od", {"o1"}, placed)
    assert reserved == {"s0": None, "s1": cores(4)}
    assert unneeded_nodes(od, snapshot, now=T0, reserved=reserved).nodes == ()
    # while spot's decision to shed nothing leaves the plan's placement as it was
    spoken.record("spot", found.nodes, found.moved, found.buffer_at)
    spoken.commit("spot", 0)
    assert spoken.reserved_for("od", {"o1"}, placed) == placed


def test_a_group_shedding_fewer_than_its_unneeded_counts_its_buffer_once() -> None:
    # Given spot's three empty nodes, its buffer a whole node's room, placed by the plan on
    # s1; s0 and s1 unneeded, s2 kept for the buffer
    spot = [node("s0", "spot"), node("s1", "spot"), node("s2", "spot")]
    snapshot = Snapshot(tuple(spot), ())
    buffer = [Pod("nodescaler-buffer", f"b{n}", None, Resources(1000, GIB, 1)) for n in range(4)]
    found = unneeded_nodes(spot, snapshot, now=T0, buffer=buffer)
    assert (found.nodes, found.rooms) == (("s0", "s1"), ("s2",))
    spoken = SpokenFor()
    spoken.record("spot", found.nodes, found.moved, found.buffer_at)
    # When its decision sheds one of the two
    spoken.commit("spot", 1)
    # Then another group counts the buffer on s2 alone, not on s1 as well
    reserved = spoken.reserved_for("od", set(), {"s1": cores(4)})
    assert reserved == {"s0": None, "s1": Taken(), "s2": cores(4)}

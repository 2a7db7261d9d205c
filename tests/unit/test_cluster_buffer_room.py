"""A cluster CapacityBuffer's room, held as the group's own buffer's is
(`test_buffer_room`): the group's nodes its virtual pods sit on, bound there in the
snapshot or moved there off a node that goes, are marked as buffer room in every
evaluation, the group growing or not. Unmarked, the default scheduler's least-allocated
spread put pods smaller than the buffer's on the node bought for it, and it was bought
again."""

from __future__ import annotations

from dataclasses import replace

from nodescaler.domain.ahead.capacity_buffers import with_buffers
from nodescaler.domain.cluster.snapshot import ClusterBuffer, Pod, Resources, Snapshot
from nodescaler.domain.scale_down.leaving import awaiting_removal, removable
from nodescaler.domain.scale_down.marks import CANDIDATE_TAINT, ROOM_TAINT, mark_changes
from nodescaler.domain.scale_down.unneeded import held_for_buffers, unneeded_nodes
from nodescaler.domain.scaling.readings import MetricReading

from tests.builders import T0
from tests.unit.test_balance import NOW, PENDING, web_node
from tests.unit.test_buffer_room import GIB, IDS, WEB, node
from tests.unit.test_cluster_view import GROUP, Marks, view


def reports_buffer(*cpus: int) -> ClusterBuffer:
    """The reports team's CapacityBuffer: one virtual pod of each size (millicores)."""
    pods = tuple(
        Pod("reports", f"headroom-buffer-{n}", None, Resources(cpu, GIB, 1))
        for n, cpu in enumerate(cpus)
    )
    return ClusterBuffer("reports", "headroom", pods)


def running(name: str, on: str, cpu: int) -> Pod:
    return Pod("default", name, on, Resources(cpu, GIB, 1))


def test_the_group_nodes_a_capacity_buffers_pods_are_bound_to_are_its_room() -> None:
    # Given the group's e empty and g1 running a 3-core pod, and a CapacityBuffer of one
    # 3-core pod, bound to e (the one node with room for it)
    listed = Snapshot((node("e"), node("g1")), (running("big", "g1", 3000),))
    snapshot = with_buffers(replace(listed, buffers=(reports_buffer(3000),)))
    # When the group's unneeded nodes are found (none: each is three quarters requested)
    found = unneeded_nodes(list(snapshot.nodes), snapshot, now=T0)
    # Then e is the buffer's room, marked so that new pods take other room first
    assert found.nodes == ()
    assert found.rooms == ("e",)
    assert mark_changes(list(snapshot.nodes), frozenset(), frozenset(found.rooms)) == [
        ("e", ROOM_TAINT, True)
    ]
    # and without a CapacityBuffer no node is
    assert unneeded_nodes(list(listed.nodes), listed, now=T0).rooms == ()


def test_a_capacity_buffers_pod_moved_off_a_node_that_goes_holds_its_new_node() -> None:
    # Given e holding only the buffer's 1-core virtual pod and g1 a 1.5-core pod
    listed = Snapshot((node("e"), node("g1")), (running("one", "g1", 1500),))
    snapshot = with_buffers(replace(listed, buffers=(reports_buffer(1000),)))
    assert held_for_buffers(list(snapshot.nodes), snapshot) == ["e"]
    # When the group's unneeded nodes are found: e, the cheapest to empty, goes, its
    # virtual pod moved to g1
    found = unneeded_nodes(list(snapshot.nodes), snapshot, now=T0)
    assert found.nodes == ("e",)
    # Then the buffer's room is where it sits once e has gone
    assert found.rooms == ("g1",)


def test_the_nodes_a_capacity_buffer_sits_on_are_marked_whether_the_group_looked_or_not() -> None:
    # Given e marked as the group's buffer room an evaluation ago, and g1 holding a
    # CapacityBuffer's pod
    marked = [node("e", taints=(ROOM_TAINT,)), node("g1")]
    held = frozenset({"g1"})
    # When the group grows (its reading named no rooms), Then e keeps its mark and g1 is
    # marked too
    assert mark_changes(marked, frozenset(), None, held) == [("g1", ROOM_TAINT, True)]
    # and a held node the group lets go is a candidate, never a room
    assert mark_changes([node("g1")], frozenset({"g1"}), frozenset(), held) == [
        ("g1", CANDIDATE_TAINT, True)
    ]


def test_the_view_marks_a_capacity_buffers_room_when_the_group_reads_or_grows() -> None:
    # Given web-a-0 running a 2-core pod and web-a-1 empty, and a 3-core CapacityBuffer pod
    # (bound to web-a-1 once listed)
    nodes = (web_node("web-a", 0), web_node("web-a", 1))
    listed = Snapshot(nodes, (running("web", "web-a-0", 2000),), (), (reports_buffer(3000),))
    # When the group's pending-pods metric is read, Then its rooms name web-a-1
    reading = view(listed).read(PENDING, GROUP, NOW)
    assert isinstance(reading, MetricReading)
    assert reading.rooms == ("web-a-1",)
    # and when its evaluation marks with no rooms (it grows: no reading looked), web-a-1 is
    # marked all the same
    marks = Marks()
    view(listed, marks).mark_candidates(GROUP, frozenset(), NOW)
    assert marks.rooms == {"web-a-1": True}


def test_a_node_holding_only_a_capacity_buffers_pods_is_the_cheapest_to_let_go() -> None:
    # Given the group one node over its desired capacity: e holding only a CapacityBuffer's
    # 2-core virtual pod, marked as its room, and g1 a real 1-core pod; no drain hook
    listed = Snapshot((node("e", taints=(ROOM_TAINT,)), node("g1")), (running("one", "g1", 1000),))
    snapshot = with_buffers(replace(listed, buffers=(reports_buffer(2000),)))
    assert held_for_buffers(list(snapshot.nodes), snapshot) == ["e"]
    # When the node it lets go next is chosen: e, whose pods are virtual (no eviction; the
    # buffer's pod fits beside g1's), not g1, whose real pod would need a drain
    leaving = awaiting_removal(WEB, snapshot, 1)
    assert leaving == {"e"}
    # Then e is marked to leave, its room mark cleared, and the termination policy (which
    # lists no CapacityBuffer: e is empty to it) takes it; marked as room, it took neither
    # and none left, the group one over its desired capacity for good
    assert set(mark_changes(list(snapshot.nodes), leaving, None, frozenset({"e"}))) == {
        ("e", CANDIDATE_TAINT, True),
        ("e", ROOM_TAINT, False),
    }
    candidate = replace(listed, nodes=(node("e", taints=(CANDIDATE_TAINT,)), node("g1")))
    chosen = removable(WEB, [IDS["e"], IDS["g1"]], 1, candidate, now=T0)
    assert chosen.instance_ids == (IDS["e"],)
    assert chosen.undrained("no drain hook").instance_ids == (IDS["e"],)


def test_of_the_nodes_a_scale_in_may_simulate_the_one_holding_only_virtual_pods_comes_first() -> (
    None
):
    # Given e holding only a CapacityBuffer's 2-core virtual pod and g1 a real 1-core pod,
    # and room to simulate one node's moves
    listed = Snapshot((node("e"), node("g1")), (running("one", "g1", 1000),))
    snapshot = with_buffers(replace(listed, buffers=(reports_buffer(2000),)))
    # When the group's unneeded nodes are found, Then e goes, its virtual pod moved beside
    # g1's (no eviction), rather than g1, whose pod a drain would have to move
    found = unneeded_nodes(list(snapshot.nodes), snapshot, now=T0, limit=1)
    assert (found.nodes, found.rooms) == (("e",), ("g1",))


def test_the_room_this_evaluation_keeps_for_a_capacity_buffer_is_let_go_last() -> None:
    # Given e holding only a CapacityBuffer's 3-core virtual pod, and g1 and g2 a 1.5-core
    # pod each: g1's pod fits beside g2's, the buffer's nowhere but on e
    g2 = replace(node("g1"), name="g2", provider_id="aws:///eu-west-1a/i-000000000000000b2")
    listed = Snapshot(
        (node("e"), node("g1"), g2), (running("a", "g1", 1500), running("b", "g2", 1500))
    )
    snapshot = with_buffers(replace(listed, buffers=(reports_buffer(3000),)))
    found = unneeded_nodes(list(snapshot.nodes), snapshot, now=T0)
    assert found.nodes == ("g1",) and "e" in found.rooms
    # When the node the group lets go next is chosen, Then g1, never the buffer's room
    # (marked to leave, e would lose its mark and be taken as an empty node)
    web = replace(WEB, instance_ids=WEB.instance_ids | {"i-000000000000000b2"})
    assert awaiting_removal(web, snapshot, 1, frozenset(found.rooms)) == {"g1"}

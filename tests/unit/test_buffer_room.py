"""The group's buffer's room, held: the nodes the buffer sits on (an empty node kept whole
for it among them) are marked as buffer room, so new pods and those a scale-in moves
take other room first, as around Cluster Autoscaler's placeholder pods; taken last by the
termination policy, never marked as a deletion candidate, so the node the evaluation
meant goes, not the buffer's room (which the group would buy back a minute later)."""

from __future__ import annotations

from dataclasses import replace

from nodescaler.domain.cluster.snapshot import Node, Placement, Pod, Resources, Snapshot
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.scale_down.leaving import awaiting_removal, removable
from nodescaler.domain.scale_down.marks import (
    CANDIDATE_TAINT,
    ROOM_TAINT,
    mark_changes,
)
from nodescaler.domain.scale_down.unneeded import BUFFER, Kept, unneeded_nodes

from tests.builders import T0

GIB = 2**30
IDS = {"o": "i-000000000000000a0", "e": "i-000000000000000e0", "g1": "i-000000000000000b1"}
# the group's e and g1; o is another group's (a batch pool's) node
WEB = NodeGroup("web", 2, 0, 10, 2, instance_ids=frozenset({IDS["e"], IDS["g1"]}))


def node(name: str, group: str = "web", **fields: object) -> Node:
    return Node(
        name,
        group,
        True,
        True,
        Resources(4000, 16 * GIB, 110),
        provider_id=f"aws:///eu-west-1a/{IDS[name]}",
        **fields,  # type: ignore[arg-type]
    )


def buffer_of(cpu: int) -> tuple[Pod, ...]:
    """A capacity buffer's one virtual pod (`domain.ahead.group_buffers`)."""
    return (Pod("nodescaler-buffer", "buffer-0-0", None, Resources(cpu, GIB, 1)),)


def cluster(*, room_marked: bool) -> Snapshot:
    """The group's empty e, its g1 with one 1-core pod that runs on the other group's o
    (its pool's); e marked as buffer room or not."""
    e = node("e", taints=(ROOM_TAINT,) if room_marked else ())
    nodes = (node("o", group="batch", labels={"pool": "batch"}), e, node("g1"))
    batch_only = Placement(node_selector={"pool": "batch"})
    return Snapshot(
        nodes, (Pod("default", "one", "g1", Resources(1000, GIB, 1), placement=batch_only),)
    )


def test_an_empty_node_the_buffer_needs_whole_is_named_as_its_room() -> None:
    # Given the buffer wants a whole free node
    snapshot = cluster(room_marked=False)
    group_nodes = [n for n in snapshot.nodes if n.group == "web"]
    # When the group's unneeded nodes are found
    result = unneeded_nodes(group_nodes, snapshot, buffer=buffer_of(4000), now=T0)
    # Then e stays as the buffer's room, and g1 goes, its pod to move
    assert result.kept == (Kept("e", BUFFER, ()),)
    assert result.rooms == ("e",)
    assert result.nodes == ("g1",)
    # and a buffer that fits beside keeps no empty room: the node it sits on is its room
    assert unneeded_nodes(group_nodes, snapshot, buffer=buffer_of(1000), now=T0).rooms == ("g1",)


def test_a_scale_in_of_one_takes_the_node_meant_not_the_room_marked_for_the_buffer() -> None:
    # Given e marked as the buffer's room and g1, whose pod fits on o
    marked = cluster(room_marked=True)
    # When the termination policy is asked for one
    chosen = removable(WEB, [IDS["e"], IDS["g1"]], 1, marked, now=T0)
    # Then g1 goes (its pod moved by the drain), not the empty e
    assert chosen.instance_ids == (IDS["g1"],)
    assert chosen.busy == (IDS["g1"],)
    # while unmarked, the empty node is the cheapest to take, as before
    unmarked = removable(WEB, [IDS["e"], IDS["g1"]], 1, cluster(room_marked=False), now=T0)
    assert unmarked.instance_ids == (IDS["e"],)
    # and asked for both, the room goes too, last
    both = removable(WEB, [IDS["e"], IDS["g1"]], 2, marked, now=T0)
    assert both.instance_ids == (IDS["g1"], IDS["e"])
    assert both.busy == (IDS["g1"],)


def test_the_nodes_marked_to_leave_next_pass_over_the_buffers_room() -> None:
    # Given a group one node over its desired capacity
    snapshot = cluster(room_marked=False)
    # When the nodes it lets go next are marked, e named as the room (or marked so)
    assert awaiting_removal(WEB, snapshot, 1, frozenset({"e"})) == {"g1"}
    assert awaiting_removal(WEB, cluster(room_marked=True), 1) == {"g1"}
    # Then g1 is, not e; without a room the cheapest to empty (e) is, as before
    assert awaiting_removal(WEB, snapshot, 1) == {"e"}


def test_the_room_is_marked_while_the_buffer_sits_on_it() -> None:
    group_nodes = [node("e"), node("g1")]
    # While g1 leaves: g1 a deletion candidate, e the buffer's room
    assert sorted(mark_changes(group_nodes, frozenset({"g1"}), frozenset({"e"}))) == [
        ("e", ROOM_TAINT, True),
        ("g1", CANDIDATE_TAINT, True),
    ]
    # With none leaving, the room keeps its mark: pods land on other room first
    marked = [replace(group_nodes[0], taints=(ROOM_TAINT,)), group_nodes[1]]
    assert mark_changes(marked, frozenset(), frozenset({"e"})) == []
    # and once the buffer no longer sits on it, its mark is cleared
    assert mark_changes(marked, frozenset(), frozenset()) == [("e", ROOM_TAINT, False)]
    # and a room the group lets go after all (nothing else could go) is a candidate, its
    # room mark cleared: a node waiting to leave is never left unmarked
    assert set(mark_changes(marked, frozenset({"e"}), frozenset({"e"}))) == {
        ("e", CANDIDATE_TAINT, True),
        ("e", ROOM_TAINT, False),
    }
    # the room as marked already when the evaluation did not look (None)
    assert mark_changes(marked, frozenset({"g1"}), None) == [("g1", CANDIDATE_TAINT, True)]
    # and nothing changes where the marks are right already
    both = [
        replace(group_nodes[0], taints=(ROOM_TAINT,)),
        replace(group_nodes[1], taints=(CANDIDATE_TAINT,)),
    ]
    assert mark_changes(both, frozenset({"g1"}), frozenset({"e"})) == []


def test_a_busy_node_the_buffer_sits_on_is_its_room() -> None:
    # Given the group's g1 running a 1-core pod, its e empty, and a buffer of two 1.5-core
    # pods: e goes (the buffer fits beside g1's pod), and the buffer sits on g1
    one = Pod("default", "one", "g1", Resources(1000, GIB, 1), placement=Placement())
    snapshot = Snapshot((node("e"), node("g1")), (one,))
    two = tuple(
        Pod("nodescaler-buffer", f"buffer-0-{i}", None, Resources(1500, GIB, 1)) for i in (0, 1)
    )
    found = unneeded_nodes(list(snapshot.nodes), snapshot, now=T0, buffer=two)
    assert found.nodes == ("e",)
    # Then g1 is its room, marked so that new pods take other room first and the
    # buffer's stays whole (a node left with a fraction no buffer pod fits is bought again)
    assert found.rooms == ("g1",)
    assert mark_changes(list(snapshot.nodes), frozenset(found.nodes), frozenset(found.rooms)) == [
        ("e", CANDIDATE_TAINT, True),
        ("g1", ROOM_TAINT, True),
    ]


def test_the_pods_a_drain_moves_never_count_on_the_room_marked_for_the_buffer() -> None:
    # Given e marked as room and g1, whose pod could run on no other node but e
    e = node("e", taints=(ROOM_TAINT,))
    snapshot = Snapshot((e, node("g1")), (Pod("default", "one", "g1", Resources(1000, GIB, 1)),))
    # When a scale-in asks for two
    chosen = removable(WEB, [IDS["e"], IDS["g1"]], 2, snapshot, now=T0)
    # Then only the room goes: g1's pod would have had nowhere to go with e gone too
    assert chosen.instance_ids == (IDS["e"],)
    assert chosen.reason.startswith("1 of 2 asked: 0 never Ready; ")
    assert chosen.reason.endswith("; 1 empty kept as the buffer's room, taken last")


def test_a_room_marked_node_that_took_pods_since_is_offered_as_any_other() -> None:
    # Given e marked as room an evaluation ago, now running a small pod, and g1 full
    e = node("e", taints=(ROOM_TAINT,))
    pods = (
        Pod("default", "small", "e", Resources(500, GIB, 1)),
        Pod("default", "big", "g1", Resources(3500, GIB, 1)),
    )
    snapshot = Snapshot((node("o", group="batch"), e, node("g1")), pods)
    # When a scale-in asks for one, Then e goes, its pod moved to o (by a drain: busy), as
    # unmarked it would
    chosen = removable(WEB, [IDS["e"], IDS["g1"]], 1, snapshot, now=T0)
    assert (chosen.instance_ids, chosen.busy) == ((IDS["e"],), (IDS["e"],))
    # and, one over its desired capacity, it is the one marked to leave next
    assert awaiting_removal(WEB, snapshot, 1) == {"e"}


def test_without_a_drain_the_buffers_room_never_stands_in_for_the_busy_node() -> None:
    # Given e marked as room and g1, whose pod can move, chosen by a scale-in of one
    chosen = removable(WEB, [IDS["e"], IDS["g1"]], 1, cluster(room_marked=True), now=T0)
    # When no drain can move g1's pod
    undrained = chosen.undrained("no drain hook")
    # Then nothing goes now: taking the room instead was the churn this mark ends
    assert undrained.instance_ids == ()


def test_a_group_shedding_its_last_free_nodes_marks_the_room_to_leave_when_nothing_else_can() -> (
    None
):
    # Given g1 protected from scale-in, so that e is all the group can let go
    protected = replace(WEB, protected_ids=frozenset({IDS["g1"]}))
    # When one over its desired capacity, Then e is marked to leave: a candidate, its room
    # mark cleared, never a node waiting to leave and left unmarked
    leaving = awaiting_removal(protected, cluster(room_marked=True), 1)
    assert leaving == {"e"}
    marked = [n for n in cluster(room_marked=True).nodes if n.group == "web"]
    assert set(mark_changes(marked, leaving, None)) == {
        ("e", CANDIDATE_TAINT, True),
        ("e", ROOM_TAINT, False),
    }

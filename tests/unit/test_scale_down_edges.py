"""Scale-down candidates at their edges: a node with no pods at all, and memory its
DaemonSets take judged as Cluster Autoscaler judges it."""

from __future__ import annotations

from nodescaler.domain.cluster.snapshot import Pod, Resources

from tests.unit.test_scale_down import GIB, node, pod, spare


def test_a_node_without_a_single_pod_is_unneeded() -> None:
    assert spare([node("a"), node("b")], [pod("app", "b")]) == ("a",)


def test_memory_its_daemon_sets_take_is_no_room_to_call_a_node_underused() -> None:
    agent = Pod("kube-system", "agent", "a", Resources(100, 8 * GIB, 1), daemon_set=True)
    app = Pod("default", "app", "a", Resources(100, 5 * GIB, 1))  # 5 of the 8 GiB left
    busy = pod("busy", "b", 9000)  # b: 9 of 16 cores, room for the app but no candidate
    assert spare([node("a"), node("b", cpu=16_000)], [agent, app, busy]) == ()

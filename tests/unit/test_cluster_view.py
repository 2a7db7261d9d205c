"""The evaluator's view of the cluster returns what a read found, the deletion candidates
with the reading, and keeps none of it for a later call: the marks follow the candidates
they are given, whoever read them."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from nodescaler.domain.cluster.snapshot import Placement, Snapshot, Taint
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.scale_down.marks import CANDIDATE_TAINT, ROOM_TAINT
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler.service.pending_pods import PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import metric, policy, queue_metric, reservation_metric
from tests.unit.test_balance import (
    CHAIN,
    ENABLED,
    NOW,
    PENDING,
    Cluster,
    Groups,
    M5Xlarge,
    pods,
    web_node,
)

GROUP = NodeGroup("web-a", 3, 0, 10, 3, tags=ENABLED, eks_cluster="prod", eks_nodegroup="web-a")


class Marks:
    def __init__(self) -> None:
        self.marked: dict[str, bool] = {}  # the deletion candidate's taint
        self.rooms: dict[str, bool] = {}  # the buffer room's

    def mark(self, node: str, taint: Taint, marked: bool) -> None:
        assert taint in (CANDIDATE_TAINT, ROOM_TAINT)
        (self.marked if taint == CANDIDATE_TAINT else self.rooms)[node] = marked


def jobs_group(nodes: int) -> NodeGroup:
    """A queue's group of `nodes` nodes, under the `jobs` policy (no PendingPods metric)."""
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "jobs"}
    return NodeGroup(
        "jobs", nodes, 0, 10, nodes, tags=tags, eks_cluster="prod", eks_nodegroup="jobs"
    )


def view(snapshot: Snapshot, marks: Marks | None = None) -> KubernetesClusterView:
    planner = PendingPodsPlanner(
        Groups([GROUP]),
        PolicyBook({"web": policy(PENDING, name="web")}, TagNames()),
        M5Xlarge(),
        CHAIN,
    )
    return KubernetesClusterView(Cluster(snapshot), pending=planner, marks=marks)


def test_given_empty_nodes_the_reading_names_them_and_marks_follow_only_what_is_given() -> None:
    # Given web-a's three Ready nodes, nothing pending and nothing running; web-a-2 carries
    # the candidate taint from an earlier evaluation
    nodes = [web_node("web-a", 0), web_node("web-a", 1), web_node("web-a", 2)]
    nodes[2] = replace(nodes[2], taints=(CANDIDATE_TAINT,))
    snapshot = Snapshot(tuple(nodes), ())

    # When the pending-pods metric is read
    reading = view(snapshot).read(PENDING, GROUP, NOW)

    # Then the reading itself names the nodes nothing needs: the deletion candidates
    assert isinstance(reading, MetricReading)
    assert (reading.value, reading.unneeded_nodes, reading.empty_nodes) == (0, 3, 3)
    assert sorted(reading.candidates) == ["web-a-0", "web-a-1", "web-a-2"]

    # And a view that never read marks exactly the candidates it is given
    marks = Marks()
    view(snapshot, marks).mark_candidates(GROUP, frozenset({"web-a-0"}), NOW)
    assert marks.marked == {"web-a-0": True, "web-a-2": False}
    # given none (scale-in paused, or no pending-pods vote), it unmarks the group's nodes
    marks = Marks()
    view(snapshot, marks).mark_candidates(GROUP, frozenset(), NOW)
    assert marks.marked == {"web-a-2": False}


def test_given_a_scale_up_since_the_shared_plan_then_a_second_read_asks_nothing_more() -> None:
    # Given web-a at 1 Ready node and 8 one-core pods pending (three m5.xlarge more), read by
    # one evaluation, which then resized the group to 4 (its nodes still booting)
    from tests.unit.test_balance import pods

    at_one = replace(GROUP, desired=1, in_service=1)
    groups = Groups([at_one])
    planner = PendingPodsPlanner(
        groups, PolicyBook({"web": policy(PENDING, name="web")}, TagNames()), M5Xlarge(), CHAIN
    )
    snapshot = Snapshot((web_node("web-a", 0),), tuple(pods(8)))
    cluster = KubernetesClusterView(Cluster(snapshot), pending=planner)
    first = cluster.read(PENDING, at_one, NOW)
    assert isinstance(first, MetricReading) and first.value == 3
    resized = replace(at_one, desired=4)
    groups.groups = [resized]
    # When the fast path's request brings a second evaluation within the snapshot's life
    second = cluster.read(PENDING, resized, NOW)
    # Then it plans afresh: the three booting nodes take the pods, nothing more is asked
    assert isinstance(second, MetricReading) and second.value == 0


def test_given_a_request_made_after_the_listing_then_its_read_lists_the_cluster_again() -> None:
    # Given web-a at 1 Ready node, read at 09:00 with nothing pending
    from tests.unit.test_balance import pods

    at_one = replace(GROUP, desired=1, in_service=1)
    planner = PendingPodsPlanner(
        Groups([at_one]),
        PolicyBook({"web": policy(PENDING, name="web")}, TagNames()),
        M5Xlarge(),
        CHAIN,
    )
    cluster = Cluster(Snapshot((web_node("web-a", 0),), ()))
    view = KubernetesClusterView(cluster, pending=planner)
    first = view.read(PENDING, at_one, NOW)
    assert isinstance(first, MetricReading) and first.value == 0
    # and 8 one-core pods pending from 09:00:05, which a fast-path look saw then
    cluster.listed = Snapshot((web_node("web-a", 0),), tuple(pods(8)))
    later = NOW + timedelta(seconds=6)
    # When its request is evaluated at 09:00:06, within the listing's life
    view.listed_since(NOW + timedelta(seconds=5))
    second = view.read(PENDING, at_one, later)
    # Then the read holds the pods the look saw: three nodes more
    assert isinstance(second, MetricReading) and second.value == 3


def test_given_a_queue_group_beside_a_pending_pods_group_then_each_reads_its_own_pods() -> None:
    """A group whose policy has no PendingPods metric joins the shared plan: its workers
    are its own pending pods, and the web group's pods stay the web group's."""
    jobs = jobs_group(1)
    jobs_node = web_node("jobs", 0)
    jobs_node = replace(jobs_node, labels={**jobs_node.labels, "tier": "jobs", "pool": "jobs"})
    # Given 6 workers that only a jobs node takes, and 4 web pods that only a web node takes
    workers = [
        replace(p, placement=Placement(node_selector={"pool": "jobs"}))
        for p in pods(6, prefix="worker")
    ]
    web = [replace(p, placement=Placement(node_selector={"tier": "web"})) for p in pods(4)]
    snapshot = Snapshot((web_node("web-a", 0), jobs_node), (*workers, *web))
    book = PolicyBook(
        {"web": policy(PENDING, name="web"), "jobs": policy(queue_metric(), name="jobs")},
        TagNames(),
    )
    planner = PendingPodsPlanner(Groups([GROUP, jobs]), book, M5Xlarge(), CHAIN)
    cluster = KubernetesClusterView(Cluster(snapshot), pending=planner)
    # When the jobs group's own pending pods and the web group's metric are read
    own = cluster.own_pending_pods(jobs, NOW)
    read = cluster.read(PENDING, GROUP, NOW)
    # Then the workers give the jobs group 2 more nodes (3 of 1 core fit a 3.92-core node),
    # and the web group's reading counts only its 4 pods (on its 2 nodes on their way)
    assert isinstance(own, MetricReading) and isinstance(read, MetricReading)
    assert (own.value, own.pending_pods) == (2, 6)
    assert own.unneeded_nodes is None  # never a vote to shed
    assert (read.value, read.pending_pods) == (0, 4)


def test_given_a_queue_groups_nodes_empty_and_nothing_pending_then_its_own_pods_count_them() -> (
    None
):
    """Its own pending pods never vote to shed, but say which nodes have nothing to drain:
    those leave past the default scale-down rate once the queue sheds them."""
    jobs = jobs_group(3)
    # Given three Ready jobs nodes, one running a worker, and nothing pending
    nodes = [web_node("jobs", i) for i in range(3)]
    (worker,) = [
        replace(p, node_name=nodes[0].name, phase="Running", unschedulable=False)
        for p in pods(1, prefix="worker")
    ]
    book = PolicyBook({"jobs": policy(queue_metric(), name="jobs")}, TagNames())
    planner = PendingPodsPlanner(Groups([jobs]), book, M5Xlarge(), CHAIN)
    idle = KubernetesClusterView(Cluster(Snapshot(tuple(nodes), (worker,))), pending=planner)
    # When its own pending pods are read
    own = idle.own_pending_pods(jobs, NOW)
    # Then two nodes are empty of pods, and none is a vote to shed
    assert isinstance(own, MetricReading)
    assert (own.value, own.empty_nodes, own.unneeded_nodes) == (0, 2, None)
    # named, empty ones first as every pending-pods reading names them: each is timed
    # (`unneeded_time`), and the first `empty_nodes` are the empty ones
    assert own.candidates == (nodes[1].name, nodes[2].name)
    # And the one worker needs one node: no scale-in goes below it
    assert own.needed_nodes == 1
    # And with a worker pending that a jobs node would take, no node counts as empty
    waiting = pods(1, prefix="waiting")
    busy = KubernetesClusterView(
        Cluster(Snapshot(tuple(nodes), (worker, *waiting))), pending=planner
    )
    pending = busy.own_pending_pods(jobs, NOW)
    assert isinstance(pending, MetricReading) and pending.empty_nodes in (None, 0)
    assert pending.candidates == ()  # none timed: their times start again


def test_a_group_with_more_in_service_than_desired_marks_the_nodes_it_lets_go_next() -> None:
    # Given a self-managed group of five in service now desired at two (the termination
    # policy waits for their workers to finish): three workers on jobs-0, one on jobs-1 and
    # on jobs-2, none on jobs-3, jobs-1's instance protected from scale-in, jobs-4 cordoned
    # (being drained) and i-5 launched with no node yet
    nodes = [replace(web_node("jobs", i), provider_id=f"aws:///eu-west-1a/i-{i}") for i in range(5)]
    nodes[4] = replace(nodes[4], schedulable=False)
    workers = pods(5, prefix="worker")
    on = ["jobs-0", "jobs-0", "jobs-0", "jobs-1", "jobs-2"]
    running = tuple(
        replace(p, node_name=n, phase="Running", unschedulable=False)
        for p, n in zip(workers, on, strict=True)
    )
    group = replace(
        jobs_group(5),
        eks_cluster=None,
        eks_nodegroup=None,
        instance_ids=frozenset(f"i-{i}" for i in range(5)),
        protected_ids=frozenset({"i-1"}),
    )
    # beside another group's empty node, never marked for this one
    snapshot = Snapshot((*nodes, web_node("web-a", 0)), running)
    marks = Marks()
    # When the evaluation marks its candidates (none from a pending-pods reading), three
    # over its desired capacity
    view(snapshot, marks).mark_candidates(group, frozenset(), NOW, excess=3)
    # Then the three it lets go next, cheapest to empty, schedulable and not protected,
    # are marked, so new workers land on the others and these empty
    assert marks.marked == {"jobs-3": True, "jobs-2": True, "jobs-0": True}
    # and an instance with no Ready node goes first: one fewer Ready node is marked
    booting = replace(group, instance_ids=group.instance_ids | {"i-5"})
    marks = Marks()
    view(snapshot, marks).mark_candidates(booting, frozenset(), NOW, excess=3)
    assert marks.marked == {"jobs-3": True, "jobs-2": True}
    # one over: the cheapest alone; one over with one booting: none of its Ready nodes
    for excess, instances, marked in ((1, group, {"jobs-3": True}), (1, booting, {})):
        marks = Marks()
        view(snapshot, marks).mark_candidates(instances, frozenset(), NOW, excess=excess)
        assert marks.marked == marked, (excess, marked)
    # and with no excess, the marks are cleared
    tainted = {"jobs-2", "jobs-3"}
    left = tuple(replace(n, taints=(CANDIDATE_TAINT,)) if n.name in tainted else n for n in nodes)
    marks = Marks()
    view(Snapshot(left, running), marks).mark_candidates(group, frozenset(), NOW)
    assert marks.marked == {"jobs-2": False, "jobs-3": False}


def test_a_reservation_counts_the_pods_waiting_for_the_groups_room() -> None:
    # Given web-a's two Ready nodes full (three one-core pods each on 3.92 cores) and a
    # third on its way (desired 3), and three more pods pending, which the plan gives the
    # node on its way
    nodes = (web_node("web-a", 0), web_node("web-a", 1))
    bound = [
        replace(p, node_name=f"web-a-{i // 3}", phase="Running", unschedulable=False)
        for i, p in enumerate(pods(6, prefix="bound"))
    ]
    snapshot = Snapshot(nodes, (*bound, *pods(3)))
    [cpu] = policy(reservation_metric("cpu", 75)).spec.metrics
    # When its reservation is read
    reading = view(snapshot).read(cpu, replace(GROUP, in_service=2), NOW)
    # Then the pods waiting count as requested: 9 cores of 7.84, not 6 (76.5 %, within a
    # 75 % target's tolerance, where the node on its way leaves no room for the next)
    assert isinstance(reading, MetricReading)
    assert reading.detail == (
        "9 pods (3 waiting for its room) request 9 of 7.84 cores on 2 nodes, 2 with no room "
        "for another of its pods (the least asks 1 core), counted full (138.3%)"
    )
    # With no node on its way, the pods the plan puts on new nodes count the same
    steady = replace(GROUP, desired=2, in_service=2)
    planned = planned_view(snapshot, steady, PENDING).read(cpu, steady, NOW)
    assert isinstance(planned, MetricReading) and planned.value == reading.value
    # Pods below the cutoff of the group's own PendingPods metric may wait: not counted
    low = Snapshot(nodes, (*bound, *(replace(p, priority=-5) for p in pods(3))))
    waits = metric({"type": "PendingPods", "pendingPods": {"expendablePriorityCutoff": 0}})
    alone = planned_view(low, steady, waits).read(cpu, steady, NOW)
    assert isinstance(alone, MetricReading) and alone.detail.startswith("6 pods request 6 of")


def planned_view(snapshot: Snapshot, group: NodeGroup, pending: object) -> KubernetesClusterView:
    """A view of `group` alone, under a `web` policy of the `pending` metric."""
    book = PolicyBook({"web": policy(pending, name="web")}, TagNames())
    planner = PendingPodsPlanner(Groups([group]), book, M5Xlarge(), CHAIN)
    return KubernetesClusterView(Cluster(snapshot), pending=planner)


def test_room_expendable_pods_hold_is_free_to_a_reservation_and_a_buffer() -> None:
    # Given web-a's two Ready nodes, one with a one-core pod, and three one-core filler
    # pods below the cutoff (-10) filling the other's room but a sliver
    nodes = (web_node("web-a", 0), web_node("web-a", 1))
    running = [replace(p, node_name="web-a-0", phase="Running") for p in pods(1)]
    filler = [
        replace(p, node_name="web-a-1", phase="Running", unschedulable=False, priority=-20)
        for p in pods(3, prefix="filler")
    ]
    running = [replace(p, unschedulable=False) for p in running]
    snapshot = Snapshot(nodes, (*running, *filler))
    steady = replace(GROUP, desired=2, in_service=2)
    [cpu] = policy(reservation_metric("cpu", 75)).spec.metrics
    # When its reservation is read: the filler's room is free, not taken
    reading = planned_view(snapshot, steady, PENDING).read(cpu, steady, NOW)
    assert isinstance(reading, MetricReading)
    assert reading.detail == "1 pods request 1 of 7.84 cores on 2 nodes (12.8%)"
    # And a buffer of five one-core pods fits in the room (a node's whole, and the other's
    # less the pod it runs), where with the filler counted it would ask for a node
    buffered = {
        "type": "PendingPods",
        "pendingPods": {"buffer": [{"pods": 5, "requests": {"cpu": "1"}}]},
    }
    [pending] = policy(buffered).spec.metrics
    read = planned_view(snapshot, steady, buffered).read(pending, steady, NOW)
    assert isinstance(read, MetricReading) and read.detail is not None
    assert "5 of 5 fit now" in read.detail, read.detail

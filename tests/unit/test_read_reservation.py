"""The CapacityReservation metric's reading of a group from the cluster
(`domain.cluster.reservation.read_reservation`): its pods' requests, and those of the pods
waiting for its room, over its Ready, schedulable nodes' allocatable, a share or an amount
as the target asks; 0 at zero nodes, unavailable when it runs nodes none of which is
registered, or a pod cannot be read."""

from __future__ import annotations

from dataclasses import replace

from nodescaler.domain.cluster.reservation import read_reservation
from nodescaler.domain.cluster.snapshot import Pod, Resources, Snapshot
from nodescaler.domain.policy import CapacityReservationMetric
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable

from tests.builders import T0, policy, reservation_metric
from tests.unit.test_buffer_room import GIB, WEB, node

MIB = 2**20


def metric(target: dict[str, object] | None = None) -> CapacityReservationMetric:
    written = reservation_metric("cpu", 60)
    if target is not None:
        written["target"] = target
    [found] = policy(written).spec.metrics
    assert isinstance(found, CapacityReservationMetric)
    return found


def pod(name: str, on: str | None, cpu: int) -> Pod:
    return Pod("default", name, on, Resources(cpu, GIB, 1))


# the group's e and g1 (4 cores each) and another group's o, whose pod is not the group's
CLUSTER = Snapshot(
    (node("e"), node("g1"), node("o", group="batch")),
    (pod("a", "e", 1000), pod("b", "g1", 2000), pod("c", "o", 4000), pod("waiting", None, 500)),
)


def test_the_share_of_its_ready_nodes_its_pods_request() -> None:
    reading = read_reservation(metric(), WEB, CLUSTER, T0)
    assert isinstance(reading, MetricReading)
    assert (reading.value, reading.measured_nodes, reading.at) == (37.5, 2, T0)
    assert reading.detail == "2 pods request 3 of 8 cores on 2 nodes (37.5%)"


def test_pods_waiting_for_the_groups_room_count_as_requested() -> None:
    # a ramp fills each node as it comes: counted alone, full nodes read about 89 % and ask
    # one node at a time while more pods wait; the pods waiting count as if bound
    waiting = [pod("w1", None, 2000), pod("w2", None, 3000)]
    reading = read_reservation(metric(), WEB, CLUSTER, T0, waiting=waiting)
    assert isinstance(reading, MetricReading)
    assert (reading.value, reading.measured_nodes) == (100.0, 2)
    assert (
        reading.detail == "4 pods (2 waiting for its room) request 8 of 8 cores on 2 nodes (100.0%)"
    )
    broken = replace(waiting[0], problem="requests.cpu: 'x' is not a quantity")
    assert isinstance(
        read_reservation(metric(), WEB, CLUSTER, T0, waiting=[broken]), MetricUnavailable
    )


def test_an_average_value_target_reads_the_amount_in_cores() -> None:
    target = {"type": "AverageValue", "averageValue": 2}
    reading = read_reservation(metric(target), WEB, CLUSTER, T0)
    assert isinstance(reading, MetricReading)
    assert (reading.value, reading.measured_nodes) == (3.0, None)


def test_at_zero_nodes_it_reads_0_above_zero_without_a_node_it_is_unavailable() -> None:
    empty = Snapshot((node("o", group="batch"),), ())
    at_zero = read_reservation(metric(), replace(WEB, desired=0), empty, T0)
    assert isinstance(at_zero, MetricReading)
    assert (at_zero.value, at_zero.detail) == (0, "web is at zero nodes")
    missing = read_reservation(metric(), WEB, empty, T0)
    assert missing == MetricUnavailable(
        reason="node group web: no Ready, schedulable node is registered"
    )


def test_a_pod_that_cannot_be_read_makes_it_unavailable_naming_the_pod() -> None:
    bad = replace(pod("broken", "e", 0), problem="requests: cpu: '1x' is not a quantity")
    reading = read_reservation(metric(), WEB, replace(CLUSTER, pods=(*CLUSTER.pods, bad)), T0)
    assert reading == MetricUnavailable(
        reason="node group web: pod default/broken: requests: cpu: '1x' is not a quantity"
    )


def test_its_average_pod_is_the_workloads_daemon_sets_and_mirror_pods_aside() -> None:
    # Given a DaemonSet's and a mirror pod beside the 1- and 2-core pods, and one waiting
    agent = replace(pod("agent", "e", 500), daemon_set=True)
    static = replace(pod("static", "g1", 500), mirror=True)
    cluster = Snapshot(CLUSTER.nodes, (*CLUSTER.pods, agent, static))
    waiting = [pod("w1", None, 3000)]
    reading = read_reservation(metric(), WEB, cluster, T0, waiting=waiting)
    # Then the value counts every request (7 of 8 cores; g1's last 1.5 cores fit its
    # smallest pod, so they are room), its average pod the workload's: 2 cores
    assert isinstance(reading, MetricReading)
    assert (reading.value, reading.pod_share) == (87.5, 25.0)
    # and a reading of no workload pod, or of an amount, has none
    bare = read_reservation(metric(), WEB, Snapshot(CLUSTER.nodes, (agent,)), T0)
    amount = read_reservation(metric({"type": "Value", "value": 2}), WEB, CLUSTER, T0)
    assert isinstance(bare, MetricReading) and isinstance(amount, MetricReading)
    assert (bare.pod_share, amount.pod_share) == (None, None)


def test_a_nodes_last_sliver_too_small_for_the_groups_pod_counts_as_taken() -> None:
    # Given three 4 GiB pods and a 320 MiB DaemonSet's pod on a 16 GiB node (77 %
    # requested, 3.69 GiB left: no room for a fourth), and a 4 GiB pod on another
    [memory] = policy(reservation_metric("memory", 70)).spec.metrics
    assert isinstance(memory, CapacityReservationMetric)
    java = [Pod("default", f"java-{n}", "e", Resources(500, 4 * GIB, 1)) for n in range(3)]
    agent = replace(Pod("kube-system", "agent", "e", Resources(100, 320 * MIB, 1)), daemon_set=True)
    roomy = Pod("default", "java-3", "g1", Resources(500, 4 * GIB, 1))
    cluster = Snapshot(CLUSTER.nodes[:2], (*java, agent, roomy))
    reading = read_reservation(memory, WEB, cluster, T0)
    # Then the full node's sliver counts as taken: 16.31 GiB requested and 3.69 GiB
    # stranded of 32 (62.5 %, where the requests alone read 51 %)
    assert isinstance(reading, MetricReading)
    assert reading.value == 62.5
    assert reading.detail == (
        "5 pods request 16.3125 of 32 GiB on 2 nodes, 1 with no room for another of its pods "
        "(the least asks 4 GiB), counted full (62.5%)"
    )
    # and a sliver as large as the pod is room
    ample = replace(agent, requests=Resources(100, 0, 1))
    spacious = read_reservation(memory, WEB, Snapshot(CLUSTER.nodes[:2], (*java, ample, roomy)), T0)
    assert isinstance(spacious, MetricReading) and spacious.value == 50.0


def test_a_sliver_is_measured_by_the_smallest_pod_and_only_where_the_group_runs_one() -> None:
    # Given e with a 3-core pod (1 core left) and g1 empty but for a DaemonSet's 3.5 cores
    big = pod("big", "e", 3000)
    agent = replace(pod("agent", "g1", 3500), daemon_set=True)
    alone = read_reservation(metric(), WEB, Snapshot(CLUSTER.nodes[:2], (big, agent)), T0)
    # Then e's last core, too small for the 3-core pod, counts taken; g1's half core, on a
    # node none of the group's pods runs on, does not
    assert isinstance(alone, MetricReading) and alone.value == 100 * (3 + 3.5 + 1) / 8
    # and beside a 1-core pod, e's last core fits the smallest: room
    small = pod("small", "g1", 1000)
    agent_less = replace(agent, requests=Resources(2000, GIB, 1))
    both = read_reservation(
        metric(), WEB, Snapshot(CLUSTER.nodes[:2], (big, agent_less, small)), T0
    )
    assert isinstance(both, MetricReading) and both.value == 100 * (3 + 2 + 1) / 8


def test_expendable_pods_are_left_out_only_beside_a_pod_that_would_take_their_room() -> None:
    # Given a 1-core pod at priority 0 and a 2-core one at -20, cutoff -10
    low = replace(pod("filler", "g1", 2000), priority=-20)
    web = pod("web", "e", 1000)
    nodes = CLUSTER.nodes[:2]
    with_web = read_reservation(metric(), WEB, Snapshot(nodes, (web, low)), T0, expendable=-10)
    alone = read_reservation(metric(), WEB, Snapshot(nodes, (low,)), T0, expendable=-10)
    # Then the filler's room is free beside the web pod; alone, it counts as ever
    assert isinstance(with_web, MetricReading) and with_web.value == 12.5
    assert isinstance(alone, MetricReading) and alone.value == 25.0

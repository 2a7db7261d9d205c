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
    # Then the value counts every request (7 of 8 cores), its pod the workload's: 2 cores
    assert isinstance(reading, MetricReading)
    assert (reading.value, reading.pod_share) == (87.5, 25.0)
    # and a reading of no workload pod, or of an amount, has none
    bare = read_reservation(metric(), WEB, Snapshot(CLUSTER.nodes, (agent,)), T0)
    amount = read_reservation(metric({"type": "Value", "value": 2}), WEB, CLUSTER, T0)
    assert isinstance(bare, MetricReading) and isinstance(amount, MetricReading)
    assert (bare.pod_share, amount.pod_share) == (None, None)

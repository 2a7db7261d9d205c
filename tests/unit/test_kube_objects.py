"""The API server's JSON → compact nodes and pods: what the scheduler would reserve."""

from __future__ import annotations

from nodescaler.adapters.k8s.objects import node_from_json, pod_from_json
from nodescaler.domain.cluster import Resources, Taint

from tests.kube import node, pod

GIB = 2**30


def test_a_pod_reserves_its_containers_sum_or_largest_init_container_plus_overhead() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
        ],
        "initContainers": [
            {"name": "i", "resources": {"requests": {"cpu": "2", "memory": "64Mi"}}}
        ],
        "overhead": {"cpu": "100m", "memory": "10Mi"},
    }
    parsed = pod_from_json(pod("p", "n1", spec=spec))
    assert parsed.requests == Resources(2100, (256 + 10) * 2**20, 1)


def test_daemon_set_mirror_priority_and_unschedulable_are_recognised() -> None:
    mirror = pod("m", "n1", owner="Node")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    assert pod_from_json(pod("d", "n1", owner="DaemonSet")).daemon_set
    assert pod_from_json(mirror).mirror
    pending = pod_from_json(pod("u", priority=-20))
    assert (pending.unschedulable, pending.priority, pending.node_name) == (True, -20, None)


def test_a_pod_with_a_bad_quantity_is_kept_with_its_problem_named() -> None:
    parsed = pod_from_json(pod("bad", "n1", memory="lots"))
    assert parsed.problem == "resources.requests: 'lots' is not a quantity"
    assert parsed.requests == Resources(pods=1)


def test_a_node_keeps_readiness_cordon_capacity_taints_and_instance() -> None:
    raw = node(
        "n1",
        "a",
        unschedulable=True,
        taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        provider_id="aws:///eu-west-1b/i-0123",
    )
    parsed = node_from_json(raw)
    assert (parsed.ready, parsed.schedulable, parsed.instance_id) == (True, False, "i-0123")
    assert parsed.allocatable == Resources(16000, 20 * GIB, 110)
    assert parsed.taints == (Taint("gpu", "true", "NoSchedule"),)
    assert node_from_json(node("n2", ready=False)).ready is False


def test_gpus_are_read_from_node_allocatable_and_pending_pod_requests() -> None:
    raw_node = node("g1", "gpu")
    raw_node["status"]["allocatable"] |= {"nvidia.com/gpu": "4", "hugepages-2Mi": "0"}
    assert node_from_json(raw_node).extended == {"nvidia.com/gpu": 4}
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}},
            {"name": "b", "resources": {"requests": {"nvidia.com/gpu": "2"}}},
        ]
    }
    pending = pod_from_json(pod("train", spec=spec))
    assert pending.placement is not None
    assert pending.placement.extended_resources == {"nvidia.com/gpu": 3}
    bound = pod_from_json(pod("train", "g1", spec=spec))
    # a bound pod keeps it too (where could it go?), the same object as its twin's
    assert bound.placement is pending.placement

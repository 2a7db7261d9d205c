"""The sandbox's scheduler: requests, nodeSelector and taints decide where a pod may go,
the least allocated node takes it, and it turns Ready `readyAfterSeconds` after binding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.kube.apiserver import Cluster, is_ready
from nodescaler_sandbox.workloads import pod

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def cluster() -> SimulatedCluster:
    world = SimulatedCluster(Cluster(), boot=timedelta(minutes=1))
    world.shapes = {
        "general": {"cpu": "4", "memory": "16Gi"},
        "gpu": {"cpu": "4", "memory": "16Gi"},
    }
    world.labels = {"gpu": {"accelerator": "gpu"}}
    world.taints = {"gpu": [GPU_TAINT]}
    for instance, group in (("i-a", "general"), ("i-b", "general"), ("i-g", "gpu")):
        world.store.put("nodes", world._node(instance, group))
    return world


def node_of(world: SimulatedCluster, name: str) -> str | None:
    found: str | None = world.store.objects["pods"][("default", name)]["spec"].get("nodeName")
    return found


def test_a_taint_keeps_out_pods_that_do_not_tolerate_it() -> None:
    world = cluster()
    gpu_only = {"accelerator": "gpu"}
    world.store.put("pods", pod("plain", "x", "1", "1Gi", node_selector=gpu_only))
    world.store.put(
        "pods", pod("trainer", "x", "1", "1Gi", node_selector=gpu_only, tolerations=[GPU_TAINT])
    )
    assert world.schedule(T0) == 1
    assert node_of(world, "plain") is None
    plain = world.store.objects["pods"][("default", "plain")]
    assert plain["status"]["conditions"][0]["reason"] == "Unschedulable"
    assert node_of(world, "trainer") == "ip-i-g"


def test_pods_spread_to_the_least_allocated_node_and_wait_when_none_has_room() -> None:
    world = cluster()
    for n in range(9):
        world.store.put("pods", pod(f"web-{n}", "web", "1", "1Gi"))
    assert world.schedule(T0) == 1  # 8 cores on the two untainted nodes, 9 pods
    placed = [node_of(world, f"web-{n}") for n in range(9)]
    assert placed.count("ip-i-a") == placed.count("ip-i-b") == 4


def test_a_pod_turns_ready_after_its_delay() -> None:
    world = cluster()
    world.store.put("pods", pod("slow", "web", "1", "1Gi", ready_after_seconds=30))
    world.schedule(T0)
    found = world.store.objects["pods"][("default", "slow")]
    assert not is_ready(found)
    world.schedule(T0 + timedelta(seconds=30))
    assert is_ready(world.store.objects["pods"][("default", "slow")])

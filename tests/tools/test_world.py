"""The sandbox's scheduler: requests, nodeSelector and taints decide where a pod may go,
the least allocated node takes it, and it turns Ready `readyAfterSeconds` after binding;
and what a node's going does to its pods: evicted, or killed with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nodescaler_sandbox.cluster import READY_AT, SimulatedCluster
from nodescaler_sandbox.kube.apiserver import ApiError, Cluster, is_ready
from nodescaler_sandbox.workloads import Deployment, QueueWork, pod

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


def test_a_node_with_a_soft_taint_takes_pods_only_when_no_other_has_room() -> None:
    world = cluster()
    leaving = world.store.objects["nodes"][("", "ip-i-b")]
    leaving["spec"]["taints"] = [
        {"key": "nodescaler.io/deletion-candidate", "effect": "PreferNoSchedule"}
    ]
    world.store.put("nodes", leaving)
    for n in range(6):
        world.store.put("pods", pod(f"web-{n}", "web", "1", "1Gi"))
    assert world.schedule(T0) == 0
    placed = [node_of(world, f"web-{n}") for n in range(6)]
    # the untainted node fills first (4 cores), though the tainted one has more room
    assert (placed.count("ip-i-a"), placed.count("ip-i-b")) == (4, 2)


def test_a_pod_turns_ready_after_its_delay() -> None:
    world = cluster()
    world.store.put("pods", pod("slow", "web", "1", "1Gi", ready_after_seconds=30))
    world.schedule(T0)
    found = world.store.objects["pods"][("default", "slow")]
    assert not is_ready(found)
    world.schedule(T0 + timedelta(seconds=30))
    assert is_ready(world.store.objects["pods"][("default", "slow")])


def test_pods_on_a_node_that_goes_are_killed_unless_evicted_first() -> None:
    world = cluster()
    world.store.graceful_deletion = True  # an evicted pod stays, terminating, on its node
    on_a = {"kubernetes.io/hostname": "ip-i-a"}
    for name in ("evicted", "terminating", "kept-1", "kept-2"):
        world.store.put("pods", pod(name, "web", "1", "1Gi", node_selector=on_a))
    world.store.put("pods", pod("elsewhere", "web", "1", "1Gi", node_selector={"accelerator": "x"}))
    world.schedule(T0)
    world.store.evict("default", "evicted", 0)  # gone at once
    world.store.evict("default", "terminating")  # still on the node when it goes
    world.release("i-a")
    assert sorted(world.killed) == ["kept-1", "kept-2"]
    assert (world.store.evicted, world.nodes_removed) == (2, 1)
    assert ("default", "elsewhere") in world.store.objects["pods"]  # pending: nothing to kill
    world.release("i-a")  # gone already: nothing more
    assert (len(world.killed), world.nodes_removed) == (2, 1)


def test_an_eviction_a_budget_refuses_is_asked_but_not_done() -> None:
    world = cluster()
    world.store.put(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    for n in range(3):
        world.store.put("pods", pod(f"web-{n}", "web", "1", "1Gi"))
    world.schedule(T0)  # bound and Ready at once
    world.store.evict("default", "web-0")
    with pytest.raises(ApiError):
        world.store.evict("default", "web-1")  # two must stay healthy
    assert (len(world.store.evictions), world.store.evicted) == (2, 1)


def test_a_deployments_pods_carry_their_controller_volume_and_namespace() -> None:
    # what the product and the baseline read to tell which pods may move
    from nodescaler_sandbox.workloads import Deployment

    world = cluster()
    for deployment in (
        Deployment("web", "1", "1Gi", [(0, 1)]),
        Deployment("debug", "1", "1Gi", [(0, 1)], bare=True),
        Deployment("cache", "1", "1Gi", [(0, 1)], local_storage="emptyDir"),
        Deployment("agent", "1", "1Gi", [(0, 1)], namespace="kube-system"),
    ):
        deployment.reconcile(world.store, 0, T0)
    pods = world.store.objects["pods"]
    web = pods[("default", "web-1")]["metadata"]["ownerReferences"]
    assert [(o["kind"], o["controller"]) for o in web] == [("ReplicaSet", True)]
    assert "ownerReferences" not in pods[("default", "debug-1")]["metadata"]
    assert pods[("default", "cache-1")]["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert ("kube-system", "agent-1") in pods


def test_a_deployments_pod_carries_the_virtual_clocks_time_of_its_creation() -> None:
    # as a real API server stamps metadata.creationTimestamp when it creates the pod: the
    # hour a kube-system pod keeps its node counts from it (rules/system/rule.go)
    world = cluster()
    agent = Deployment("agent", "1", "1Gi", [(0, 1), (5, 2)], namespace="kube-system")
    agent.reconcile(world.store, 0, T0)
    agent.reconcile(world.store, 5, T0 + timedelta(minutes=5))
    pods = world.store.objects["pods"]
    stamps = [pods[("kube-system", f"agent-{n}")]["metadata"]["creationTimestamp"] for n in (1, 2)]
    assert stamps == ["2026-11-23T09:00:00Z", "2026-11-23T09:05:00Z"]


def test_keda_makes_a_queues_workers_at_its_30_second_polls_only() -> None:
    # KEDA's ScaledJob reads its queue every pollingInterval (30 s by default:
    # https://keda.sh/docs/2.16/reference/scaledjob-spec/) and makes the jobs it lacks then
    # Given 3 messages at the poll of 00:00, 10 by 00:10, then 3 workers until 00:30, and a
    # worker done in between is not made again; at 00:30, one per message up to the cap
    work = QueueWork("q", {0: 10}, 2, Deployment("q-worker", "1", "1Gi", [(0, 0)]), 8)
    assert work.wanted(0, 3) == 3
    assert work.wanted(10, 10) == 3
    work._done += 1  # a worker finished (`finish`)
    assert work.wanted(20, 9) == 2
    assert work.wanted(30, 9) == 8


def test_a_queue_worker_gone_at_its_task_loses_its_work_and_one_done_loses_none() -> None:
    # Given three workers of 10-minute tasks: two Ready at 00:00, one still starting
    store = Cluster()
    work = QueueWork("q", {0: 3}, 10, Deployment("q-worker", "1", "1Gi", [(0, 3)]), 3)
    work.workers.resize(store, 3, T0)
    names = sorted(p["metadata"]["name"] for p in work.workers.pods(store))
    for name in names[:2]:
        store.objects["pods"][("default", name)]["metadata"]["annotations"][READY_AT] = (
            T0.isoformat()
        )
    assert work.take_stock(store, T0 + timedelta(minutes=4)) == 2  # each at its task
    # When one is evicted (a scale-in) and the other finishes its task
    store.delete("pods", ("default", names[0]))
    assert work.finish(store, T0 + timedelta(minutes=10)) == 1
    # Then the evicted one's 4 minutes of work (to the last stock-take) are lost, the
    # finished one's are not, and the starting one had none to lose
    assert work.take_stock(store, T0 + timedelta(minutes=10)) == 0
    assert work.lost_minutes == 4
    store.delete("pods", ("default", names[2]))
    assert work.take_stock(store, T0 + timedelta(minutes=11)) == 0
    assert work.lost_minutes == 4


def test_a_run_s_lost_job_minutes_count_its_queue_workers_work() -> None:
    from nodescaler_sandbox import run_summary
    from nodescaler_sandbox.observation import Run
    from nodescaler_sandbox.scenario_file import load_scenario

    from tests.sandbox.conftest import SCENARIOS

    burst = load_scenario(SCENARIOS / "1-queue-burst.yaml")
    run = Run("nodescaler", queue_work_lost_minutes=12.34)
    figures = run_summary._replay_figures(burst, run, [], 10 / 60)
    assert figures["lost_job_minutes"] == 12.3
    # a scenario of neither queues nor pod traces has no such figure
    no_queue = burst.model_copy(update={"queues": [], "alarms": []})
    assert "lost_job_minutes" not in run_summary._replay_figures(no_queue, run, [], 10 / 60)

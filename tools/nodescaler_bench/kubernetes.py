"""Kubernetes signals at scale: 5,000 nodes and 150,000 pods from the loopback API server.

The server runs in its own process, its pages pre-rendered (each query is served once
before timing), so its cost is small and the same for both sides. Each side then runs
in a fresh interpreter, which reports its time and its peak resident memory:

- `fast`: nodescaler's path: raw JSON pages into compact views, then capacity
  reservation of every group and the pending-pods plan;
- `models`: the same computation, the pages read through the `kubernetes` client's model
  objects (as most controllers do), turned into the same views.
"""

from __future__ import annotations

import json
import multiprocessing
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

NODES = 5000
PODS_PER_NODE = 30  # 150,000 pods
PENDING = 300
GROUPS = 10


def _node(index: int) -> dict[str, Any]:
    name = f"ip-10-0-{index // 250}-{index % 250}"
    group = f"group-{index % GROUPS}"
    return {
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "eks.amazonaws.com/nodegroup": group,
                "node.kubernetes.io/instance-type": "m5.4xlarge",
                "topology.kubernetes.io/zone": f"eu-west-1{'abc'[index % 3]}",
            },
        },
        "spec": {"providerID": f"aws:///eu-west-1a/i-{index:017x}"},
        "status": {
            "allocatable": {"cpu": "15890m", "memory": "57632Mi", "pods": "110"},
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": f"boot-{index}",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kernelVersion": "6.1.109-118.189.amzn2023.x86_64",
                "kubeProxyVersion": "v1.31.0",
                "kubeletVersion": "v1.31.0",
                "machineID": f"machine-{index}",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.5.20240916",
                "systemUUID": f"ec2-{index:08x}",
            },
        },
    }


def _pod(index: int, node: str | None) -> dict[str, Any]:
    app = f"service-{index % 97}"
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/{app}:1.4.2",
                "resources": {
                    "requests": {"cpu": "250m", "memory": "512Mi"},
                    "limits": {"memory": "1Gi"},
                },
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "SERVICE", "value": app}, {"name": "PORT", "value": "8080"}],
            },
            {
                "name": "envoy",
                "image": "envoyproxy/envoy:v1.31.0",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
            },
        ],
        "restartPolicy": "Always",
        "serviceAccountName": app,
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
        ],
    }
    status: dict[str, Any]
    if node:
        spec["nodeName"] = node
        status = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "podIP": f"10.1.{index // 250 % 250}.{index % 250}",
        }
    else:
        spec["nodeSelector"] = {"node.kubernetes.io/instance-type": "m5.4xlarge"}
        status = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    return {
        "metadata": {
            "name": f"{app}-{index:06d}",
            "namespace": f"team-{index % 20}",
            "labels": {"app": app, "pod-template-hash": "7d4b9c"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-7d4b9c",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def bound(cluster: Any) -> None:
    """5,000 nodes, 30 pods bound to each."""
    names = []
    for index in range(NODES):
        node = _node(index)
        names.append(node["metadata"]["name"])
        cluster.put("nodes", node)
    for index in range(NODES * PODS_PER_NODE):
        cluster.put("pods", _pod(index, names[index // PODS_PER_NODE]))


def populate(cluster: Any) -> None:
    """5,000 nodes, 30 pods on each, 300 pending."""
    bound(cluster)
    for index in range(PENDING):
        cluster.put("pods", _pod(NODES * PODS_PER_NODE + index, None))


def _serve(ready: Any, stop: Any, fill: Callable[[Any], None]) -> None:
    from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer

    cluster = Cluster()
    fill(cluster)
    with KubeApiServer(cluster) as server:
        ready.send(server.url)
        stop.wait()


@contextmanager
def api_server(fill: Callable[[Any], None] = populate) -> Iterator[str]:
    """The loopback API server holding what `fill` puts there, in a process of its own."""
    context = multiprocessing.get_context("spawn")
    ready, child_end = context.Pipe()
    stop = context.Event()
    process = context.Process(target=_serve, args=(child_end, stop, fill), daemon=True)
    process.start()
    try:
        yield ready.recv()
    finally:
        stop.set()
        process.join(10)


# --- the measured side, run as `python -m nodescaler_bench.kubernetes SIDE URL` -----


class StaticGroups:
    """The managed groups, as discovery would return them (AWS is not what is measured)."""

    def __init__(self, groups: list[Any]) -> None:
        self.groups = groups

    def discover(self) -> list[Any]:
        return self.groups

    def get(self, name: str) -> Any:
        return next((g for g in self.groups if g.name == name), None)

    def set_desired(self, group: Any, desired: int) -> None:
        raise NotImplementedError("the bench never resizes")


class NoInstanceTypes:
    """Every group here has live nodes to copy; a lookup would be a bench bug."""

    def instance_type(self, group: Any) -> str:
        raise LookupError(f"{group.name} has live nodes; no instance type needed")

    def shape(self, instance_type: str) -> Any:
        raise LookupError(instance_type)

    def nodegroup_labels(self, group: Any) -> Any:
        raise LookupError(f"{group.name} has live nodes; no template needed")


class ThroughModels:
    """The same snapshot, listed the way most controllers do: the client's model objects."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def snapshot(self) -> Any:
        from kubernetes import client as k8s
        from nodescaler.adapters.k8s.conversion import node_from_json, pod_from_json
        from nodescaler.adapters.k8s.core_api import NOT_TERMINAL
        from nodescaler.domain.cluster.snapshot import Snapshot

        core, serialize = k8s.CoreV1Api(self._api), self._api.sanitize_for_serialization
        nodes, pods, token = [], [], None
        while True:
            page = core.list_node(limit=500, _continue=token)
            nodes += [node_from_json(serialize(n)) for n in page.items]
            if not (token := page.metadata._continue):
                break
        while True:
            page = core.list_pod_for_all_namespaces(
                limit=500, _continue=token, field_selector=NOT_TERMINAL
            )
            pods += [pod_from_json(serialize(p)) for p in page.items]
            if not (token := page.metadata._continue):
                break
        return Snapshot(tuple(nodes), tuple(pods))


def _compute(url: str, side: str) -> dict[str, Any]:
    from kubernetes import client as k8s
    from nodescaler.adapters.k8s.core_api import KubernetesCluster
    from nodescaler.domain.groups.node_group import NodeGroup
    from nodescaler.domain.groups.optin import TagNames
    from nodescaler.domain.policy import NodeGroupPolicy
    from nodescaler.domain.scale_up.expanders import LeastWasteExpander
    from nodescaler.service.cluster_view import KubernetesClusterView
    from nodescaler.service.pending_pods import PendingPodsPlanner
    from nodescaler.service.policy_resolver import PolicyBook

    api = k8s.ApiClient(k8s.Configuration(host=url))

    class Connection:
        def api(self) -> Any:
            return api

        def renew(self) -> None:
            pass

    groups = [
        NodeGroup(
            f"asg-{g}",
            500,
            0,
            1000,
            500,
            tags={"nodescaler/enabled": "true", "nodescaler/policy": "web"},
            eks_nodegroup=f"group-{g}",
        )
        for g in range(GROUPS)
    ]
    policy = NodeGroupPolicy.model_validate(
        {
            "metadata": {"name": "web"},
            "spec": {
                "minReplicas": 0,
                "maxReplicas": 1000,
                "metrics": [
                    {
                        "type": "CapacityReservation",
                        "capacityReservation": {"resource": "cpu"},
                        "target": {"type": "Utilization", "averageUtilization": 60},
                    },
                    {"type": "PendingPods"},
                ],
            },
        }
    )
    planner = PendingPodsPlanner(
        StaticGroups(groups),
        PolicyBook({"web": policy}, TagNames()),
        NoInstanceTypes(),
        [LeastWasteExpander()],
    )
    # Both sides read through the product's producer; only how the snapshot is listed differs.
    source = KubernetesCluster(Connection()) if side == "fast" else ThroughModels(api)
    metrics = KubernetesClusterView(source, pending=planner)
    return _read_all(metrics, groups, policy)


def _read_all(metrics: Any, groups: list[Any], policy: Any) -> dict[str, Any]:
    """Every group's metrics read once through `metrics`: the time it took, the peak
    memory, the snapshot's size, and what the reads said (to check both sides agree)."""
    now = datetime.now(UTC)
    started = time.perf_counter()
    readings = {
        (group.name, metric.key): metrics.read(metric, group, now)
        for group in groups
        for metric in policy.spec.metrics
    }
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    values = {key: getattr(reading, "value", None) for key, reading in readings.items()}
    snapshot = metrics.snapshot(now)
    return {
        "seconds": elapsed,
        "peak_mb": peak_mb,
        "pods": len(snapshot.pods),
        "nodes": len(snapshot.nodes),
        "reservation_percent": round(
            sum(v or 0 for (_, m), v in values.items() if m == "reservation-cpu") / GROUPS, 3
        ),
        "new_nodes": sum(v or 0 for (_, m), v in values.items() if m == "pending-pods"),
    }


def in_fresh_interpreter(module: str, *args: str) -> dict[str, Any]:
    """`python -m module args`: what it printed last, as JSON (its time, its peak memory)."""
    result = subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, check=True
    )
    measured: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return measured


def _measure(url: str, side: str) -> dict[str, Any]:
    return in_fresh_interpreter("nodescaler_bench.kubernetes", side, url)


def run() -> dict[str, float]:
    with api_server() as url:
        _measure(url, "fast")  # renders and caches every page the sides will ask for
        fast = _measure(url, "fast")
        models = _measure(url, "models")
    if (fast["pods"], fast["new_nodes"]) != (models["pods"], models["new_nodes"]):
        raise AssertionError(f"the two sides disagree: {fast} vs {models}")
    return {
        "k8s_150k_pods_s": round(fast["seconds"], 3),
        "k8s_150k_pods_peak_mb": round(fast["peak_mb"], 1),
        "k8s_client_models_s": round(models["seconds"], 3),
        "k8s_client_models_peak_mb": round(models["peak_mb"], 1),
        "k8s_vs_client_models_speedup": round(models["seconds"] / fast["seconds"], 2),
    }


if __name__ == "__main__":
    print(json.dumps(_compute(sys.argv[2], sys.argv[1])))

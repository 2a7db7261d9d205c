"""The cluster's CapacityBuffers read through the real `kubernetes` client from the loopback
API server, as `KubernetesCluster.snapshot` lists them."""

from __future__ import annotations

from pathlib import Path

from nodescaler.adapters.k8s.connection import KubeconfigConnection
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer

from tests.kube import kubeconfig

TEMPLATE = {
    "metadata": {"name": "web", "namespace": "shop"},
    "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    },
}


def headroom(name: str, replicas: int) -> dict[str, object]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
        "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"podTemplateRef": {"name": "web"}, "replicas": replicas},
    }


def test_given_a_cluster_without_the_crd_when_listed_then_no_buffer_and_no_error(
    tmp_path: Path,
) -> None:
    with KubeApiServer(Cluster(not_installed=frozenset({"capacitybuffers"}))) as server:
        cluster = KubernetesCluster(KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url)))
        snapshot = cluster.snapshot()
    assert snapshot.buffers == ()
    assert any("/capacitybuffers" in r for r in server.requests)  # asked, and 404 answered


def test_given_buffers_over_pages_when_listed_then_each_is_read_with_its_template(
    tmp_path: Path,
) -> None:
    """Given three CapacityBuffers in pages of two, when the snapshot is listed, then each
    buffer's pods have its PodTemplate's shape and labels."""
    served = Cluster()
    served.put("podtemplates", TEMPLATE)
    for name, replicas in (("a", 1), ("b", 2), ("c", 3)):
        served.put("capacitybuffers", headroom(name, replicas))
    with KubeApiServer(served) as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
        snapshot = KubernetesCluster(connection, page_size=2).snapshot()
    assert [(b.name, len(b.pods), b.problem) for b in snapshot.buffers] == [
        ("a", 1, None),
        ("b", 2, None),
        ("c", 3, None),
    ]
    pod = snapshot.buffers[2].pods[0]
    assert (pod.requests.cpu_millis, dict(pod.labels)) == (1000, {"app": "web"})
    listed = [r for r in server.requests if "/capacitybuffers" in r]
    assert len(listed) == 2 and "continue=" in listed[1]


def test_given_a_buffer_of_a_deployment_when_listed_then_its_percentage_of_the_replicas(
    tmp_path: Path,
) -> None:
    """Given a Deployment of 10 replicas of 1 cpu and a buffer of 30 % of it, when listed,
    then the buffer is 3 pods of the Deployment's shape."""
    served = Cluster()
    served.put(
        "deployments", {**TEMPLATE, "spec": {"replicas": 10, "template": TEMPLATE["template"]}}
    )
    ref = {"apiGroup": "apps", "kind": "Deployment", "name": "web"}
    served.put(
        "capacitybuffers",
        headroom("scaled", 0) | {"spec": {"scalableRef": ref, "percentage": 30}},
    )
    with KubeApiServer(served) as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
        (read,) = KubernetesCluster(connection).snapshot().buffers
    assert (read.problem, len(read.pods), read.pods[0].requests.cpu_millis) == (None, 3, 1000)

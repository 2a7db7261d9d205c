"""The cluster's DaemonSets read through the real `kubernetes` client from the loopback API
server, as `KubernetesCluster.snapshot` lists them: a pod of each, as its template asks."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler.adapters.k8s.connection import KubeconfigConnection
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer

from tests.kube import kubeconfig


def daemon_set(name: str, cpu: str, memory: str, selector: dict[str, str]) -> dict[str, object]:
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
    spec = {"nodeSelector": selector, "containers": [container]}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": spec}},
    }


def test_given_daemon_sets_over_pages_when_listed_then_a_pod_of_each_as_asked(
    tmp_path: Path,
) -> None:
    served = Cluster()
    served.put("daemonsets", daemon_set("kube-proxy", "100m", "0", {}))
    served.put(
        "daemonsets", daemon_set("fluent-bit", "250m", "200Mi", {"kubernetes.io/os": "linux"})
    )
    served.put("daemonsets", daemon_set("gpu-agent", "1", "1Gi", {"gpu": "true"}))
    with KubeApiServer(served) as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
        snapshot = KubernetesCluster(connection, page_size=2).snapshot()
    assert snapshot.daemon_sets is not None
    read = {p.name: p for p in snapshot.daemon_sets}
    assert sorted(read) == ["fluent-bit", "gpu-agent", "kube-proxy"]
    agent = read["fluent-bit"]
    assert agent.daemon_set and agent.node_name is None
    assert (agent.requests.cpu_millis, agent.requests.memory_bytes) == (250, 200 * 2**20)
    assert agent.placement is not None
    assert dict(agent.placement.node_selector) == {"kubernetes.io/os": "linux"}
    listed = [r for r in server.requests if "/daemonsets" in r]
    assert len(listed) == 2 and "continue=" in listed[1]


def test_given_daemon_sets_that_cannot_be_listed_then_none_and_the_rest_is_read(
    tmp_path: Path,
) -> None:
    with KubeApiServer(Cluster(not_installed=frozenset({"daemonsets"}))) as server:
        cluster = KubernetesCluster(KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url)))
        snapshot = cluster.snapshot()
    assert snapshot.daemon_sets is None
    assert snapshot.budgets == ()  # the snapshot is still read


def test_given_daemon_sets_unasked_then_none_is_listed(tmp_path: Path) -> None:
    # terminate's reader: which instances go needs no new node's template
    with KubeApiServer(Cluster()) as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
        snapshot = KubernetesCluster(connection, daemon_sets=False).snapshot()
    assert snapshot.daemon_sets is None
    assert not any("/daemonsets" in r for r in server.requests)


def test_given_daemon_sets_answering_500_then_the_cluster_read_fails_naming_it(
    tmp_path: Path,
) -> None:
    # Given a server whose DaemonSet list alone fails (500): not a role without the right
    from kubernetes.client.exceptions import ApiException
    from nodescaler.errors import KubernetesUnavailableError

    with KubeApiServer(Cluster()) as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
        cluster = KubernetesCluster(connection)
        request = cluster._api.request

        def failing(call: object, *args: object, **query: object) -> bytes:
            if "daemon_set" in getattr(call, "__name__", ""):
                raise ApiException(status=500, reason="InternalError")
            return request(call, *args, **query)  # type: ignore[arg-type]

        cluster._api.request = failing  # type: ignore[method-assign]
        # When the snapshot is read, Then the read fails as a list of nodes would, naming it
        with pytest.raises(KubernetesUnavailableError, match="500 InternalError"):
            cluster.snapshot()


def test_given_daemon_sets_when_read_then_their_bytes_count_in_what_the_look_cost(
    tmp_path: Path,
) -> None:
    def bytes_read(served: Cluster) -> int:
        with KubeApiServer(served) as server:
            cluster = KubernetesCluster(
                KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
            )
            cluster.snapshot()
            return cluster.bytes_read

    with_agents = Cluster()
    for n in range(20):
        with_agents.put("daemonsets", daemon_set(f"agent-{n}", "100m", "64Mi", {}))
    # Twenty DaemonSets' objects are well over a kilobyte on the wire.
    assert bytes_read(with_agents) - bytes_read(Cluster()) > 1000

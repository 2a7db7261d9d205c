"""A pod's creationTimestamp read through the real `kubernetes` client from the loopback
API server, for the drainability rule that counts from it (a kube-system pod no budget
selects keeps its node for --blocking-system-pod-distruption-timeout, an hour)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from nodescaler.adapters.k8s.connection import KubeconfigConnection
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler.adapters.k8s.evictions import KubernetesDrain
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.errors import KubernetesUnavailableError
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer

from tests.builders import T0
from tests.kube import kubeconfig, node, pod

GROUP_A = NodeGroup(
    "asg-a",
    2,
    0,
    10,
    2,
    eks_cluster="prod",
    eks_nodegroup="a",
    instance_ids=frozenset({"i-a-1", "i-a-2"}),
)


def stamped(name: str, on: str, created: str) -> dict[str, object]:
    agent = pod(name, on, namespace="kube-system")
    agent["metadata"]["creationTimestamp"] = created
    return agent


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[KubeApiServer, KubeconfigConnection]]:
    server = KubeApiServer(Cluster(), token="secret")
    with server:
        yield server, KubeconfigConnection(kubeconfig(tmp_path / "kubeconfig", server.url))


def test_given_kube_system_agents_an_hour_old_and_younger_then_only_the_youngs_node_is_kept(
    served: tuple[KubeApiServer, KubeconfigConnection],
) -> None:
    server, connection = served
    # Given two nodes, each with a kube-system agent no budget selects: one created two
    # hours before now, one thirty minutes before (the API server's RFC 3339 times)
    server.cluster.put("nodes", node("a-1", "a"))
    server.cluster.put("nodes", node("a-2", "a"))
    old, young = T0 - timedelta(hours=2), T0 - timedelta(minutes=30)
    server.cluster.put("pods", stamped("old-agent", "a-1", f"{old:%Y-%m-%dT%H:%M:%SZ}"))
    server.cluster.put("pods", stamped("young-agent", "a-2", f"{young:%Y-%m-%dT%H:%M:%SZ}"))
    # When the cluster is read, as evaluation and the drain read it
    listed = {p.name: p.created for p in KubernetesCluster(connection).pods()}
    drained = {p.name: p.created for p in KubernetesDrain(connection).pods_on("a-2")}
    protected = KubernetesClusterView(KubernetesCluster(connection)).protected(GROUP_A, T0)
    # Then each pod carries its creation time, and only the young agent's node is kept
    assert listed == {"old-agent": old, "young-agent": young}
    assert drained == {"young-agent": young}
    assert protected == frozenset({"i-a-2"})


def test_given_a_creation_time_without_its_zone_then_the_listing_fails_naming_the_field(
    served: tuple[KubeApiServer, KubeconfigConnection],
) -> None:
    # A time the API server never writes: no scale-in is built on a guess at its zone
    server, connection = served
    server.cluster.put("nodes", node("a-1", "a"))
    server.cluster.put("pods", stamped("agent", "a-1", "2026-03-02T10:00:00"))
    with pytest.raises(KubernetesUnavailableError, match=r"metadata\.creationTimestamp"):
        KubernetesCluster(connection).pods()
    assert KubernetesClusterView(KubernetesCluster(connection)).protected(GROUP_A, T0) is None

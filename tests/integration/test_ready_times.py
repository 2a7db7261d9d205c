"""When a group's nodes turned Ready, read through the real `kubernetes` client from the
loopback API server as the sandbox's world serves them: each node's Ready condition with
its `lastTransitionTime`, as the kubelet reports it (issue 44, item 1)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from nodescaler.adapters.k8s.connection import KubeconfigConnection
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer

from tests.builders import T0
from tests.kube import kubeconfig

GROUP = NodeGroup("web", 2, 0, 10, 2, instance_ids=frozenset({"i-1", "i-2"}))


def test_the_groups_ready_nodes_say_when_each_turned_ready(tmp_path: Path) -> None:
    # Given the world's two nodes of the group, Ready 187.2 s and 190 s after T0 (the
    # kubelet's time is to the second), and another group's node
    world = SimulatedCluster(Cluster(), timedelta(minutes=3))
    world.shapes = {"web": {"cpu": "2", "memory": "8Gi"}, "other": {"cpu": "2", "memory": "8Gi"}}
    for instance, group, ready in (("i-1", "web", 187.2), ("i-2", "web", 190), ("i-9", "other", 5)):
        world.store.put("nodes", world._node(instance, group, T0 + timedelta(seconds=ready)))
    with KubeApiServer(world.store, token="secret") as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kubeconfig", server.url))
        view = KubernetesClusterView(KubernetesCluster(connection))
        # When nodescaler asks for the group's Ready nodes
        ready = view.ready_nodes(GROUP, T0 + timedelta(minutes=4))
    # Then each comes with the second it turned Ready
    assert ready is not None
    assert sorted(t for t in ready if t is not None) == [
        T0 + timedelta(seconds=187),
        T0 + timedelta(seconds=190),
    ]
    assert all(isinstance(t, datetime) and t.tzinfo is not None for t in ready)

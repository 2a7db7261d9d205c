"""The sandbox's DaemonSets (`SimulatedCluster.daemons_on`): a pod of each on every node it
takes, bound and Ready as the node registers, gone with it and never counted as killed; a
new node of the group offers what they leave (`empty_node`, the lower bound's and Cluster
Autoscaler's template)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.kube.apiserver import Cluster
from nodescaler_sandbox.kube.store import is_daemon
from nodescaler_sandbox.provision import create_group, launch_configuration
from nodescaler_sandbox.workloads import pod

from tests.aws import REGION, aws, client  # noqa: F401  (moto for the tests that ask)

T0 = datetime(2026, 11, 23, 9, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def daemon_set(store: Cluster, name: str, cpu: str, **where: object) -> dict[str, object]:
    made = pod(name, name, cpu, "128Mi", namespace="kube-system", **where)  # type: ignore[arg-type]
    template = {"metadata": {"labels": {"app": name}}, "spec": made["spec"]}
    return store.put(
        "daemonsets",
        {"metadata": {"name": name, "namespace": "kube-system"}, "spec": {"template": template}},
    )


@pytest.mark.usefixtures("aws")
def test_each_node_runs_the_daemon_sets_it_takes_and_a_new_one_offers_what_they_leave() -> None:
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.xlarge")
    create_group(
        autoscaling, "web", region=REGION, tags={}, desired=2, launch_configuration="web-lc"
    )
    store = Cluster()
    cluster = SimulatedCluster(
        store,
        MINUTE,
        shapes={"web": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
        labels={"web": {"tier": "web"}},
    )
    cluster.region = REGION
    cluster.daemon_sets = [
        daemon_set(store, "kube-proxy", "100m"),
        daemon_set(store, "log-agent", "400m", node_selector={"tier": "web"}),
        daemon_set(store, "gpu-agent", "1", node_selector={"tier": "gpu"}),
        daemon_set(store, "tainted-only", "1", tolerations=[{"key": "x", "effect": "NoSchedule"}]),
    ]
    # When the group's two instances boot and their nodes register
    cluster.sync(T0, holds=lambda _: False)
    cluster.sync(T0 + 2 * MINUTE, holds=lambda _: False)
    # Then each node runs a pod of every DaemonSet it takes, bound and Ready
    daemons = [p for p in store.objects["pods"].values() if is_daemon(p)]
    assert sorted(p["metadata"]["name"].rsplit("-ip-", 1)[0] for p in daemons) == [
        "kube-proxy",
        "kube-proxy",
        "log-agent",
        "log-agent",
        "tainted-only",
        "tainted-only",
    ]
    assert all(p["spec"]["nodeName"] and p["status"]["phase"] == "Running" for p in daemons)
    # and a new node of the group offers what they leave: 4 cpu less 1.5
    room = cluster.empty_node("web")
    assert room.cpu == 4000 - 100 - 400 - 1000
    # When an instance goes, its DaemonSets' pods go with it, never counted as killed
    instance = next(iter(cluster.instances))
    cluster.release(instance)
    assert len([p for p in store.objects["pods"].values() if is_daemon(p)]) == 3
    assert cluster.killed == []
    # When a drain evicts one (as Cluster Autoscaler's does), it counts apart from work moved
    agent = next(p for p in store.objects["pods"].values() if is_daemon(p))
    store.evict("kube-system", agent["metadata"]["name"])
    assert (store.evicted, store.daemons_evicted) == (1, 1)

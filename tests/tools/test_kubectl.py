"""Debian's kubectl against the loopback API server, an independent check on it: what
kubectl lists, cordons and drains agrees with what nodescaler's adapters read and would do
on the same server. Where kubectl and the server disagree, the server is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from nodescaler.adapters.k8s.connection import KubeconfigConnection
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler.adapters.k8s.evictions import KubernetesDrain
from nodescaler.domain.scale_down.drain import DrainPod, EvictionOutcome
from nodescaler_sandbox.kube import kubectl, write_kubeconfig
from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer
from nodescaler_sandbox.kube.tls import issue

from tests.kube import cluster_of, node, pdb, pod, tls_api

RUN_SECONDS = 60  # the most one kubectl run may take here before it is cut off
WEB = {"app": "web"}


def daemon_set(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": {}}}


def small_cluster(min_available: int) -> Cluster:
    """Two nodes; three web pods under a budget, two of them on n1; a DaemonSet's pod on
    n1; a finished pod and an unbound one in another namespace."""
    gpu = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    return cluster_of(
        ("nodes", node("n1")),
        ("nodes", node("n2", "ng-b", taints=[gpu])),
        ("pods", pod("web-0", "n1", labels=WEB)),
        ("pods", pod("web-1", "n1", labels=WEB)),
        ("pods", pod("web-2", "n2", labels=WEB)),
        ("pods", pod("agent-n1", "n1", owner="DaemonSet")),
        ("daemonsets", daemon_set("agent-n1-owner")),
        ("pods", pod("report", "n2", namespace="jobs", owner="Job", phase="Succeeded")),
        ("pods", pod("waiting", namespace="jobs")),
        ("poddisruptionbudgets", pdb("web", WEB, minAvailable=min_available)),
    )


class Kubectl:
    """kubectl on a kubeconfig, each run bounded: by --request-timeout per request and
    by RUN_SECONDS in all."""

    def __init__(self, config: Path) -> None:
        if not kubectl.KUBECTL.exists():
            pytest.fail(kubectl.HOW_TO_INSTALL, pytrace=False)
        # no ~/.kube of the machine's, and a discovery cache of this test's own
        self.command = [
            str(kubectl.KUBECTL),
            f"--kubeconfig={config}",
            f"--cache-dir={config.parent / 'kube-cache'}",
            "--request-timeout=10s",
        ]
        self.env = {"PATH": os.environ.get("PATH", ""), "HOME": str(config.parent)}

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.command, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=RUN_SECONDS,
            check=False,
        )

    def started(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.command, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )


Serve = Callable[[Cluster], tuple[KubeApiServer, Path]]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Serve]:
    """Serves a cluster on loopback; its server and a kubeconfig for it. No token: kubectl
    sends credentials only over TLS, and this server speaks plain HTTP."""
    with ExitStack() as servers:

        def serve(cluster: Cluster) -> tuple[KubeApiServer, Path]:
            server = servers.enter_context(KubeApiServer(cluster))
            return server, write_kubeconfig(tmp_path / "kubeconfig", server.url)

        yield serve


def test_kubectl_lists_nodes_pods_and_budgets_as_nodescaler_reads_them(served: Serve) -> None:
    _, config = served(small_cluster(min_available=2))
    run = Kubectl(config)

    table = run("get", "nodes,pods,pdb", "--all-namespaces")
    listed = run("get", "nodes,pods,pdb", "--all-namespaces", "-o", "json")
    snapshot = KubernetesCluster(KubeconfigConnection(config)).snapshot()

    assert table.returncode == 0, table.stderr
    for name in ("node/n1", "node/n2", "pod/web-0", "pod/report", "poddisruptionbudget.policy/web"):
        assert name in table.stdout
    assert listed.returncode == 0, listed.stderr
    items = json.loads(listed.stdout)["items"]
    of_kind = {kind: [i for i in items if i["kind"] == kind] for kind in ("Node", "Pod")}
    budgets = [i for i in items if i["kind"] == "PodDisruptionBudget"]
    assert {i["apiVersion"] for i in budgets} == {"policy/v1"}
    nodes = [
        (
            n["metadata"]["name"],
            n["spec"].get("unschedulable", False),
            n["spec"]["providerID"],
            n["metadata"]["labels"],
            [(t["key"], t["value"], t["effect"]) for t in n["spec"].get("taints", [])],
        )
        for n in of_kind["Node"]
    ]
    assert [(name, taints) for name, *_, taints in nodes] == [
        ("n1", []),
        ("n2", [("nvidia.com/gpu", "true", "NoSchedule")]),
    ]
    assert nodes == [
        (
            n.name,
            not n.schedulable,
            n.provider_id,
            dict(n.labels),
            [(t.key, t.value, t.effect) for t in n.taints],
        )
        for n in snapshot.nodes
    ]
    pods = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): (
            p["spec"].get("nodeName"),
            p["status"]["phase"],
            p["metadata"]["labels"],
        )
        for p in of_kind["Pod"]
    }
    # nodescaler lists the pods that are not finished; kubectl lists them all
    assert pods.pop(("jobs", "report")) == ("n2", "Succeeded", {})
    assert pods == {
        (p.namespace, p.name): (p.node_name, p.phase, dict(p.labels)) for p in snapshot.pods
    }
    assert len(pods) == 5
    assert snapshot.budgets is not None
    assert [
        (b["metadata"]["namespace"], b["metadata"]["name"], b["status"]["disruptionsAllowed"])
        for b in budgets
    ] == [(b.namespace, b.name, b.disruptions_allowed) for b in snapshot.budgets]
    assert snapshot.budgets[0].disruptions_allowed == 1  # three healthy, two must stay


def test_kubectl_authenticates_over_tls_with_a_token_as_to_a_real_cluster(tmp_path: Path) -> None:
    # Given the server on TLS (its own CA) answering only a bearer token, as a cluster
    # outside EKS serves, and the kubeconfig a cluster secret holds for it
    with tls_api(tmp_path / "tls", small_cluster(min_available=2), token="sa-token") as (
        server,
        certificate,
    ):
        good = write_kubeconfig(tmp_path / "good", server.url, "sa-token", certificate.ca_pem)
        other_ca = issue(tmp_path / "other", "another-ca").ca_pem
        wrong = write_kubeconfig(tmp_path / "wrong", server.url, "sa-token", other_ca)
        stale = write_kubeconfig(tmp_path / "stale", server.url, "old", certificate.ca_pem)
        # When kubectl lists nodes with each
        listed, untrusted, refused = (Kubectl(c)("get", "nodes") for c in (good, wrong, stale))
    # Then only the kubeconfig with the right CA and token is answered
    assert listed.returncode == 0 and "n1" in listed.stdout, listed.stderr
    assert untrusted.returncode != 0 and "x509" in untrusted.stderr
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr


def test_kubectl_cordons_and_uncordons_as_the_drain_adapter_sees_it(served: Serve) -> None:
    _, config = served(small_cluster(min_available=2))
    run = Kubectl(config)
    connection = KubeconfigConnection(config)
    reader, drain = KubernetesCluster(connection), KubernetesDrain(connection)

    cordoned = run("cordon", "n1")
    seen_cordoned = {n.name: n.schedulable for n in reader.nodes()}
    ours_to_undo = drain.cordon("n1")  # False: cordoned already, by someone else
    uncordoned = run("uncordon", "n1")
    seen_uncordoned = {n.name: n.schedulable for n in reader.nodes()}
    drain.cordon("n2")
    n2 = json.loads(run("get", "node", "n2", "-o", "json").stdout)

    assert (cordoned.returncode, cordoned.stdout) == (0, "node/n1 cordoned\n"), cordoned.stderr
    assert (uncordoned.returncode, uncordoned.stdout) == (0, "node/n1 uncordoned\n")
    assert seen_cordoned == {"n1": False, "n2": True}
    assert ours_to_undo is False
    assert seen_uncordoned == {"n1": True, "n2": True}
    assert n2["spec"]["unschedulable"] is True


def test_kubectl_drain_evicts_what_nodescaler_would_and_leaves_the_daemon_set_pod(
    served: Serve,
) -> None:
    cluster = small_cluster(min_available=1)  # three healthy web pods: two may go
    _, config = served(cluster)
    connection = KubeconfigConnection(config)
    drain = KubernetesDrain(connection)
    nodescaler_would_evict = sorted(p.key for p in drain.pods_on("n1") if p.stays is None)

    drained = Kubectl(config)("drain", "n1", "--ignore-daemonsets", "--timeout=60s")

    assert drained.returncode == 0, drained.stderr
    assert "ignoring DaemonSet-managed Pods: default/agent-n1" in drained.stderr
    evicted = sorted(f"{namespace}/{name}" for namespace, name, _ in cluster.evictions)
    assert evicted == nodescaler_would_evict == ["default/web-0", "default/web-1"]
    assert [p.key for p in drain.pods_on("n1")] == ["default/agent-n1"]
    assert {n.name: n.schedulable for n in KubernetesCluster(connection).nodes()} == {
        "n1": False,
        "n2": True,
    }


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a condition kubectl brings about, failing (not hanging) if it never does."""
    deadline = time.monotonic() + RUN_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"kubectl never {what}")
        time.sleep(0.1)


def test_kubectl_drain_waits_until_evicted_pods_have_terminated(served: Serve) -> None:
    cluster = small_cluster(min_available=1)
    cluster.graceful_deletion = True  # an evicted pod stays, terminating, until stopped
    server, config = served(cluster)
    drain = KubernetesDrain(KubeconfigConnection(config))
    polled = "GET /api/v1/namespaces/default/pods/web-0"

    with Kubectl(config).started("drain", "n1", "--ignore-daemonsets", "--timeout=60s") as run:
        try:
            # a second look at the pod means the first found it still there
            _until(lambda: sum(r.startswith(polled) for r in server.requests) >= 2, "polled")
            still_draining = run.poll() is None
            terminating = sorted(p.key for p in drain.pods_on("n1"))
            stopped = cluster.stop_terminating("n1")
            _, errors = run.communicate(timeout=RUN_SECONDS)
        finally:
            run.kill()

    assert still_draining
    assert terminating == ["default/agent-n1", "default/web-0", "default/web-1"]
    assert stopped == ["default/web-0", "default/web-1"]
    assert run.returncode == 0, errors


def test_a_drain_the_budget_blocks_retries_until_kubectl_gives_up(served: Serve) -> None:
    cluster = small_cluster(min_available=3)  # three healthy web pods: none may go
    _, config = served(cluster)
    drain = KubernetesDrain(KubeconfigConnection(config))

    blocked = Kubectl(config)("drain", "n1", "--ignore-daemonsets", "--timeout=11s")
    nodescaler_sees = drain.evict(DrainPod("default", "web-0"), grace_seconds=30)

    assert blocked.returncode == 1
    assert "Cannot evict pod as it would violate the pod's disruption budget" in blocked.stderr
    assert "global timeout reached: 11s" in blocked.stderr
    tries = [name for _, name, _ in cluster.evictions]
    # kubectl tries again every 5 seconds: at least twice in 11
    assert tries.count("web-0") >= 2 and tries.count("web-1") >= 2
    assert sorted(p.key for p in drain.pods_on("n1")) == [
        "default/agent-n1",
        "default/web-0",
        "default/web-1",
    ]
    assert nodescaler_sees.outcome is EvictionOutcome.BLOCKED
    assert nodescaler_sees.reason == (
        "blocked by PodDisruptionBudget default/web (needs 3 healthy pods and has 3 currently)"
    )


def test_without_debians_kubectl_the_tests_fail_saying_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kubectl, "KUBECTL", tmp_path / "kubectl")
    with pytest.raises(pytest.fail.Exception) as failed:
        Kubectl(tmp_path / "kubeconfig")
    assert str(failed.value) == kubectl.HOW_TO_INSTALL
    assert "make test" in kubectl.HOW_TO_INSTALL  # what fetches it: only the tests need it


def test_where_apt_cannot_fetch_it_the_bootstrap_says_why_and_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kubectl, "KUBECTL", tmp_path / "usr" / "bin" / "kubectl")
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get, no dpkg-deb
    with pytest.raises(SystemExit) as exited:
        kubectl.main()
    assert str(exited.value.code) == (
        f"no apt-get or dpkg-deb here to fetch {kubectl.PACKAGE}={kubectl.VERSION}\n"
        f"{kubectl.HOW_TO_INSTALL}"
    )

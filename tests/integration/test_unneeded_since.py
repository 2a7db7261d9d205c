"""How long a node has been unneeded, kept on the node itself: evaluate's soft taint says
when it was first marked (a Unix time, as Cluster Autoscaler's DeletionCandidate taint),
through the real `kubernetes` client against the loopback API server; the next
evaluation, another Lambda, reads it back from the node."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from nodescaler.adapters.k8s.connection import KubeconfigConnection
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler.domain.scale_down.unneeded import CANDIDATE_TAINT, marked_since
from nodescaler_sandbox.kube.apiserver import Cluster, KubeApiServer

from tests.builders import T0
from tests.kube import kubeconfig, node

OWN = {"key": "team", "value": "web", "effect": "NoSchedule"}


def test_a_mark_says_when_it_was_made_and_keeps_that_time_while_it_stays(tmp_path: Path) -> None:
    store = Cluster()
    store.put("nodes", node("ip-1", None, taints=[OWN]))
    untimed = {"key": CANDIDATE_TAINT.key, "effect": CANDIDATE_TAINT.effect}
    store.put("nodes", node("ip-2", None, taints=[OWN, untimed]))
    with KubeApiServer(store, token="secret") as server:
        cluster = KubernetesCluster(KubeconfigConnection(kubeconfig(tmp_path / "k", server.url)))
        # When ip-1 is marked at T0, and again a minute later
        cluster.mark_candidate("ip-1", True, T0)
        cluster.mark_candidate("ip-1", True, T0 + timedelta(minutes=1))
        # and ip-2, marked by an earlier version without a time, is marked again
        cluster.mark_candidate("ip-2", True, T0 + timedelta(minutes=2))

        def since(name: str) -> object:
            (found,) = [n for n in cluster.snapshot().nodes if n.name == name]
            return marked_since(found)

        # Then ip-1 says T0 (the first mark's time stays), beside its own taint
        assert since("ip-1") == T0
        taints = store.objects["nodes"][("", "ip-1")]["spec"]["taints"]
        assert taints[0] == OWN and taints[1]["value"] == str(int(T0.timestamp()))
        # And ip-2 now has a time to count from
        assert since("ip-2") == T0 + timedelta(minutes=2)
        # And unmarked, then marked again, the clock starts anew
        cluster.mark_candidate("ip-1", False, T0 + timedelta(minutes=3))
        assert since("ip-1") is None
        assert store.objects["nodes"][("", "ip-1")]["spec"]["taints"] == [OWN]
        cluster.mark_candidate("ip-1", True, T0 + timedelta(minutes=4))
        assert since("ip-1") == T0 + timedelta(minutes=4)

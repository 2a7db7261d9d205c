"""The evaluate function's Kubernetes reads end with its invocation: wired from settings,
the cluster's reader shares the invocation's deadline (`nodescaler.deadline`) with the
evaluation, so a slow API server cannot hold evaluate past its Lambda timeout."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler.deadline import RECORDING_MARGIN
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.errors import OutOfTimeError
from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import CallCounter
from tests.builders import VirtualClock, metric, policy_document, reservation_metric
from tests.e2e.conftest import Deployment
from tests.kube import cluster_of, kubeconfig, node

CPU_60 = reservation_metric("cpu", 60)
GROUP = NodeGroup("web", 1, 0, 10, 1, eks_cluster="prod", eks_nodegroup="a")


def test_given_an_invocation_with_no_time_left_its_cluster_read_is_not_made_but_retried(
    tmp_path: Path, policies: Path, calls: CallCounter, clock: VirtualClock
) -> None:
    # Given evaluate deployed with a policy read from the cluster, and an API server
    (policies / "web.yaml").write_text(policy_document("web", CPU_60))
    with KubeApiServer(cluster_of(("nodes", node("a-1", "a")))) as server:
        settings = {"KUBECONFIG_PATH": str(kubeconfig(tmp_path / "kubeconfig", server.url))}
        deployment = Deployment(policies, calls, clock, settings)
        view = deployment.evaluator.cluster.view
        assert view is not None

        # When an invocation starts with only the time it keeps to record its results
        deployment.evaluator.deadline.start(int(RECORDING_MARGIN * 1000))
        with pytest.raises(OutOfTimeError, match="not asked, the invocation has no time left"):
            view.read(metric(CPU_60), GROUP, clock.now())
        asked = list(server.requests)

    # Then the cluster is not asked, and the read is out of time: the record is retried by a
    # later invocation, neither a metric failure (no fallback advanced) nor a decision
    assert asked == []

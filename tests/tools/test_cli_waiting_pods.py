"""`nodescaler status` and `explain` name the pending pods that fit no node group, and why,
as the last evaluation recorded them: two batch groups at zero, evaluated through the
handlers against the loopback API server, then read back from the state table in moto."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from nodescaler_cli.main import main
from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import (
    CallCounter,
    aws,  # noqa: F401  (moto for every test here)
)
from tests.builders import VirtualClock
from tests.e2e.conftest import TABLE, Deployment
from tests.e2e.test_kubernetes_path import BATCH_POLICY, group_at_zero, launch_template
from tests.kube import kubeconfig, pod
from tests.tools.test_operator_cli import table

GPU_TAINT = {"k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "true:NoSchedule"}
NOT_HERE = {
    "general-ng": "needs more nvidia.com/gpu than a node of the group has",
    "gpu-ng": "does not tolerate taint nvidia.com/gpu=true:NoSchedule",
}


@pytest.fixture
def evaluated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Iterator[None]:
    """general-ng (m5.large) and gpu-ng (g5.xlarge, tainted) at zero; a plain pod general-ng
    takes, a GPU pod that tolerates no taint, and a pod whose nodeSelector no group's nodes
    carry; one tick evaluated both groups."""
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    with KubeApiServer(token="secret") as server:
        config = kubeconfig(tmp_path / "kubeconfig", server.url)
        launch_template("general", "m5.large")
        launch_template("gpu", "g5.xlarge")
        deployment = Deployment(
            policies, CallCounter(), VirtualClock(), {"KUBECONFIG_PATH": str(config)}
        )
        group_at_zero("gpu-ng", "gpu", GPU_TAINT)
        group_at_zero("general-ng", "general")
        gpu = {"containers": [{"name": "job", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}
        server.cluster.put("pods", pod("gpu-job", spec=gpu))
        server.cluster.put(
            "pods", pod("wants-a10", cpu="1", spec={"nodeSelector": {"accelerator": "a10"}})
        )
        server.cluster.put("pods", pod("plain", cpu="1"))
        deployment.tick()
    capsys.readouterr()  # the functions' own log lines
    yield


@pytest.mark.usefixtures("evaluated")
def test_status_names_the_pods_that_fit_no_group_and_why_not_each_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # When the operator asks for the status
    assert main(["status", "-o", "wide", "--table", TABLE]) == 0
    # Then each group's row counts the waiting pods, names the first, and why it does not
    # fit that group (the plain pod has its node coming: it is not waiting)
    rows = {r["GROUP"]: r for r in table(capsys.readouterr().out)}
    assert [rows["general-ng"][c] for c in ("POLICY", "CURRENT", "DESIRED")] == ["batch", "1", "1"]
    assert [rows["gpu-ng"][c] for c in ("POLICY", "CURRENT", "DESIRED")] == ["batch", "0", "0"]
    for group, why in NOT_HERE.items():
        assert rows[group]["NOTES"] == (
            f"2 pods fit no group: default/gpu-job and 1 more (here: {why})"
        )


@pytest.mark.usefixtures("evaluated")
def test_explain_names_a_pod_that_fits_no_group_and_why_for_every_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # When the operator asks why gpu-ng did not grow
    assert main(["explain", "gpu-ng", "--table", TABLE]) == 0
    # Then its pending-pods line counts the waiting pods and names the first, and why not,
    # group by group
    decided, readings = capsys.readouterr().out.split("\n\n")
    assert table(decided)[0]["REASON"] == "hold at 0"
    assert (
        f"2 fit no group (default/gpu-job: general-ng: {NOT_HERE['general-ng']}; "
        f"gpu-ng: {NOT_HERE['gpu-ng']}; ...)"
    ) in table(readings)[0]["DETAIL"]

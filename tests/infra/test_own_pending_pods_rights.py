"""A deployment with a cluster whose only policy reads a queue: evaluate reads the cluster
(its own pending pods, `domain.scaling.own_pods`) unless the policy turns that off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.infra.stack_template import actions_of, resources, role_statements
from tests.infra.test_stack import REPO, synth


def queue_only(folder: Path, extra: str = "") -> dict[str, Any]:
    """The sample context with one policy, the GPU training queue's (and `extra` in its spec)."""
    text = (REPO / "policies" / "gpu-training.yaml").read_text()
    (folder / "gpu.yaml").write_text(text.replace("spec:\n", f"spec:\n{extra}", 1))
    return {"policiesFolder": str(folder)}


def evaluate_reads_the_cluster(overrides: dict[str, Any]) -> bool:
    template = synth(**overrides)
    actions = {a for s in role_statements(template, "evaluate") for a in actions_of(s)}
    entries = [
        e["Properties"]["KubernetesGroups"]
        for e in resources(template, "AWS::EKS::AccessEntry").values()
    ]
    return "eks:DescribeCluster" in actions and ["nodescaler-evaluate"] in entries


def test_given_a_cluster_and_a_queue_policy_then_evaluate_may_read_the_cluster(
    tmp_path: Path,
) -> None:
    assert evaluate_reads_the_cluster(queue_only(tmp_path))


def test_given_own_pending_pods_turned_off_then_evaluate_never_reads_the_cluster(
    tmp_path: Path,
) -> None:
    assert not evaluate_reads_the_cluster(queue_only(tmp_path, "  ownPendingPods: false\n"))


def test_given_no_cluster_then_a_queue_policy_reads_none(tmp_path: Path) -> None:
    template = synth(**queue_only(tmp_path) | {"clusterName": "", "allGroups": True})
    assert resources(template, "AWS::EKS::AccessEntry") == {}
    actions = {a for s in role_statements(template, "evaluate") for a in actions_of(s)}
    assert "eks:DescribeCluster" not in actions

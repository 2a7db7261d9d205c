"""A cluster outside EKS: the service account whose token the deployment's secret holds
gets exactly the roles rbac.yaml defines for the three functions, and the admission policy
keeps its node changes to cordoning and nodescaler's own taint (CEL evaluated by
cel-python, as the API server would)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

KUBERNETES = Path(__file__).resolve().parents[2] / "infra" / "kubernetes"
ACCOUNT = "system:serviceaccount:kube-system:nodescaler"
POLICY = "nodescaler-service-account-cordons-and-marks-only"
CANDIDATE = {"key": "nodescaler.io/deletion-candidate", "effect": "PreferNoSchedule"}
ROOM = {"key": "nodescaler.io/buffer-room", "effect": "PreferNoSchedule"}
GPU = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
NODE: dict[str, Any] = {
    "metadata": {"name": "n1", "labels": {"pool": "web"}, "annotations": {"a": "1"}},
    "spec": {"providerID": "aws:///eu-west-1a/i-0abc", "podCIDRs": ["10.1.0.0/24"]},
}


def manifests(path: Path) -> list[dict[str, Any]]:
    return [m for m in yaml.safe_load_all(path.read_text()) if m]


SELF_MANAGED = manifests(KUBERNETES / "self-managed" / "service-account.yaml")


def test_the_service_account_is_bound_to_every_role_rbac_yaml_defines() -> None:
    roles = {
        m["metadata"]["name"]
        for m in manifests(KUBERNETES / "rbac.yaml")
        if m["kind"] == "ClusterRole"
    }
    bound = {
        m["roleRef"]["name"]
        for m in SELF_MANAGED
        if m["kind"] == "ClusterRoleBinding"
        and m["subjects"]
        == [{"kind": "ServiceAccount", "name": "nodescaler", "namespace": "kube-system"}]
    }
    assert (
        roles
        == bound
        == {
            "nodescaler-evaluate",
            "nodescaler-drain",
            "nodescaler-terminate",
            "nodescaler-fast-path",
        }
    )
    (token,) = (m for m in SELF_MANAGED if m["kind"] == "Secret")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"]["kubernetes.io/service-account.name"] == "nodescaler"


def admitted(new: dict[str, Any], old: dict[str, Any] = NODE, user: str = ACCOUNT) -> list[str]:
    import celpy
    from celpy import json_to_cel

    (policy,) = (m for m in SELF_MANAGED if m["kind"] == "ValidatingAdmissionPolicy")
    (binding,) = (m for m in SELF_MANAGED if m["kind"] == "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": POLICY, "validationActions": ["Deny"]}
    environment = celpy.Environment()
    activation = {
        "object": json_to_cel(new),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"userInfo": {"username": user, "groups": []}}),
    }

    def holds(expression: str) -> bool:
        return bool(environment.program(environment.compile(expression)).evaluate(activation))

    if not all(holds(c["expression"]) for c in policy["spec"]["matchConditions"]):
        return ["not matched"]
    return [v["message"] for v in policy["spec"]["validations"] if not holds(v["expression"])]


def node(**changes: Any) -> dict[str, Any]:
    changed = json.loads(json.dumps(NODE))
    for path, value in changes.items():
        section, field = path.split("__")
        changed[section][field] = value
    return changed


def test_the_account_may_cordon_a_node_and_mark_it_with_its_soft_taint() -> None:
    gpu = node(spec__taints=[GPU])
    assert admitted(node(spec__unschedulable=True)) == []
    assert admitted(node(spec__taints=[GPU, CANDIDATE]), gpu) == []
    assert admitted(gpu, node(spec__taints=[GPU, CANDIDATE])) == []
    assert admitted(node(spec__taints=[GPU, ROOM]), gpu) == []
    assert admitted(gpu, node(spec__taints=[GPU, ROOM])) == []


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({"spec__taints": []}, "only its own taint of a node, and cordon it"),
        ({"spec__taints": [GPU, {**CANDIDATE, "effect": "NoExecute"}]}, "PreferNoSchedule"),
        ({"spec__taints": [GPU, {**ROOM, "effect": "NoSchedule"}]}, "PreferNoSchedule"),
        ({"spec__taints": [GPU], "metadata__labels": {}}, "whether it is cordoned"),
        ({"spec__taints": [GPU], "spec__providerID": "aws:///x/i-1"}, "whether it is cordoned"),
    ],
)
def test_the_account_may_change_nothing_else_of_a_node(
    change: dict[str, Any], refused: str
) -> None:
    messages = admitted(node(**change), node(spec__taints=[GPU]))
    assert len(messages) == 1 and messages[0].endswith(refused)


def test_the_policy_leaves_every_other_user_alone() -> None:
    assert admitted(node(spec__taints=[]), user="system:node:n1") == ["not matched"]

"""infra/kubernetes/admission-policy.yaml: which node updates the drain and evaluate may
send, its CEL evaluated by cel-python as the API server would."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.stack_template import kubernetes_manifests

# The admission policy is CEL; cel-python evaluates it as the API server would.
NODE = {
    "metadata": {"name": "ip-10-0-1-5", "labels": {"pool": "web"}, "annotations": {"a": "1"}},
    "spec": {"providerID": "aws:///us-east-1a/i-0abc", "podCIDRs": ["10.1.0.0/24"]},
}


DRAIN_POLICY = "nodescaler-drain-cordons-only"


EVALUATE_POLICY = "nodescaler-evaluate-marks-candidates-only"


def admitted(
    new: dict[str, Any],
    groups: tuple[str, ...] = ("nodescaler-drain",),
    name: str = DRAIN_POLICY,
    old: dict[str, Any] = NODE,
) -> list[str]:
    """The messages of the validations of policy `name` a node update fails; ["not
    matched"] when the policy does not apply to the user."""
    import celpy
    from celpy import json_to_cel

    manifests = kubernetes_manifests()
    (policy,) = (
        m
        for m in manifests
        if m["kind"] == "ValidatingAdmissionPolicy" and m["metadata"]["name"] == name
    )
    (binding,) = (
        m
        for m in manifests
        if m["kind"] == "ValidatingAdmissionPolicyBinding" and m["metadata"]["name"] == name
    )
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    spec = policy["spec"]
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    environment = celpy.Environment()
    activation = {
        "object": json_to_cel(new),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"userInfo": {"groups": list(groups)}}),
    }

    def holds(expression: str) -> bool:
        return bool(environment.program(environment.compile(expression)).evaluate(activation))

    if not all(holds(condition["expression"]) for condition in spec["matchConditions"]):
        return ["not matched"]
    return [v["message"] for v in spec["validations"] if not holds(v["expression"])]


def patched(**changes: Any) -> dict[str, Any]:
    node = json.loads(json.dumps(NODE))
    for path, value in changes.items():
        section, field = path.split("__")
        node[section][field] = value
    return node


def test_the_drain_may_cordon_and_uncordon_a_node() -> None:
    assert admitted(patched(spec__unschedulable=True)) == []
    assert admitted(patched(spec__unschedulable=False)) == []


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({"spec__taints": [{"key": "x", "effect": "NoExecute"}]}, "taints"),
        ({"metadata__labels": {"pool": "batch"}}, "labels"),
        ({"metadata__annotations": {}}, "annotations"),
        ({"metadata__finalizers": ["keep"]}, "finalizers"),
        ({"metadata__ownerReferences": [{"kind": "X", "name": "y"}]}, "owners"),
        ({"spec__providerID": "aws:///us-east-1a/i-0def"}, "only spec.unschedulable"),
        ({"spec__podCIDRs": []}, "only spec.unschedulable"),
    ],
)
def test_the_drain_may_change_nothing_else_of_a_node(change: dict[str, Any], refused: str) -> None:
    messages = admitted(patched(**change, spec__unschedulable=True))
    assert len(messages) == 1 and messages[0].endswith(refused)


def test_the_admission_policy_leaves_every_other_user_alone() -> None:
    tainted = patched(spec__taints=[{"key": "x", "effect": "NoExecute"}])
    assert admitted(tainted, groups=("system:nodes", "nodescaler-evaluate")) == ["not matched"]
    assert admitted(tainted, ("system:nodes",), EVALUATE_POLICY) == ["not matched"]


CANDIDATE = {"key": "nodescaler.io/deletion-candidate", "effect": "PreferNoSchedule"}


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def evaluate_admits(new: dict[str, Any], old: dict[str, Any] = NODE) -> list[str]:
    return admitted(new, ("nodescaler-evaluate",), EVALUATE_POLICY, old)


ROOM = {"key": "nodescaler.io/buffer-room", "effect": "PreferNoSchedule"}


@pytest.mark.parametrize("soft", [CANDIDATE, ROOM])
def test_evaluate_may_add_and_remove_its_soft_taints_beside_the_nodes_own(
    soft: dict[str, str],
) -> None:
    gpu = patched(spec__taints=[GPU_TAINT])
    assert evaluate_admits(patched(spec__taints=[GPU_TAINT, soft]), gpu) == []
    assert evaluate_admits(gpu, patched(spec__taints=[GPU_TAINT, soft])) == []
    assert evaluate_admits(patched(spec__taints=[soft])) == []


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({"spec__taints": []}, "only its own taint of a node"),  # the GPU taint removed
        ({"spec__taints": [GPU_TAINT, {**CANDIDATE, "effect": "NoExecute"}]}, "PreferNoSchedule"),
        ({"spec__taints": [GPU_TAINT, {**ROOM, "effect": "NoSchedule"}]}, "PreferNoSchedule"),
        ({"spec__taints": [GPU_TAINT, {**ROOM, "key": "nodescaler.io/x"}]}, "taint of a node"),
        (
            {"spec__taints": [GPU_TAINT, CANDIDATE], "spec__unschedulable": True},
            "its taint of a node",
        ),
        ({"spec__taints": [GPU_TAINT], "metadata__labels": {}}, "its taint of a node"),
        ({"spec__taints": [GPU_TAINT], "spec__providerID": "aws:///x/i-1"}, "its taint of a node"),
    ],
)
def test_evaluate_may_change_nothing_else_of_a_node(change: dict[str, Any], refused: str) -> None:
    messages = evaluate_admits(patched(**change), patched(spec__taints=[GPU_TAINT]))
    assert len(messages) == 1 and messages[0].endswith(refused)

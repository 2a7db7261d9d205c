"""A deployment for a cluster outside EKS: its functions reach it through one secret, are
granted that secret and nothing of EKS's, and no EKS access entry is made for them."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.settings import SettingsError
from tests.infra.test_stack import synth

SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod-kube-AbCdEf"
PEM = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
CLUSTER_FUNCTIONS = ("Evaluate", "Drain", "Terminate", "FastPath")  # each reads the cluster


@pytest.fixture(scope="module")
def self_managed() -> Template:
    return synth(drainGroups=["web"], kubernetes={"secretArn": SECRET})


def functions(template: Template) -> dict[str, dict[str, Any]]:
    found = template.find_resources("AWS::Lambda::Function")
    return {
        name: props
        for logical, resource in found.items()
        if (props := resource["Properties"])
        and (
            name := next(
                (f for f in CLUSTER_FUNCTIONS if f"Nodescaler{f}Function" in logical), None
            )
        )
    }


def statements(template: Template) -> list[dict[str, Any]]:
    policies = template.find_resources("AWS::IAM::Policy")
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


def test_evaluate_drain_and_terminate_are_told_the_secret(self_managed: Template) -> None:
    found = functions(self_managed)
    assert sorted(found) == sorted(CLUSTER_FUNCTIONS)
    for props in found.values():
        assert props["Environment"]["Variables"]["KUBERNETES_SECRET"] == SECRET


def test_the_secret_is_granted_and_nothing_of_eks(self_managed: Template) -> None:
    granted = [
        s
        for s in statements(self_managed)
        if "secretsmanager:GetSecretValue" in json.dumps(s["Action"])
    ]
    assert granted and all(s["Resource"] == SECRET for s in granted)
    assert len(granted) == len(CLUSTER_FUNCTIONS)
    assert "eks:DescribeCluster" not in json.dumps(statements(self_managed))
    assert self_managed.find_resources("AWS::EKS::AccessEntry") == {}


def test_an_eks_deployment_still_describes_its_cluster_and_has_access_entries() -> None:
    eks = synth(drainGroups=["web"])
    assert "eks:DescribeCluster" in json.dumps(statements(eks))
    assert len(eks.find_resources("AWS::EKS::AccessEntry")) == len(CLUSTER_FUNCTIONS)
    assert all(
        "KUBERNETES_SECRET" not in p["Environment"]["Variables"] for p in functions(eks).values()
    )


@pytest.mark.parametrize(
    ("kubernetes", "named"),
    [
        ({"secretArn": "prod-kube"}, "kubernetes.secretArn"),
        ({"secretArn": SECRET, "endpoint": "http://10.0.0.1"}, "kubernetes.endpoint"),
        ({"secretArn": SECRET, "endpoint": "https://k", "caBundle": "x!"}, "is not base64"),
        ({"secretArn": SECRET, "caBundle": PEM.decode()}, "without the endpoint"),
    ],
)
def test_a_bad_kubernetes_setting_is_named(kubernetes: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        synth(kubernetes=kubernetes)

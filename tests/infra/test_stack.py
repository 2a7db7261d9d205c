"""The synthesized template, and synth refusing bad settings or policies with a clear message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from nodescaler.domain.policy import NodeGroupPolicy

from infra.settings import DeploySettings, SettingsError, load_settings
from infra.stack import NodescalerStack

REPO = Path(__file__).resolve().parents[2]
CDK_JSON = json.loads((REPO / "cdk.json").read_text())["context"]
CDK_CONTEXT = CDK_JSON["nodescaler"]
# cdk.json's feature flags, so a test's template is the one `cdk synth` makes.
FEATURE_FLAGS = {k: v for k, v in CDK_JSON.items() if k.startswith("@aws-cdk")}


# The templates synthesized this session, by what makes them (see synth): most tests read
# a few stacks, and a synth costs about a second of the JS runtime.
_SYNTHS: dict[str, Template] = {}


def synth_stack(**overrides: Any) -> NodescalerStack:
    """A fresh stack, for tests that add to it (cdk-nag's aspects) or read its annotations."""
    settings, policies = load_settings(CDK_CONTEXT | overrides, REPO)
    return _stack(settings, policies)


def _stack(settings: DeploySettings, policies: dict[str, NodeGroupPolicy]) -> NodescalerStack:
    # Layers are staged unbuilt here; test_cdk_cli.py builds them with the real CLI.
    app = cdk.App(context=FEATURE_FLAGS | {"aws:cdk:bundling-stacks": []})
    return NodescalerStack(app, "Test", settings=settings, policies=policies)


def synth(**overrides: Any) -> Template:
    """The template of the sample context with these overrides, synthesized once a session
    for each settings and policies (a Template is only read: its finders return copies)."""
    settings, policies = load_settings(CDK_CONTEXT | overrides, REPO)
    key = synth_key(settings, policies)
    if key not in _SYNTHS:
        _SYNTHS[key] = Template.from_stack(_stack(settings, policies))
    return _SYNTHS[key]


def synth_key(settings: DeploySettings, policies: dict[str, NodeGroupPolicy]) -> str:
    """What the stack is built from: the validated settings and policies (the policies
    layer carries these policies written out, not the folder's files)."""
    made_of = [
        settings.model_dump(mode="json"),
        {name: policy.model_dump(mode="json") for name, policy in policies.items()},
    ]
    return json.dumps(made_of, sort_keys=True)


def test_the_state_table_is_on_demand_recoverable_encrypted_and_expires_audit_items(
    template: Template,
) -> None:
    template.has_resource(
        "AWS::DynamoDB::GlobalTable",
        {
            "Properties": Match.object_like(
                {
                    "BillingMode": "PAY_PER_REQUEST",
                    "SSESpecification": {"SSEEnabled": True},
                    "TimeToLiveSpecification": {"AttributeName": "expires_at", "Enabled": True},
                    "Replicas": [
                        Match.object_like(
                            {
                                "PointInTimeRecoverySpecification": {
                                    "PointInTimeRecoveryEnabled": True
                                },
                                "DeletionProtectionEnabled": True,
                            }
                        )
                    ],
                }
            ),
            "DeletionPolicy": "Retain",
        },
    )


def test_synth_makes_a_template_once_a_session_and_anew_when_what_it_is_made_of_changes(
    template: Template, tmp_path: Path
) -> None:
    # Given the sample stack, synthesized for the session
    # When a test asks for it again, Then it is that template, as a fresh synth makes it
    assert synth() is template
    assert Template.from_stack(synth_stack()).to_json() == template.to_json()
    # and reading it changes nothing a later test reads
    template.to_json()["Resources"].clear()
    assert template.to_json()["Resources"]
    # When a setting or a policy differs, Then it is another template
    assert synth(tickMinutes=5) is not template
    (tmp_path / "gpu.yaml").write_text((REPO / "policies" / "gpu-training.yaml").read_text())
    context = CDK_CONTEXT | {"clusterName": "", "allGroups": True, "policiesFolder": str(tmp_path)}
    before = synth_key(*load_settings(context, REPO))
    (tmp_path / "gpu.yaml").write_text(
        (tmp_path / "gpu.yaml").read_text().replace("maxReplicas: 1000", "maxReplicas: 999")
    )
    assert synth_key(*load_settings(context, REPO)) != before


def test_deletion_protection_follows_the_context() -> None:
    replicas = synth(deletionProtection=False).find_resources("AWS::DynamoDB::GlobalTable")
    (table,) = replicas.values()
    assert table["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] is False
    assert table["DeletionPolicy"] == "Delete"


def test_the_sample_context_is_what_the_defaults_say_with_a_cluster_named() -> None:
    settings, policies = load_settings(CDK_CONTEXT, REPO)
    assert settings == DeploySettings(cluster_name="my-cluster", allowed_groups=["*"])
    assert set(policies) == {
        "gpu-training",
        "microservices",
        "business-hours",
        "web",
        "web-predictive",
        "prometheus-queue",
        "web-warm",
    }


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"tickMinutes": 0},
            "cdk.json: context.nodescaler.tickMinutes: Input should be greater than or equal to 1",
        ),
        (
            {"clusterName": "bad name!"},
            "cdk.json: context.nodescaler.clusterName: should be an EKS cluster's name: letters, "
            "digits, '-' and '_', starting with a letter or digit; got 'bad name!'",
        ),
        (
            {"tags": {"enabled": ""}},
            "cdk.json: context.nodescaler.tags.enabled: String should have at least 1 character",
        ),
        ({"tickRate": 5}, "cdk.json: context.nodescaler.tickRate: unknown field"),
        (
            {"alarms": {"emial": "oncall@example.com"}},
            "cdk.json: context.nodescaler.alarms.emial: unknown field (did you mean email?)",
        ),
        ({"policiesFolder": "no/such/folder"}, "no/such/folder: (folder): no such policy folder"),
        (
            {"expanders": [{"name": "weighted-priority", "tiers": {"1": {"spot-.*": 0}}}]},
            "cdk.json: context.nodescaler.expanders[0].weighted-priority.tiers.1.spot-.*: "
            "Input should be greater than 0",
        ),
        (
            {"expanders": [{"name": "balance", "ignoreLabels": ["team"]}]},
            "cdk.json: context.nodescaler.expanders[0].balance.ignoreLabels: unknown field",
        ),
        (
            {"vpc": {"subnetIds": ["subnet-0a"], "securityGroupIds": ["default"]}},
            "cdk.json: context.nodescaler.vpc.securityGroupIds[0]: should be a security group "
            "ID, sg- and 8 or 17 hexadecimal digits; got 'default'",
        ),
        (
            {"clusterName": ""},
            "cdk.json: context.nodescaler.clusterName: is empty, but policies microservices, web, web-predictive, web-warm read "
            "Kubernetes metrics from the cluster; set the EKS cluster's name",
        ),
        (
            {"drainGroups": ["web", "nodes-*"]},
            "cdk.json: context.nodescaler.drainGroups[1]: should be an Auto Scaling group's name",
        ),
        (
            {"drainGroups": ["web", "gpu", "web"]},
            "cdk.json: context.nodescaler.drainGroups: listed more than once: web",
        ),
        (
            {"kubernetesTimeoutSeconds": 30},
            "cdk.json: context.nodescaler.kubernetesTimeoutSeconds: Input should be less than or "
            "equal to 20",
        ),
        (
            {"kubernetesTimeoutSeconds": "five"},
            "cdk.json: context.nodescaler.kubernetesTimeoutSeconds: Input should be a valid number",
        ),
        (
            {"drain": {"timeoutSeconds": 900}},
            "cdk.json: context.nodescaler.drain.timeoutSeconds: Input should be less than or "
            "equal to 840",
        ),
        (
            {"clusterLimits": {"maxNodes": -1}},
            "cdk.json: context.nodescaler.clusterLimits.maxNodes: Input should be greater than or "
            "equal to 0",
        ),
        (
            {"clusterLimits": {"maxCpus": 64}},
            "cdk.json: context.nodescaler.clusterLimits.maxCpus: unknown field",
        ),
        (
            {"backoff": {"initialSeconds": 600, "maxSeconds": 300}},
            "cdk.json: context.nodescaler.backoff: maxSeconds (300) is below initialSeconds (600)",
        ),
    ],
)
def test_given_a_bad_context_value_then_settings_name_it(
    override: dict[str, Any], message: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(CDK_CONTEXT | override, REPO)
    assert message in str(caught.value)


def test_given_groups_to_drain_but_no_cluster_then_settings_say_the_drain_needs_one(
    tmp_path: Path,
) -> None:
    # policies that read no Kubernetes metric, so only the drain asks for the cluster
    (tmp_path / "gpu.yaml").write_text((REPO / "policies" / "gpu-training.yaml").read_text())
    context = CDK_CONTEXT | {
        "clusterName": "",
        "policiesFolder": str(tmp_path),
        "drainGroups": ["web"],
    }
    with pytest.raises(SettingsError) as caught:
        load_settings(context, REPO)
    assert str(caught.value) == (
        "cdk.json: context.nodescaler.drainGroups: names groups to drain, but clusterName is "
        "empty; set the EKS cluster's name (draining needs the cluster)"
    )


def run_app(tmp_path: Path, nodescaler: Any) -> subprocess.CompletedProcess[str]:
    """app.py as the CDK CLI runs it: the context in CDK_CONTEXT_JSON, `-c nodescaler`
    as the string the CLI passes; layers staged unbuilt."""
    context = {"nodescaler": nodescaler, "aws:cdk:bundling-stacks": []}
    return subprocess.run(
        [sys.executable, str(REPO / "app.py")],
        cwd=REPO,
        env=os.environ
        | {"CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path / "out")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_given_a_bad_policy_then_python_app_py_fails_with_the_clear_message(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "metadata: {name: bad}\nspec: {minReplicas: 3, maxReplicas: 1, metrics: [{type: PendingPods}]}\n"
    )
    result = run_app(tmp_path, CDK_CONTEXT | {"policiesFolder": str(tmp_path)})
    assert result.returncode == 1
    assert (
        f"{tmp_path / 'bad.yaml'}: spec.maxReplicas: maxReplicas (1) is below minReplicas (3)"
        in result.stderr
    )

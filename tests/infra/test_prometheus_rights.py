"""The evaluate function's rights for Prometheus metrics: aps:QueryMetrics on the AMP
workspaces the policies name, secretsmanager:GetSecretValue on the bearer token secrets
they name, nothing for policies that name neither, and cdk-nag content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from nodescaler.config import EvaluateSettings

from tests.infra.stack_template import (
    DEPLOYED,
    actions_of,
    environment,
    nag_findings,
    render,
    role_statements,
    statement_for,
)
from tests.infra.test_stack import REPO, synth

ACCOUNT = "<AWS::AccountId>"


def prometheus(name: str, **source: str) -> dict[str, Any]:
    return {
        "type": "Prometheus",
        "name": name,
        "prometheus": {"query": "sum(up)", **source},
        "target": {"type": "Value", "value": 10},
    }


@pytest.fixture(scope="module")
def prometheus_policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("policies")
    metrics = [
        prometheus("by-arn", workspace="arn:aws:aps:us-east-2:111122223333:workspace/ws-a1"),
        prometheus("by-id", workspace="ws-b2"),
        prometheus("by-id-elsewhere", workspace="ws-c3", region="ap-south-1"),
        prometheus("by-arn-again", workspace="arn:aws:aps:us-east-2:111122223333:workspace/ws-a1"),
        prometheus("open", serverAddress="http://prometheus.monitoring:9090"),
        prometheus(
            "token-by-name", serverAddress="https://thanos.internal", bearerTokenSecret="prom/token"
        ),
        prometheus(
            "token-by-arn",
            serverAddress="https://mimir.internal/prometheus",
            bearerTokenSecret="arn:aws:secretsmanager:eu-west-1:111122223333:secret:mimir-AbCdEf",
        ),
        prometheus(
            "token-by-partial-arn",
            serverAddress="https://cortex.internal",
            bearerTokenSecret="arn:aws:secretsmanager:eu-west-1:111122223333:secret:cortex",
        ),
    ]
    document = {
        "metadata": {"name": "prom"},
        "spec": {"minReplicas": 0, "maxReplicas": 10, "metrics": metrics},
    }
    (folder / "prom.yaml").write_text(yaml.safe_dump(document))
    return {"clusterName": "", "allGroups": True, "policiesFolder": str(folder)}


def test_evaluate_may_query_only_the_workspaces_the_policies_name(
    prometheus_policies: dict[str, Any],
) -> None:
    statements = role_statements(synth(**prometheus_policies), "evaluate")
    query = statement_for(statements, "aps:QueryMetrics")
    assert actions_of(query) == ["aps:QueryMetrics"]
    assert sorted(render(r) for r in query["Resource"]) == sorted(
        [
            "arn:aws:aps:us-east-2:111122223333:workspace/ws-a1",
            f"arn:<AWS::Partition>:aps:<AWS::Region>:{ACCOUNT}:workspace/ws-b2",
            f"arn:<AWS::Partition>:aps:ap-south-1:{ACCOUNT}:workspace/ws-c3",
        ]
    )


def test_evaluate_may_read_only_the_token_secrets_the_policies_name(
    prometheus_policies: dict[str, Any],
) -> None:
    statements = role_statements(synth(**prometheus_policies), "evaluate")
    read = statement_for(statements, "secretsmanager:GetSecretValue")
    assert actions_of(read) == ["secretsmanager:GetSecretValue"]
    assert sorted(render(r) for r in read["Resource"]) == [
        f"arn:<AWS::Partition>:secretsmanager:<AWS::Region>:{ACCOUNT}:secret:prom/token-??????",
        # a partial ARN, its six characters left out, matches the secret only with them
        "arn:aws:secretsmanager:eu-west-1:111122223333:secret:cortex-??????",
        "arn:aws:secretsmanager:eu-west-1:111122223333:secret:mimir-AbCdEf",
    ]


def test_evaluate_is_told_which_server_each_token_secret_is_deployed_for(
    prometheus_policies: dict[str, Any],
) -> None:
    variables = environment(synth(**prometheus_policies), "evaluate")
    for name, value in variables.items():
        variables[name] = next((v for k, v in DEPLOYED.items() if value.startswith(k)), value)
    settings = EvaluateSettings.from_environment(variables)
    assert settings.token_origin_pairs == {
        ("prom/token", "https://thanos.internal:443"),
        (
            "arn:aws:secretsmanager:eu-west-1:111122223333:secret:mimir-AbCdEf",
            "https://mimir.internal:443",
        ),
        (
            "arn:aws:secretsmanager:eu-west-1:111122223333:secret:cortex",
            "https://cortex.internal:443",
        ),
    }


def test_the_sample_policy_gets_its_workspace_and_no_secret() -> None:
    statements = role_statements(synth(), "evaluate")
    query = statement_for(statements, "aps:QueryMetrics")
    sample = yaml.safe_load((REPO / "policies" / "prometheus-queue.yaml").read_text())
    workspace = sample["spec"]["metrics"][0]["prometheus"]["workspace"]
    assert render(query["Resource"]) == (
        f"arn:<AWS::Partition>:aps:<AWS::Region>:{ACCOUNT}:workspace/{workspace}"
    )
    assert not any("secretsmanager:" in str(s["Action"]) for s in statements)


def test_policies_without_prometheus_get_no_prometheus_rights(tmp_path: Path) -> None:
    (tmp_path / "gpu.yaml").write_text((REPO / "policies" / "gpu-training.yaml").read_text())
    statements = role_statements(
        synth(clusterName="", allGroups=True, policiesFolder=str(tmp_path)), "evaluate"
    )
    actions = {a for s in statements for a in actions_of(s)}
    assert not any(a.startswith(("aps:", "secretsmanager:")) for a in actions)
    # nor, with no forecast keeping a warm pool, the right to size one
    assert "autoscaling:PutWarmPool" not in actions


def test_cdk_nag_finds_nothing_unsuppressed_with_prometheus_rights(
    prometheus_policies: dict[str, Any],
) -> None:
    assert nag_findings(**prometheus_policies) == []

"""The fast path in the synthesized template (infra/fast_path.py): its function, started
each minute, its rights (the policies' queues alone, the evaluation queue, no writes), an
alarm on its errors; and none of it with cdk.json `fastPath: false`."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Template
from nodescaler.config import FastPathSettings

from tests.infra.stack_template import DEPLOYED, actions_of, render, resources, statement_for
from tests.infra.test_prometheus_rights import prometheus_policies
from tests.infra.test_stack import REPO, synth

__all__ = ["prometheus_policies"]  # a fixture: the policies of test_prometheus_rights


def fast_path_function(template: Template) -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, f["Properties"])
        for name, f in resources(template, "AWS::Lambda::Function").items()
        if name.startswith("NodescalerFastPathFunction")
    ]


def fast_path_statements(template: Template) -> list[dict[str, Any]]:
    return [
        statement
        for name, policy in resources(template, "AWS::IAM::Policy").items()
        if name.startswith("NodescalerFastPathRole")
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_given_the_default_settings_then_the_fast_path_runs_each_minute_with_its_settings(
    template: Template,
) -> None:
    ((name, function),) = fast_path_function(template)
    variables = {k: render(v) for k, v in function["Environment"]["Variables"].items()}
    names = FastPathSettings.model_fields
    assert names["evaluation_queue_url"].alias in variables
    assert "<NodescalerEvaluations" in variables[names["evaluation_queue_url"].alias]
    assert function["Timeout"] == 65 and function["MemorySize"] == 256
    # one invocation at a time: two would each ask for the same new pods
    assert function["ReservedConcurrentExecutions"] == 1
    (schedule,) = (
        r["Properties"]
        for r in resources(template, "AWS::Events::Rule").values()
        if r["Properties"].get("ScheduleExpression") == "rate(1 minute)"
        and name in render(r["Properties"]["Targets"])
    )
    assert schedule["State"] == "ENABLED"


def test_given_the_default_settings_then_its_rights_are_the_policy_queues_and_the_evaluation_queue(
    template: Template,
) -> None:
    statements = fast_path_statements(template)
    reads = [s for s in statements if "sqs:GetQueueAttributes" in actions_of(s)]
    assert reads and all("*" not in render(s["Resource"]) for s in reads)  # named queues only
    sends = [s for s in statements if "sqs:SendMessage" in actions_of(s)]
    assert [render(s["Resource"]) for s in sends] == ["<NodescalerEvaluations…Arn>"] or all(
        "NodescalerEvaluations" in render(s["Resource"]) for s in sends
    )
    allowed = {a for s in statements if s["Effect"] == "Allow" for a in actions_of(s)}
    assert not {a for a in allowed if a.startswith("autoscaling:Set")}  # it resizes nothing
    assert not {a for a in allowed if a.startswith("dynamodb:Put")}  # nor writes state


def test_of_the_groups_state_it_may_read_only_when_each_asked_to_be_looked_at_again(
    template: Template,
) -> None:
    statements = fast_path_statements(template)
    state = [
        s
        for s in statements
        if s["Effect"] == "Allow" and any(a.startswith("dynamodb:Batch") for a in actions_of(s))
    ]
    assert [actions_of(s) for s in state] == [["dynamodb:BatchGetItem"]]
    (read,) = state
    assert read["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["GROUP#*"]},
        # the key attributes must be allowed with the one read:
        # https://repost.aws/knowledge-center/dynamodb-table-restrict-attributes
        "ForAllValues:StringEquals": {"dynamodb:Attributes": ["pk", "sk", "recheck"]},
        "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
    }
    gets = {a for s in statements if s["Effect"] == "Allow" for a in actions_of(s)}
    assert "dynamodb:GetItem" not in gets  # no whole state item


def test_given_the_default_settings_then_an_alarm_watches_its_errors(template: Template) -> None:
    ((name, _),) = fast_path_function(template)
    alarms = [
        a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "Errors"
        and name in render(a["Properties"].get("Dimensions", []))
    ]
    assert len(alarms) == 1 and alarms[0]["AlarmName"].endswith("-fast-path-errors")


def test_given_fast_path_false_then_no_function_schedule_rights_or_alarm_of_it_are_deployed() -> (
    None
):
    template = synth(fastPath=False)

    assert fast_path_function(template) == []
    assert fast_path_statements(template) == []
    assert not [
        r
        for r in resources(template, "AWS::Events::Rule").values()
        if "FastPath" in render(r["Properties"].get("Targets", []))
    ]
    assert not [
        a
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if "fast-path" in render(a["Properties"].get("AlarmName", ""))
    ]


def test_given_prometheus_policies_then_it_queries_their_workspaces_and_token_secrets_alone(
    prometheus_policies: dict[str, Any],
) -> None:
    """The fast path runs the policies' Prometheus queries: the rights evaluate has for them
    (their descriptors say which), and the servers each bearer token may go to."""
    template = synth(**prometheus_policies)
    statements = fast_path_statements(template)
    query = statement_for(statements, "aps:QueryMetrics")
    assert actions_of(query) == ["aps:QueryMetrics"]
    assert len(query["Resource"]) == 3 and "*" not in render(query["Resource"])
    read = statement_for(statements, "secretsmanager:GetSecretValue")
    assert len(read["Resource"]) == 3
    ((_, function),) = fast_path_function(template)
    variables = {k: render(v) for k, v in function["Environment"]["Variables"].items()}
    for name, value in variables.items():
        variables[name] = next((v for k, v in DEPLOYED.items() if value.startswith(k)), value)
    origins = FastPathSettings.from_environment(variables).token_origin_pairs
    assert ("prom/token", "https://thanos.internal:443") in origins and len(origins) == 3


def test_given_policies_without_prometheus_then_it_may_query_no_workspace(tmp_path: Any) -> None:
    (tmp_path / "gpu.yaml").write_text((REPO / "policies" / "gpu-training.yaml").read_text())
    template = synth(clusterName="", allGroups=True, policiesFolder=str(tmp_path))
    actions = {a for s in fast_path_statements(template) for a in actions_of(s)}
    assert not any(a.startswith(("aps:", "secretsmanager:")) for a in actions)

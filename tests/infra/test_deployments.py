"""Several deployments in one account and region: two copies synthesized side by side set
no physical name twice, each drain answers only its own hook, and each reports its metrics
under its own service, which only its own dashboard and alarms read; `-c nodescaler` and
cdk.json's `deployments` through app.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from nodescaler.config import DrainSettings
from nodescaler.observability.metric_names import NAMESPACE, SERVICE_VARIABLE

from infra.settings import SettingsError, load_deployments
from infra.stack import NodescalerStack
from tests.infra.stack_template import dashboard_widgets, environment, matches, rule, sample
from tests.infra.test_stack import CDK_CONTEXT, FEATURE_FLAGS, REPO, run_app

# Each resource type's own name, where a template may set it.
PHYSICAL_NAMES = {
    "AWS::DynamoDB::GlobalTable": "TableName",
    "AWS::Events::Rule": "Name",
    "AWS::CloudWatch::Alarm": "AlarmName",
    "AWS::CloudWatch::Dashboard": "DashboardName",
    "AWS::Scheduler::Schedule": "Name",
    "AWS::AutoScaling::LifecycleHook": "LifecycleHookName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Lambda::LayerVersion": "LayerName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::Events::EventBus": "Name",
    "AWS::Logs::LogGroup": "LogGroupName",
}
TWO_CLUSTERS = CDK_CONTEXT | {
    "drainGroups": ["web"],  # both hook one group: only the hook's name tells them apart
    "alarms": {"email": "ops@example.com"},
    "deployments": [{"clusterName": "blue"}, {"clusterName": "green_2", "tickMinutes": 2}],
}


def synth_all(context: dict[str, Any]) -> dict[str, Template]:
    app = cdk.App(context=FEATURE_FLAGS | {"aws:cdk:bundling-stacks": []})
    stacks = [
        NodescalerStack(app, settings.deployment, settings=settings, policies=policies)
        for settings, policies in load_deployments(context, REPO)
    ]
    return {stack.stack_name: Template.from_stack(stack) for stack in stacks}


def physical_names(template: Template) -> list[str]:
    """Every name the template sets itself (the rest CloudFormation makes from the stack's)."""
    return [
        json.dumps(resource["Properties"][key])
        for kind, key in PHYSICAL_NAMES.items()
        for resource in template.find_resources(kind).values()
        if key in resource.get("Properties", {})
    ]


@pytest.fixture(scope="module")
def two() -> dict[str, Template]:
    return synth_all(TWO_CLUSTERS)


def test_two_deployments_are_two_stacks_named_after_their_clusters(
    two: dict[str, Template],
) -> None:
    assert sorted(two) == ["nodescaler-blue", "nodescaler-green-2"]


def test_two_deployments_set_no_physical_name_twice(two: dict[str, Template]) -> None:
    blue, green = (physical_names(two[name]) for name in sorted(two))
    assert len(blue) == len(set(blue)) and len(green) == len(set(green))
    assert set(blue).isdisjoint(green)
    # the names operators read are set, and say whose they are
    assert {'"nodescaler-blue"', '"nodescaler-blue-drain"', '"nodescaler-blue-drain-errors"'} <= (
        set(blue)
    )
    assert all(name.startswith('"nodescaler-green-2') for name in green)


def test_each_drain_answers_only_its_own_deployments_hook(two: dict[str, Template]) -> None:
    terminating = sample("lifecycle-terminate")
    for stack, template in two.items():
        hook = f"{stack}-drain"
        (created,) = template.find_resources("AWS::AutoScaling::LifecycleHook").values()
        assert created["Properties"]["LifecycleHookName"] == hook
        pattern = rule(template, "TerminateLifecycleActions")["EventPattern"]
        for other in two:
            event = terminating | {
                "detail": terminating["detail"] | {"LifecycleHookName": f"{other}-drain"}
            }
            assert matches(pattern, event) is (other == stack)
        # and the function itself ignores any other hook (tests/integration/test_drain.py)
        variable = DrainSettings.model_fields["drain_hook"].alias
        assert environment(template, "drain")[str(variable)] == hook
        # and the termination policy lets a node with pods go only from a group with it
        assert environment(template, "terminate")[str(variable)] == hook


def test_a_deployment_named_keeps_its_name_whatever_its_cluster() -> None:
    ((settings, _),) = load_deployments(CDK_CONTEXT | {"name": "prod-eu"}, REPO)
    assert (settings.deployment, settings.drain_hook) == (
        "nodescaler-prod-eu",
        "nodescaler-prod-eu-drain",
    )


@pytest.mark.parametrize(
    ("deployments", "message"),
    [
        (
            [{"clusterName": "a"}, {"clusterName": "b", "name": "a"}],
            "cdk.json: context.nodescaler.deployments[1]: is deployment nodescaler-a again "
            "(as deployments[0]); give each a distinct name or clusterName",
        ),
        (
            [{"clusterName": "a"}, {"clusterName": "a", "name": "again"}],
            "cdk.json: context.nodescaler.deployments[1].clusterName: manages cluster a again "
            "(as deployments[0]); two deployments would resize the same groups",
        ),
        (
            [{"clusterName": "a"}, {"clusterName": "b", "tickMinutes": 0}],
            "cdk.json: context.nodescaler.deployments[1].tickMinutes: Input should be greater",
        ),
        (
            [{"clusterName": "a", "name": "eu_west"}],
            "cdk.json: context.nodescaler.deployments[0].name: should be a name of letters, digits and '-'",
        ),
        ([], "cdk.json: context.nodescaler.deployments: should be a non-empty list"),
        (["a"], "cdk.json: context.nodescaler.deployments[0]: should be an object"),
    ],
)
def test_given_bad_deployments_then_settings_name_the_entry(deployments: Any, message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_deployments(CDK_CONTEXT | {"deployments": deployments}, REPO)
    assert message in str(caught.value)


def stacks_in(tmp_path: Path) -> dict[str, dict[str, Any]]:
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    return {
        name: json.loads((tmp_path / "out" / f"{name}.template.json").read_text())
        for name, artifact in manifest["artifacts"].items()
        if artifact["type"] == "aws:cloudformation:stack"
    }


def test_a_c_override_is_laid_over_cdk_json_keeping_what_it_does_not_name(
    tmp_path: Path,
) -> None:
    override = '{"clusterName": "x", "alarms": {"email": "ops@example.com"}}'
    result = run_app(tmp_path, override)
    assert result.returncode == 0, result.stderr
    (name, template) = next(iter(stacks_in(tmp_path).items()))
    assert name == "nodescaler-x"
    resources = template["Resources"].values()
    (alarm, *_) = [r for r in resources if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert alarm["Properties"]["AlarmName"].startswith("nodescaler-x-")
    # the override's alarms.email merged into cdk.json's alarms, not in place of them
    shortfall = next(
        r
        for r in resources
        if r.get("Properties", {}).get("AlarmName") == "nodescaler-x-capacity-shortfall"
    )
    assert shortfall["Properties"]["EvaluationPeriods"] == CDK_CONTEXT["alarms"]["shortfallMinutes"]
    assert any(r["Type"] == "AWS::SNS::Subscription" for r in resources)


def test_cdk_json_deployments_through_app_py_are_one_stack_each(tmp_path: Path) -> None:
    result = run_app(tmp_path, TWO_CLUSTERS)
    assert result.returncode == 0, result.stderr
    assert sorted(stacks_in(tmp_path)) == ["nodescaler-blue", "nodescaler-green-2"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("{clusterName: x}", "-c nodescaler: is not JSON (Expecting property name"),
        ('["x"]', '-c nodescaler: is ["x"], not a JSON object'),
    ],
)
def test_a_c_override_that_is_not_a_json_object_stops_synth_in_one_line(
    tmp_path: Path, override: str, message: str
) -> None:
    result = run_app(tmp_path, override)
    assert result.returncode != 0
    assert result.stderr.splitlines()[-2:] == [
        "nodescaler: cannot synthesize:",
        result.stderr.splitlines()[-1],
    ]
    assert result.stderr.splitlines()[-1].startswith(message)


def test_each_deployments_functions_report_under_its_own_service(
    two: dict[str, Template],
) -> None:
    for stack, template in two.items():
        for folder in ("dispatch", "evaluate", "drain", "terminate"):
            assert environment(template, folder)[SERVICE_VARIABLE] == stack, (stack, folder)


def test_each_deployments_alarms_watch_only_its_own_service(two: dict[str, Template]) -> None:
    for stack, template in two.items():
        ours = [
            alarm["Properties"]
            for alarm in template.find_resources("AWS::CloudWatch::Alarm").values()
            if alarm["Properties"].get("Namespace") == NAMESPACE
        ]
        # evaluation errors, latency, shortfall, backoff, groups unserved, policies unread,
        # events not put, drain hooks unread, sources refused, events unconfirmed,
        # terminations failed or forced, the drains' three
        assert len(ours) == 15
        assert all(a["Dimensions"] == [{"Name": "service", "Value": stack}] for a in ours)


def test_each_deployments_dashboard_shows_only_its_own_service(two: dict[str, Template]) -> None:
    for stack, template in two.items():
        (other,) = set(two) - {stack}
        widgets = dashboard_widgets(template).values()
        graphs = [entry for w in widgets for entry in json.loads(w).get("metrics", [])]
        searches = [e[0]["expression"] for e in graphs if "expression" in e[0]]
        metrics = [e for e in graphs if e[0] == NAMESPACE]
        # each policy's row and the rejected groups and launch failures; the system's graphs
        assert len(searches) > 10 and len(metrics) > 10
        assert all(
            s.startswith(("SEARCH(", "SUM(SEARCH(")) and f'service="{stack}"' in s for s in searches
        )
        assert all(e[2:4] == ["service", stack] for e in metrics)
        assert not any(other in w for w in widgets)


def test_given_a_deployment_without_a_cluster_or_all_groups_then_synth_refuses_it_in_a_line(
    tmp_path: Path,
) -> None:
    """Given a deployment of no cluster that does not say allGroups: true, beside another;
    When synth loads cdk.json; Then one line names the deployment and the field (an empty
    clusterName once meant every cluster's opted-in groups, the other deployment's too)."""
    (tmp_path / "gpu-training.yaml").write_text((REPO / "policies/gpu-training.yaml").read_text())
    everything = {"clusterName": "", "name": "everything", "policiesFolder": str(tmp_path)}
    with pytest.raises(SettingsError) as caught:
        load_deployments(CDK_CONTEXT | {"deployments": [{"clusterName": "a"}, everything]}, REPO)
    assert str(caught.value) == (
        "cdk.json: context.nodescaler.deployments[1].clusterName: deployment "
        "nodescaler-everything: is empty; set the cluster whose opted-in groups it manages, or "
        "allGroups: true for the opted-in groups that name no cluster"
    )
    # said on purpose, it is one deployment among others: it leaves their groups alone
    allowed = everything | {"allGroups": True}
    loaded = load_deployments(CDK_CONTEXT | {"deployments": [{"clusterName": "a"}, allowed]}, REPO)
    assert [(s.cluster_name, s.all_groups) for s, _ in loaded] == [("a", False), ("", True)]

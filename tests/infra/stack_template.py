"""Reading the synthesized template: a value as text, the resources of a type, a
function's properties, environment and role statements, a rule, the dashboard's widgets,
an alarm, the Kubernetes manifests, cdk-nag's findings. Shared by the tests of tests/infra."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from nodescaler_sandbox.dashboard_layout import resolved

from tests.infra.test_stack import REPO, synth_stack

# A template value as text, references shown as <Name> or <Name.Attribute>: the dashboard
# layout tool's own reading, so the tests and docs/dashboard.md read the template alike.
render = resolved


def resources(template: Template, kind: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = template.find_resources(kind)
    return found


def function(template: Template, folder: str) -> dict[str, Any]:
    (found,) = (
        f["Properties"]
        for name, f in resources(template, "AWS::Lambda::Function").items()
        if name.startswith(f"Nodescaler{folder.capitalize()}Function")
    )
    return found


def role_statements(template: Template, folder: str) -> list[dict[str, Any]]:
    return [
        statement
        for name, policy in resources(template, "AWS::IAM::Policy").items()
        if name.startswith(f"Nodescaler{folder.capitalize()}Role")
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def actions_of(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def statement_for(statements: list[dict[str, Any]], action: str) -> dict[str, Any]:
    (found,) = (s for s in statements if action in actions_of(s))
    return found


def statements_for(statements: list[dict[str, Any]], action: str) -> list[dict[str, Any]]:
    return [s for s in statements if action in actions_of(s)]


def rule(template: Template, name: str) -> dict[str, Any]:
    (found,) = (
        r["Properties"]
        for logical, r in resources(template, "AWS::Events::Rule").items()
        if logical.startswith(f"Nodescaler{name}")
    )
    return found


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """EventBridge's matching, as far as these rules use it: every key's value is listed."""
    return all(
        matches(want, event.get(key, {})) if isinstance(want, dict) else event.get(key) in want
        for key, want in pattern.items()
    )


def sample(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((REPO / "events" / f"{name}.json").read_text())
    return event


def environment(template: Template, folder: str) -> dict[str, str]:
    """A function's variables, references rendered as text."""
    variables = function(template, folder)["Environment"]["Variables"]
    return {name: render(value) for name, value in variables.items()}


# What CloudFormation puts where the template has a reference.
DEPLOYED = {
    "<NodescalerEvaluations": "https://sqs.eu-west-1.amazonaws.com/123456789012/e.fifo",
    "<NodescalerEvaluationDeadLetters": "https://sqs.eu-west-1.amazonaws.com/123456789012/d.fifo",
    "<NodescalerStateTable": "nodescaler-state",
}


def dashboard_widgets(template: Template) -> dict[str, str]:
    """Each widget's title → its properties as text."""
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(
        render(dashboard["Properties"]["DashboardBody"]).replace("<", "").replace(">", "")
    )
    return {w["properties"].get("title", ""): json.dumps(w["properties"]) for w in body["widgets"]}


def alarm_on(template: Template, metric: str) -> dict[str, Any]:
    (found,) = (
        a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == metric
    )
    return found


def kubernetes_manifests() -> list[dict[str, Any]]:
    import yaml

    return [
        document
        for path in sorted((REPO / "infra" / "kubernetes").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
    ]


def nag_findings(**overrides: Any) -> list[str]:
    """AwsSolutions' and ServerlessChecks' findings, as app.py runs them."""
    stack = synth_stack(**overrides)
    cdk.Aspects.of(stack).add(AwsSolutionsChecks())
    cdk.Aspects.of(stack).add(ServerlessChecks())
    annotations = Annotations.from_stack(stack)
    findings = [
        *annotations.find_error("*", Match.string_like_regexp("(AwsSolutions|Serverless)-.*")),
        *annotations.find_warning("*", Match.string_like_regexp("(AwsSolutions|Serverless)-.*")),
    ]
    return [f"{f.id}: {f.entry.data}" for f in findings]

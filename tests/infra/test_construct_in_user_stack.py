"""The Nodescaler construct as a CDK user installs it: in their own stack it publishes the
outputs the CLI reads, so `nodescaler status --stack Platform` finds that deployment; a
second deployment of one cluster in the app, or a second construct in one stack, is
refused as app.py refuses them; the `cdk` extra declares aws-cdk-lib and constructs as
ranges that hold the locked versions, so it installs beside a user's own pins."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from nodescaler_cli.main import main
from packaging.requirements import Requirement
from packaging.version import Version

from infra import DeploySettings, Nodescaler
from infra.settings import SettingsError
from tests.aws import (
    aws,  # noqa: F401  (moto for every test here)
    client,
    make_asg,
    make_state_table,
)
from tests.infra.test_stack import REPO

POLICIES = REPO / "policies"


def users_app() -> cdk.App:
    return cdk.App(context={"aws:cdk:bundling-stacks": []})


def autoscaler(stack: cdk.Stack, construct_id: str, cluster: str) -> Nodescaler:
    return Nodescaler(
        stack,
        construct_id,
        settings=DeploySettings(cluster_name=cluster, allowed_groups=["*"]),
        policies_folder=POLICIES,
    )


def deployed_outputs(outputs: dict[str, Any], table: str) -> dict[str, Any]:
    """The synthesized outputs as CloudFormation resolves them: the table's name for its
    Ref (moto cannot create the global table), a literal as written."""
    resolved = {}
    for key, output in outputs.items():
        value = output["Value"]
        if key == "StateTableName":
            assert set(value) == {"Ref"}, value  # the construct's own table
            value = table
        resolved[key] = {"Value": value if isinstance(value, str) else "resolved-at-deploy"}
    return resolved


def test_given_the_construct_in_a_users_stack_then_status_finds_it_by_that_stack(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a user's app: their own stack "Platform", the construct for cluster team-a in it
    stack = cdk.Stack(users_app(), "Platform")
    autoscaler(stack, "Autoscaler", "team-a")
    outputs = Template.from_stack(stack).to_json()["Outputs"]
    assert outputs["DeploymentName"]["Value"] == "nodescaler-team-a"
    assert outputs["ClusterName"]["Value"] == "team-a"
    # deployed: the stack's outputs under the keys synthesized, the table they name
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::SQS::Queue"}},
        "Outputs": deployed_outputs(outputs, "platform-state"),
    }
    client("cloudformation").create_stack(StackName="Platform", TemplateBody=json.dumps(template))
    make_state_table("platform-state")
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "web"}
    make_asg("team-a-web", tags=tags | {"nodescaler/cluster": "team-a"})
    make_asg("elsewhere-web", tags=tags | {"nodescaler/cluster": "elsewhere"})

    # When the operator names the stack alone
    assert main(["status", "--stack", "Platform"]) == 0, capsys.readouterr().err

    # Then status reads that deployment's table, and its cluster's groups only
    listed = capsys.readouterr().out
    assert "team-a-web" in listed
    assert "elsewhere-web" not in listed


def test_given_two_constructs_for_one_cluster_in_one_app_then_the_second_is_refused() -> None:
    app = users_app()
    autoscaler(cdk.Stack(app, "PlatformEu"), "Autoscaler", "prod")
    with pytest.raises(SettingsError) as refused:
        autoscaler(cdk.Stack(app, "PlatformUs"), "Autoscaler", "prod")
    assert str(refused.value) == (
        "Nodescaler PlatformUs/Autoscaler: settings.clusterName: manages cluster prod again "
        "(as PlatformEu/Autoscaler); two deployments would resize the same groups"
    )


def test_given_two_constructs_in_one_stack_then_the_second_is_refused() -> None:
    stack = cdk.Stack(users_app(), "Platform")
    autoscaler(stack, "Eu", "prod-eu")
    with pytest.raises(SettingsError, match=r"^Nodescaler Platform/Us: stack Platform holds "):
        autoscaler(stack, "Us", "prod-us")


def test_a_misspelt_setting_raises_settings_error_naming_the_one_meant() -> None:
    # As docs/deploy.md promises: SettingsError, not pydantic's ValidationError and its link
    with pytest.raises(SettingsError) as raised:
        DeploySettings(cluster_nam="prod")
    assert str(raised.value) == (
        "DeploySettings: cluster_nam: unknown field (did you mean cluster_name?)"
    )
    with pytest.raises(SettingsError) as raised:
        DeploySettings(cluster_name="prod", kubernetes={"secret_arn": "prod-kubeconfig"})
    assert str(raised.value) == (
        "DeploySettings: kubernetes.secret_arn: should be a Secrets Manager secret's ARN, "
        "arn:aws:secretsmanager:<region>:<12-digit account>:secret:<name>; got "
        "'prod-kubeconfig'"
    )


def test_deploy_settings_says_what_each_setting_is_to_an_editor() -> None:
    assert DeploySettings.__doc__ and "SettingsError" in DeploySettings.__doc__
    undescribed = [n for n, f in DeploySettings.model_fields.items() if not f.description]
    assert undescribed == []


def test_the_alarms_warning_tells_a_construct_user_what_to_write_with_no_jsii_trace() -> None:
    from aws_cdk.assertions import Annotations, Match

    from infra.alarms import ALARMS_GO_NOWHERE_CONSTRUCT

    # Given the construct in a user's app, whose stack traces are on (the CDK's default)
    stack = cdk.Stack(users_app(), "Platform")
    autoscaler(stack, "Autoscaler", "team-a")
    (warning,) = Annotations.from_stack(stack).find_warning(
        "*", Match.string_like_regexp(".*alarms have no destination.*")
    )
    # Then it says what to pass in their own code, not cdk.json, and carries no trace
    # (the CDK CLI prints a trace as jsii's `program.js:1:5591` above the warning)
    assert warning.entry.data.startswith(ALARMS_GO_NOWHERE_CONSTRUCT)
    assert "DeploySettings(alarms=AlarmSettings(email=...))" in warning.entry.data
    assert "cdk.json" not in warning.entry.data
    assert not warning.entry.trace


def locked(name: str) -> Version:
    lock = (REPO / "requirements" / "lock.txt").read_text()
    match = re.search(rf"^{re.escape(name)}==(\S+)", lock, re.MULTILINE)
    assert match, name
    return Version(match.group(1))


@pytest.mark.parametrize("name", ["aws-cdk-lib", "constructs", "cdk-nag"])
def test_the_cdk_extra_declares_a_range_that_holds_the_lock_and_below(name: str) -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = extras["optional-dependencies"]
    (requirement,) = [Requirement(r) for r in extras["cdk"] if Requirement(r).name == name]
    assert not any(s.operator in ("==", "===") for s in requirement.specifier), requirement
    assert locked(name) in requirement.specifier
    # a user's app on an older 2.x (or 10.x) than this repo's lock installs it too
    floor = min(Version(s.version) for s in requirement.specifier if s.operator == ">=")
    assert floor < locked(name)
    assert requirement.specifier.contains(f"{floor.major}.999")
    assert not requirement.specifier.contains(f"{floor.major + 1}.0")

"""`-c key=value` for every setting, as CDK users pass context (`cdk ls -c clusterName=x`),
and each bad value blamed on where it came from: `-c key`, `-c nodescaler='{...}'` or
cdk.json, naming the field.

The CDK CLI passes each `-c key=value` to the app as a string, in the app's context
(https://docs.aws.amazon.com/cdk/v2/guide/context.html#context_cli).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.settings import (
    SettingsError,
    Sources,
    context_flags,
    json_flag,
    load_deployments,
    setting_keys,
    unknown_flags,
)
from tests.infra.test_stack import CDK_CONTEXT, REPO

pytestmark = pytest.mark.infra


def deploy(flags: dict[str, str], override: str | None = None) -> list[str]:
    sources = Sources(
        file=CDK_CONTEXT,
        json_flag=json_flag(override, CDK_CONTEXT),
        flags=context_flags(flags.get),
    )
    return [settings.deployment for settings, _ in load_deployments(sources, REPO)]


def problem(flags: dict[str, str], override: str | None = None) -> str:
    with pytest.raises(SettingsError) as raised:
        deploy(flags, override)
    return str(raised.value)


def test_given_c_cluster_name_then_the_deployment_is_named_for_it() -> None:
    assert deploy({"clusterName": "x"}) == ["nodescaler-x"]


def test_given_c_values_as_strings_then_each_is_read_as_its_settings_type() -> None:
    sources = Sources(
        file=CDK_CONTEXT,
        flags=context_flags(
            {
                "dryRun": "true",
                "tickMinutes": "5",
                "drainGroups": '["web"]',
                "alarms.email": "oncall@example.com",
            }.get
        ),
    )
    ((settings, _),) = load_deployments(sources, REPO)
    assert settings.dry_run is True
    assert settings.tick_minutes == 5
    assert settings.drain_groups == ["web"]
    assert settings.alarms.email == "oncall@example.com"
    assert settings.alarms.shortfall_minutes == 15  # the rest of cdk.json's alarms stays


def test_every_setting_and_each_field_of_an_object_setting_has_a_c_key() -> None:
    keys = setting_keys()
    assert {"clusterName", "dryRun", "alarms.email", "drain.timeoutResult"} <= set(keys)
    assert {key.split(".")[0] for key in keys} == {
        key for key in keys if "." not in key
    }  # each dotted key's object is a key too


def test_given_a_bad_c_value_then_the_c_flag_and_the_field_are_blamed() -> None:
    assert problem({"tickMinutes": "0"}) == (
        '-c tickMinutes (given "0"): tickMinutes: Input should be greater than or equal to 1'
    )
    assert problem({"alarms.email": "nobody"}).startswith(
        '-c alarms.email (given "nobody"): alarms.email: should be an email address'
    )


def test_given_a_bad_value_in_c_nodescaler_then_c_nodescaler_and_the_field_are_blamed() -> None:
    message = problem({}, '{"clusterName": "x", "alarms": {"email": "nobody"}}')
    assert message.startswith("-c nodescaler: alarms.email: should be an email address")
    assert "cdk.json" not in message


def test_given_a_bad_value_in_cdk_json_beside_a_c_value_then_cdk_json_is_blamed() -> None:
    with pytest.raises(SettingsError, match=r"^cdk.json: context.nodescaler.tickMinutes: "):
        load_deployments(
            Sources(
                file=CDK_CONTEXT | {"tickMinutes": 0},
                json_flag={"alarms": {"shortfallMinutes": 20}},
                flags={"clusterName": "x"},
            ),
            REPO,
        )


def test_given_a_c_list_that_is_not_json_then_the_flag_is_named() -> None:
    assert problem({"drainGroups": "[web"}).startswith("-c drainGroups: is not JSON")


def test_given_a_bad_value_in_one_c_nodescaler_deployment_then_its_entry_is_named() -> None:
    override = json.dumps({"deployments": [{"clusterName": "a"}, {"clusterName": "b c"}]})
    assert problem({}, override).startswith(
        "-c nodescaler: deployments[1].clusterName: should be an EKS cluster's name"
    )


def test_given_a_startup_taint_that_is_no_taint_key_then_the_setting_is_named() -> None:
    said = problem({"startupTaints": '["node.cilium.io/agent not ready"]'})
    assert said.startswith("-c startupTaints (given") and "is not a taint's key" in said


def test_given_c_keys_that_set_nothing_then_each_is_named_with_what_it_may_mean() -> None:
    # Given the app's context: cdk.json's keys, the CDK's own, and two mistyped -c keys
    context = {
        "nodescaler": {},
        "@aws-cdk/core:checkSecretUsage": True,
        "aws:cdk:enable-path-metadata": True,
        "acknowledged-issue-numbers": [1],
        "availability-zones:account=123456789012:region=eu-west-1": ["a"],
        "clusterName": "prod",
        "fastpath": "false",
        "alarms.emial": "oncall@example.com",
    }
    with pytest.raises(SettingsError) as raised:
        unknown_flags(context, {"nodescaler": {}})
    # Then each mistyped key is an error, with the setting it may have meant
    assert str(raised.value).splitlines() == [
        "-c fastpath: is not a setting (did you mean fastPath?); every setting is a key of "
        "cdk.json's nodescaler object (docs/deploy.md)",
        "-c alarms.emial: is not a setting (did you mean alarms.email?); every setting is a "
        "key of cdk.json's nodescaler object (docs/deploy.md)",
    ]
    unknown_flags({"nodescaler": {}, "dryRun": "true", "@aws-cdk/x": 1}, {"nodescaler": {}})


def test_given_an_unknown_setting_in_cdk_json_then_the_setting_it_may_mean_is_named() -> None:
    assert problem({}, '{"fastpath": false}') == (
        "-c nodescaler: fastpath: unknown field (did you mean fastPath?)"
    )


def test_app_stops_on_a_c_key_that_sets_nothing(tmp_path: Path) -> None:
    # As the CDK CLI runs the app: every -c value in CDK_CONTEXT_JSON
    env = os.environ | {
        "CDK_CONTEXT_JSON": json.dumps({"fastpath": "false"}),
        "CDK_OUTDIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == (
        "nodescaler: cannot synthesize:\n-c fastpath: is not a setting (did you mean "
        "fastPath?); every setting is a key of cdk.json's nodescaler object (docs/deploy.md)\n"
    )
    assert not list(tmp_path.iterdir())  # nothing synthesized


@pytest.mark.slow
def test_cdk_ls_with_c_cluster_name_prints_the_deployment_and_nothing_else(tmp_path: Path) -> None:
    # As the README runs it: npx, no variable set to silence Node's end-of-life warning
    # (into a folder of its own: the CLI locks its output folder, another test's may run)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE")}
    quiet = ["--no-notices", "--no-version-reporting", "--output", str(tmp_path / "cdk.out")]
    listed = subprocess.run(
        ["npx", "cdk", "ls", "-c", "clusterName=x", *quiet],
        cwd=REPO,
        env=env | {"CDK_DISABLE_CLI_TELEMETRY": "true"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == "nodescaler-x\n"
    assert listed.stderr == "", "run `make setup`: package.json brings Node's LTS for the CDK"

"""The operator CLI finds a deployment's state table through its stack, named as synth
names it: by `--deployment`, else after `--cluster`, else the deployment cdk.json
describes; `--stack` names it outright."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodescaler_cli.main import main

from tests.aws import (
    aws,  # noqa: F401  (moto for every test here)
    client,
    make_asg,
    make_state_table,
)

STACKS = {
    "nodescaler-blue": "blue-state",
    "nodescaler-green-2": "green-state",
    "nodescaler": "unnamed-state",
}


def deploy(stack: str, table: str) -> None:
    """A stack with the output the CLI reads (infra/stack.py)."""
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"StateTableName": {"Value": table}},
    }
    client("cloudformation").create_stack(StackName=stack, TemplateBody=json.dumps(template))


def cdk_json(folder: Path, settings: dict[str, object]) -> Path:
    path = folder / "cdk.json"
    path.write_text(json.dumps({"context": {"nodescaler": settings}}))
    return path


@pytest.mark.parametrize(
    ("options", "settings", "table"),
    [
        (["--cluster", "blue"], None, "blue-state"),
        (["--cluster", "green_2"], None, "green-state"),  # a stack name has no underscore
        (["--deployment", "green-2", "--cluster", "blue"], None, "green-state"),
        (["--stack", "nodescaler-blue"], None, "blue-state"),
        ([], None, "unnamed-state"),  # no cdk.json: an unnamed deployment
        ([], {"clusterName": "green_2"}, "green-state"),
        ([], {"clusterName": "blue", "name": "green-2"}, "green-state"),
        ([], {"deployments": [{"clusterName": "blue"}]}, "blue-state"),
        (
            ["--cluster", "blue"],
            {"deployments": [{"clusterName": "a"}, {"clusterName": "b"}]},
            "blue-state",
        ),
    ],
)
def test_given_several_deployments_each_finds_its_own_state_table(
    options: list[str],
    settings: dict[str, object] | None,
    table: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # where cdk.json is read from, when there is one
    if settings is not None:
        cdk_json(tmp_path, settings)
    for stack, its_table in STACKS.items():
        deploy(stack, its_table)
    make_state_table(table)  # only this one: another stack's table would not be found
    # a managed group (of the --cluster, if one is named), whose state status reads
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "web"}
    if "--cluster" in options:
        tags["nodescaler/cluster"] = options[options.index("--cluster") + 1]
    make_asg("web", tags=tags)

    assert main(["status", *options]) == 0, capsys.readouterr().err
    assert "web" in capsys.readouterr().out


def test_a_deployment_with_no_stack_is_named_in_the_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["status", "--deployment", "absent"]) == 1
    assert "stack nodescaler-absent not found" in capsys.readouterr().err


def test_with_several_deployments_in_cdk_json_the_cli_asks_which(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = cdk_json(tmp_path, {"deployments": [{"clusterName": "a"}, {"name": "b"}]})
    assert main(["status", "--config", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"nodescaler status: {config}: context.nodescaler.deployments: lists nodescaler-a, "
        "nodescaler-b; pass --deployment or --cluster to say which\n"
    )

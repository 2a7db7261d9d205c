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
    ("options", "settings", "table", "cluster"),
    [
        (["--cluster", "blue"], None, "blue-state", "blue"),
        (["--cluster", "green_2"], None, "green-state", "green_2"),  # a stack has no underscore
        (["--deployment", "green-2", "--cluster", "blue"], None, "green-state", "blue"),
        (["--stack", "nodescaler-blue"], None, "blue-state", None),
        ([], None, "unnamed-state", None),  # no cdk.json: an unnamed deployment
        # from cdk.json, the deployment's cluster too: only its groups are listed
        ([], {"clusterName": "green_2"}, "green-state", "green_2"),
        ([], {"clusterName": "blue", "name": "green-2"}, "green-state", "blue"),
        ([], {"deployments": [{"clusterName": "blue"}]}, "blue-state", "blue"),
        (
            ["--cluster", "blue"],
            {"deployments": [{"clusterName": "a"}, {"clusterName": "b"}]},
            "blue-state",
            "blue",
        ),
    ],
)
def test_given_several_deployments_each_finds_its_own_state_table(
    options: list[str],
    settings: dict[str, object] | None,
    table: str,
    cluster: str | None,
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
    # a managed group of the deployment's cluster, whose state status reads, and one of
    # another cluster, which it never lists
    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "web"}
    make_asg("web", tags=tags | ({"nodescaler/cluster": cluster} if cluster else {}))
    make_asg("other", tags=tags | {"nodescaler/cluster": "elsewhere"})

    assert main(["status", *options]) == 0, capsys.readouterr().err
    listed = capsys.readouterr().out
    assert "web" in listed
    # no cluster: the groups that name none (another cluster's are its deployment's)
    assert "other" not in listed


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

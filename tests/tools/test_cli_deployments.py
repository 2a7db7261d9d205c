"""The operator CLI finds a deployment's state table through its stack, named as synth
names it: by `--deployment`, else after `--cluster`; `--stack` names it outright."""

from __future__ import annotations

import json

import pytest
from nodescaler_cli.main import main

from tests.aws import (
    aws,  # noqa: F401  (moto for every test here)
    client,
    make_state_table,
)


def deploy(stack: str, table: str) -> None:
    """A stack with the output the CLI reads (infra/stack.py)."""
    template = {
        "Resources": {"Placeholder": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"StateTableName": {"Value": table}},
    }
    client("cloudformation").create_stack(StackName=stack, TemplateBody=json.dumps(template))


@pytest.mark.parametrize(
    ("options", "table"),
    [
        (["--cluster", "blue"], "blue-state"),
        (["--cluster", "green_2"], "green-state"),  # a stack name has no underscore
        (["--deployment", "green-2", "--cluster", "blue"], "green-state"),
        (["--stack", "nodescaler-blue"], "blue-state"),
        ([], "unnamed-state"),
    ],
)
def test_given_two_deployments_each_cluster_finds_its_own_state_table(
    options: list[str], table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    deploy("nodescaler-blue", "blue-state")
    deploy("nodescaler-green-2", "green-state")
    deploy("nodescaler", "unnamed-state")
    make_state_table(table)  # only this one: another stack's table would not be found

    assert main(["status", *options]) == 0
    assert capsys.readouterr().err == ""


def test_a_deployment_with_no_stack_is_named_in_the_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["status", "--deployment", "absent"]) == 1
    assert capsys.readouterr().err.startswith(
        "nodescaler status: no --table given, and stack nodescaler-absent could not be read"
    )

"""Only the operator writes stored policies: the functions' roles are denied every write to
their items, and the stack gives operators a managed policy (its ARN an output) to attach."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.infra.stack_template import actions_of, render, resources, role_statements
from tests.infra.test_stack import REPO

POLICY_KEYS = ["POLICIES", "POLICY#*"]


def outputs(template: Template) -> dict[str, Any]:
    found: dict[str, Any] = template.find_outputs("*")
    return found


@pytest.mark.parametrize("folder", ["dispatch", "evaluate"])
def test_no_function_may_write_a_stored_policy(template: Template, folder: str) -> None:
    denies = [s for s in role_statements(template, folder) if s["Effect"] == "Deny"]
    (deny,) = (s for s in denies if "dynamodb:PutItem" in actions_of(s))
    assert sorted(actions_of(deny)) == [  # sorted: cdk.json's minimizePolicies sorts them
        "dynamodb:BatchWriteItem",
        "dynamodb:DeleteItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    ]
    assert render(deny["Resource"]).startswith("<NodescalerStateTable")
    assert deny["Condition"] == {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": POLICY_KEYS}}


def test_dispatch_may_query_the_stored_policies_and_nothing_else_of_the_table(
    template: Template,
) -> None:
    (query,) = (
        s for s in role_statements(template, "dispatch") if "dynamodb:Query" in actions_of(s)
    )
    assert query["Effect"] == "Allow"
    assert query["Condition"] == {
        "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["POLICIES"]}
    }


def test_operators_get_a_managed_policy_to_write_the_stored_policies_only(
    template: Template,
) -> None:
    ((logical, writer),) = resources(template, "AWS::IAM::ManagedPolicy").items()
    statements = writer["Properties"]["PolicyDocument"]["Statement"]
    table, stack = statements
    assert sorted(actions_of(table)) == [
        "dynamodb:DeleteItem",  # a corrupt head, which the CLI's error says to delete
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:Query",
    ]
    assert table["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": POLICY_KEYS}}
    assert render(table["Resource"]).startswith("<NodescalerStateTable")
    assert actions_of(stack) == ["cloudformation:DescribeStacks"]
    assert render(stack["Resource"]) == "<AWS::StackId>"
    assert outputs(template)["PolicyWriterPolicyArn"]["Value"] == {"Ref": logical}


def test_the_stack_names_its_deployed_policies_and_what_they_read(template: Template) -> None:
    deployed = json.loads(outputs(template)["DeployedPolicies"]["Value"])
    files = sorted(p.stem for p in (REPO / "policies").glob("*.yaml"))
    assert deployed["names"] == files  # each file is named after its policy
    assert deployed["reads"]["sqsQueues"] == ["ml-training-queue"]

"""IAM and settings for impaired zones: evaluate reads the zonal shifts and autoshifts of
the resources that concern the cluster (its EKS cluster, and cdk.json's
`zonalShift.resources`), read-only, and is told which resources those are; a deployment
with none of them reads nothing of ARC."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template

from infra.settings import SettingsError, load_settings
from tests.infra.stack_template import actions_of, environment, role_statements, statement_for
from tests.infra.test_stack import CDK_CONTEXT, REPO, synth

LB = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/app/web/50dc6c495c0c9188"
CLUSTER = "arn:<AWS::Partition>:eks:<AWS::Region>:<AWS::AccountId>:cluster/my-cluster"


def test_evaluate_reads_the_shifts_of_its_cluster_and_the_listed_resources_and_changes_none() -> (
    None
):
    template: Template = synth(zonalShift={"resources": [LB]})
    statements = role_statements(template, "evaluate")
    reads = statement_for(statements, "arc-zonal-shift:GetManagedResource")
    assert reads["Effect"] == "Allow" and reads["Resource"] == "*"  # resources of several kinds
    assert "Condition" not in reads
    assert "ec2:DescribeAvailabilityZones" in actions_of(reads)
    every = {a for s in statements for a in actions_of(s)}
    # one resource at a time: nothing that lists every resource's shifts, nothing that
    # starts, updates or cancels one
    assert {a for a in every if a.startswith("arc-zonal-shift:")} == {
        "arc-zonal-shift:GetManagedResource"
    }
    # and the function is told whose shifts count: the cluster's own ARN, then the list
    told = json.loads(environment(template, "evaluate")["ZONAL_SHIFT_RESOURCES"])
    assert told == [CLUSTER, LB]


def test_a_cluster_outside_eks_with_no_resources_listed_reads_no_zonal_shift() -> None:
    secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kubeconfig-AbCdEf"
    template = synth(kubernetes={"secretArn": secret})
    statements = role_statements(template, "evaluate")
    every = {a for s in statements for a in actions_of(s)}
    assert not {a for a in every if a.startswith("arc-zonal-shift:")}
    told = environment(template, "evaluate").get("ZONAL_SHIFT_RESOURCES", "[]")
    assert json.loads(told) == []


@pytest.mark.parametrize(
    ("resources", "words"),
    [
        (["my-load-balancer"], "zonalShift.resources[0]: String should match pattern"),
        ([LB, LB], "zonalShift.resources: listed more than once: " + LB),
    ],
)
def test_a_resource_that_is_no_arn_or_listed_twice_is_refused_by_name(
    resources: list[str], words: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(CDK_CONTEXT | {"zonalShift": {"resources": resources}}, REPO)
    assert f"cdk.json: context.nodescaler.{words}" in str(refused.value)

"""Least privilege, read from the synthesized template: what each function's role may do,
on which resources and under which conditions, and who may invoke the termination
policy (infra/permissions.py)."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any

import pytest
from aws_cdk.assertions import Template
from nodescaler.adapters.aws.termination_waits import DynamoTerminationWaits
from nodescaler.adapters.policy_keys import HEADS_PK

from tests.infra.stack_template import (
    actions_of,
    environment,
    render,
    resources,
    role_statements,
    statement_for,
    statements_for,
)
from tests.infra.test_stack import synth

OPTED_IN = {
    "StringEqualsIgnoreCase": {"aws:ResourceTag/nodescaler/enabled": "true"},
    "StringEquals": {"aws:ResourceTag/nodescaler/cluster": "my-cluster"},
}


def test_resizing_is_allowed_only_on_groups_carrying_the_opt_in_tag(template: Template) -> None:
    resize = statement_for(role_statements(template, "evaluate"), "autoscaling:SetDesiredCapacity")
    assert resize["Condition"] == OPTED_IN
    assert render(resize["Resource"]).endswith(":autoScalingGroup:*:autoScalingGroupName/*")
    # an EKS managed node group's scale-in terminates the instances nodescaler chose
    removal = statement_for(
        role_statements(template, "evaluate"), "autoscaling:TerminateInstanceInAutoScalingGroup"
    )
    assert removal == resize  # the same statement: opted-in groups only
    # a warmPool forecast (policies/web-warm.yaml) sizes the warm pool of the same groups
    warm_pool = statement_for(role_statements(template, "evaluate"), "autoscaling:PutWarmPool")
    assert warm_pool == resize
    for function in ("dispatch", "drain", "terminate"):
        assert not statements_for(role_statements(template, function), "autoscaling:PutWarmPool")


def test_scale_in_protection_is_set_only_on_groups_carrying_the_opt_in_tag(
    template: Template,
) -> None:
    (protect,) = statements_for(
        role_statements(template, "evaluate"), "autoscaling:SetInstanceProtection"
    )
    assert protect["Condition"] == OPTED_IN
    assert render(protect["Resource"]).endswith(":autoScalingGroup:*:autoScalingGroupName/*")


def test_evaluate_may_read_scaling_activities_which_take_no_resource_scope(
    template: Template,
) -> None:
    describe = statement_for(
        role_statements(template, "evaluate"), "autoscaling:DescribeScalingActivities"
    )
    assert (describe["Resource"], describe.get("Condition")) == ("*", None)


def test_evaluate_may_put_the_drain_hook_on_opted_in_groups_only_where_it_drains_them(
    template: Template,
) -> None:
    # Given the sample deployment (a cluster, drainOptedInGroups by default)
    statements = role_statements(template, "evaluate")
    put = statement_for(statements, "autoscaling:PutLifecycleHook")
    # Then evaluate may put the hook on the groups it may resize, under the same conditions,
    # but not on an EKS managed node group's Auto Scaling group (EKS drains its nodes)
    resize = statement_for(statements, "autoscaling:SetDesiredCapacity")
    assert put["Action"] == "autoscaling:PutLifecycleHook"
    assert put["Resource"] == resize["Resource"]
    assert put["Condition"] == resize["Condition"] | {
        "Null": {"aws:ResourceTag/eks:nodegroup-name": "true"}
    }
    read = statement_for(statements, "autoscaling:DescribeLifecycleHooks")
    assert (read["Resource"], read.get("Condition")) == ("*", None)  # no resource scope
    variables = environment(template, "evaluate")
    assert (variables["DRAIN_OPTED_IN_GROUPS"], variables["DRAIN_HOOK_NAME"]) == (
        "true",
        "nodescaler-my-cluster-drain",
    )
    # and neither right where the deployment leaves hooking to its operator
    without = synth(drainOptedInGroups=False)
    kept = role_statements(without, "evaluate")
    assert not statements_for(kept, "autoscaling:PutLifecycleHook")
    assert not statements_for(kept, "autoscaling:DescribeLifecycleHooks")
    assert environment(without, "evaluate")["DRAIN_OPTED_IN_GROUPS"] == "false"


@pytest.mark.parametrize(
    ("function", "action"),
    [
        ("dispatch", "autoscaling:DescribeScalingActivities"),  # a launch failure, confirmed
        ("drain", "autoscaling:DescribeAutoScalingInstances"),  # Terminating:Wait, confirmed
        ("drain", "ec2:DescribeInstances"),  # a Spot Instance, confirmed
    ],
)
def test_the_functions_may_read_what_confirms_an_event_before_acting_on_it(
    template: Template, function: str, action: str
) -> None:
    read = statement_for(role_statements(template, function), action)
    assert (read["Effect"], read["Resource"], read.get("Condition")) == ("Allow", "*", None)


def test_evaluate_reads_cloudwatch_with_get_metric_data_alone(template: Template) -> None:
    # live CloudWatch metrics and the history a forecast names; the action has no resource scope
    statements = role_statements(template, "evaluate")
    read = statement_for(statements, "cloudwatch:GetMetricData")
    assert (read["Resource"], read.get("Condition")) == ("*", None)
    allowed = {a for s in statements if s["Effect"] == "Allow" for a in actions_of(s)}
    assert {a for a in allowed if a.startswith("cloudwatch:")} == {"cloudwatch:GetMetricData"}


@pytest.mark.parametrize("action", ["CompleteLifecycleAction", "RecordLifecycleActionHeartbeat"])
def test_the_drain_answers_lifecycle_actions_only_of_opted_in_groups_by_default(
    template: Template, action: str
) -> None:
    (lifecycle,) = statements_for(role_statements(template, "drain"), f"autoscaling:{action}")
    assert lifecycle["Condition"] == OPTED_IN
    assert render(lifecycle["Resource"]).endswith(":autoScalingGroup:*:autoScalingGroupName/*")


def test_the_drain_also_answers_lifecycle_actions_of_the_groups_the_stack_hooks_by_name() -> None:
    statements = role_statements(synth(drainGroups=["web", "gpu-ng"]), "drain")
    tagged, named = statements_for(statements, "autoscaling:CompleteLifecycleAction")
    assert tagged["Condition"] == OPTED_IN
    assert actions_of(named) == [
        "autoscaling:CompleteLifecycleAction",
        "autoscaling:RecordLifecycleActionHeartbeat",
    ]
    assert "Condition" not in named
    assert [render(r) for r in named["Resource"]] == [
        f"arn:<AWS::Partition>:autoscaling:<AWS::Region>:<AWS::AccountId>:autoScalingGroup:*:"
        f"autoScalingGroupName/{name}"
        for name in ("gpu-ng", "web")
    ]


def test_the_drain_reads_groups_and_its_cluster_queues_re_evaluations_and_resizes_nothing(
    template: Template,
) -> None:
    statements = role_statements(template, "drain")
    allowed = {a for s in statements if s["Effect"] == "Allow" for a in actions_of(s)}
    assert {
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:DescribeAutoScalingInstances",
        "eks:DescribeCluster",
        "sqs:SendMessage",
    } <= allowed
    assert not any(
        a.startswith(("autoscaling:Set", "eks:Update", "dynamodb:", "lambda:")) for a in allowed
    )
    sent_to = sorted(
        render(resource).split(".")[0]
        for s in statements_for(statements, "sqs:SendMessage")
        # one statement per queue, or one for both (cdk.json's minimizePolicies)
        for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    )
    # the evaluation queue (a Spot warning's re-evaluation), its own failures; no other queue
    assert [re.sub(r"[0-9A-F]{8}$", "", name) for name in sent_to] == [
        "<NodescalerDrainDeadLetters",
        "<NodescalerEvaluations",
    ]
    describe = statement_for(statements, "eks:DescribeCluster")
    assert render(describe["Resource"]).endswith(":cluster/my-cluster")


def test_with_a_cluster_configured_writes_also_need_its_tag_and_eks_is_scoped_to_it() -> None:
    statements = role_statements(synth(clusterName="prod"), "evaluate")
    resize = statement_for(statements, "autoscaling:SetDesiredCapacity")
    assert resize["Condition"]["StringEquals"] == {"aws:ResourceTag/nodescaler/cluster": "prod"}
    eks = statement_for(statements, "eks:UpdateNodegroupConfig")
    assert render(eks["Resource"]).endswith(":nodegroup/prod/*/*")


@pytest.mark.parametrize("folder", ["dispatch", "evaluate", "drain", "terminate"])
def test_no_function_may_change_an_asgs_tags(template: Template, folder: str) -> None:
    deny = statement_for(role_statements(template, folder), "autoscaling:CreateOrUpdateTags")
    assert deny == {
        "Action": ["autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags"],
        "Effect": "Deny",
        "Resource": "*",
    }


def test_evaluate_reads_only_the_queues_the_policies_name(template: Template) -> None:
    statements = role_statements(template, "evaluate")
    read = next(
        s for s in statements if s["Action"] == ["sqs:GetQueueAttributes", "sqs:GetQueueUrl"]
    )
    assert render(read["Resource"]) == (
        "arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:ml-training-queue"
    )


@pytest.mark.parametrize(
    ("folder", "actions"),
    [
        # a transaction's Put and Update are authorized as PutItem and UpdateItem
        ("evaluate", ["GetItem", "PutItem", "Query", "UpdateItem"]),
        ("dispatch", ["GetItem", "PutItem", "UpdateItem"]),  # a launch failure's backoff
    ],
)
def test_the_state_table_is_read_and_written_with_these_actions_only(
    template: Template, folder: str, actions: list[str]
) -> None:
    (state,) = (
        s
        for s in role_statements(template, folder)
        if "dynamodb:" in str(s["Action"]) and "Condition" not in s  # the policies': their own
    )
    assert state["Action"] == [f"dynamodb:{a}" for a in actions]
    assert render(state["Resource"]).startswith("<NodescalerStateTable")


def test_dispatch_can_describe_groups_and_send_evaluations_but_not_resize(
    template: Template,
) -> None:
    actions = {
        action
        for s in role_statements(template, "dispatch")
        if s["Effect"] == "Allow"
        for action in actions_of(s)
    }
    assert "autoscaling:DescribeAutoScalingGroups" in actions
    assert "sqs:SendMessage" in actions
    assert not any(
        a.startswith(("autoscaling:Set", "autoscaling:Complete", "eks:")) for a in actions
    )


def test_evaluate_may_read_the_cluster_it_is_given_access_to(template: Template) -> None:
    statements = role_statements(template, "evaluate")
    describe = statement_for(statements, "eks:DescribeCluster")
    assert render(describe["Resource"]).endswith(
        ":eks:<AWS::Region>:<AWS::AccountId>:cluster/my-cluster"
    )
    entries = [e["Properties"] for e in resources(template, "AWS::EKS::AccessEntry").values()]
    groups = {  # each role in a group of its own, as infra/kubernetes/rbac.yaml binds them
        render(e["PrincipalArn"])[:19]: (e["ClusterName"], e["KubernetesGroups"]) for e in entries
    }
    assert groups == {
        "<NodescalerDrainRol": ("my-cluster", ["nodescaler-drain"]),
        "<NodescalerEvaluate": ("my-cluster", ["nodescaler-evaluate"]),
        "<NodescalerTerminat": ("my-cluster", ["nodescaler-terminate"]),
        "<NodescalerFastPath": ("my-cluster", ["nodescaler-fast-path"]),
    }


def test_cluster_vcpu_and_memory_limits_let_evaluate_size_instances_even_without_a_cluster(
    no_cluster: dict[str, Any],
) -> None:
    by_count = role_statements(synth(**no_cluster, clusterLimits={"maxNodes": 50}), "evaluate")
    assert not statements_for(by_count, "ec2:DescribeInstanceTypes")
    by_size = role_statements(synth(**no_cluster, clusterLimits={"maxVcpus": 400}), "evaluate")
    assert statement_for(by_size, "ec2:DescribeInstanceTypes")["Resource"] == "*"
    node_groups = statement_for(by_size, "eks:DescribeNodegroup")  # a managed group's types
    assert render(node_groups["Resource"]).endswith(":nodegroup/*/*/*")


def test_a_custom_expander_may_be_invoked_and_nothing_else() -> None:
    template = synth(
        expanders=[{"name": "custom", "functionName": "pick-group"}, {"name": "random"}]
    )
    invoke = statement_for(role_statements(template, "evaluate"), "lambda:InvokeFunction")
    assert render(invoke["Resource"]).endswith(":function:pick-group")
    assert not any(
        "lambda:InvokeFunction" in str(s["Action"]) for s in role_statements(synth(), "evaluate")
    )


def test_only_auto_scaling_may_invoke_the_termination_policy_which_changes_nothing(
    template: Template,
) -> None:
    (permission,) = (
        p["Properties"]
        for p in resources(template, "AWS::Lambda::Permission").values()
        if "AWSServiceRoleForAutoScaling" in render(p["Properties"]["Principal"])
    )
    assert permission["Action"] == "lambda:InvokeFunction"
    assert render(permission["FunctionName"]).startswith("<NodescalerTerminateFunction")
    assert render(permission["Principal"]).endswith(
        ":role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
    )
    allowed = {
        a
        for s in role_statements(template, "terminate")
        if s["Effect"] == "Allow"
        for a in actions_of(s)
    }
    assert allowed == {
        "autoscaling:DescribeAutoScalingGroups",
        "autoscaling:DescribeLifecycleHooks",  # whether a group drains its nodes
        "dynamodb:DeleteItem",  # how long a cause has waited (the next test)
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "eks:DescribeCluster",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }
    environment_ = environment(template, "terminate")
    assert environment_["KUBERNETES_TIMEOUT_SECONDS"] == "1.2"  # inside the two seconds
    outputs = template.find_outputs("*")
    assert any(
        name.startswith("NodescalerTerminationPolicyArn") or "TerminationPolicyArn" in name
        for name in outputs
    )


def test_the_termination_policy_may_touch_its_waits_and_no_groups_state_or_audit_items(
    template: Template,
) -> None:
    # Given the deployed terminate function
    statements = role_statements(template, "terminate")
    keep = statement_for(statements, "dynamodb:PutItem")
    # Then it reads, puts and deletes items of the state table in the waits' own
    # partitions only
    assert sorted(actions_of(keep)) == [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
    ]
    assert render(keep["Resource"]).startswith("<NodescalerStateTable")
    assert keep["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["TERMINATION-WAIT#*"]}
    }
    # no other statement lets it at the table
    assert [s for s in statements if any(a.startswith("dynamodb:") for a in actions_of(s))] == [
        keep
    ]
    # so, IAM's StringLike being fnmatch's: the waits it keeps are allowed, and a group's
    # state and audit items and a stored policy are not (they were: GROUP#* covered them)
    allowed = keep["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    wait = DynamoTerminationWaits(None, "t")._key("web", "INSTANCE_REFRESH")["pk"]["S"]
    assert any(fnmatchcase(wait, pattern) for pattern in allowed)
    for key in ("GROUP#web", "GROUP#TERMINATION-WAIT#web", "CLUSTER", HEADS_PK, "POLICY#web"):
        assert not any(fnmatchcase(key, pattern) for pattern in allowed), key
    assert environment(template, "terminate")["STATE_TABLE_NAME"].startswith(
        "<NodescalerStateTable"
    )


def test_an_eks_node_group_is_resized_only_when_it_is_itself_tagged_as_opted_in() -> None:
    statements = role_statements(synth(clusterName="prod"), "evaluate")
    resize = statement_for(statements, "eks:UpdateNodegroupConfig")
    assert resize["Condition"] == {
        "StringEqualsIgnoreCase": {"aws:ResourceTag/nodescaler/enabled": "true"},
        "StringEquals": {"aws:ResourceTag/nodescaler/cluster": "prod"},
    }
    assert render(resize["Resource"]).endswith(":nodegroup/prod/*/*")
    # reading is not conditioned: it is how the function checks which ASGs a group owns
    describe = statement_for(statements, "eks:DescribeNodegroup")
    assert "Condition" not in describe


def test_evaluate_sets_aside_what_retrying_cannot_help_and_reschedules_the_rest(
    template: Template,
) -> None:
    variables = environment(template, "evaluate")
    assert variables["EVALUATION_QUEUE_URL"].startswith("<NodescalerEvaluations")
    assert variables["DEAD_LETTER_QUEUE_URL"].startswith("<NodescalerEvaluationDeadLetters")
    statements = role_statements(template, "evaluate")
    sent_to = sorted(
        render(resource)
        for s in statements_for(statements, "sqs:SendMessage")
        # one statement per queue, or one for both (cdk.json's minimizePolicies)
        for resource in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    )
    # its dead-letter queue, and its own queue: a request not started for lack of time
    # goes back as a new message, spending no receive
    assert [re.sub(r"[0-9A-F]{8}\.Arn>$", "", r) for r in sent_to] == [
        "<NodescalerEvaluationDeadLetters",
        "<NodescalerEvaluations",
    ]
    consume = statement_for(statements, "sqs:ChangeMessageVisibility")
    assert render(consume["Resource"]).startswith("<NodescalerEvaluations")

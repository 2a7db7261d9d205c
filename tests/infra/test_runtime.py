"""The deployed runtime, read from the synthesized template: queues, functions, triggers,
least-privilege IAM, the dashboard and the alarms, and cdk-nag's verdict."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks
from nodescaler.events import ScheduledEvent, parse_dispatch_event

from tests.infra.test_stack import REPO, synth, synth_stack


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


def render(value: Any) -> str:
    """A template value as text, references shown as <Name> or <Name.Attribute>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(render(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    return json.dumps(value)


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


def statement_for(statements: list[dict[str, Any]], action: str) -> dict[str, Any]:
    (found,) = (
        s
        for s in statements
        if action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    )
    return found


# --- queues and triggers --------------------------------------------------------------


def test_the_evaluation_queue_is_fifo_encrypted_ssl_only_and_dead_letters_after_3_receives(
    template: Template,
) -> None:
    queues = resources(template, "AWS::SQS::Queue")
    evaluations = next(q for n, q in queues.items() if n.startswith("NodescalerEvaluations"))
    dlq_name = next(n for n in queues if n.startswith("NodescalerEvaluationDeadLetters"))
    props = evaluations["Properties"]
    assert props["FifoQueue"] is True
    assert props["SqsManagedSseEnabled"] is True
    assert props["VisibilityTimeout"] == 360  # six times the evaluate function's 60 s
    assert props["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_name, "Arn"]},
        "maxReceiveCount": 3,
    }
    assert queues[dlq_name]["Properties"]["FifoQueue"] is True
    for policy in resources(template, "AWS::SQS::QueuePolicy").values():
        deny = policy["Properties"]["PolicyDocument"]["Statement"][0]
        assert (deny["Effect"], deny["Action"], deny["Condition"]) == (
            "Deny",
            "sqs:*",
            {"Bool": {"aws:SecureTransport": "false"}},
        )
    assert len(resources(template, "AWS::SQS::QueuePolicy")) == 3  # every queue


def test_evaluate_consumes_the_queue_reporting_batch_item_failures_with_bounded_concurrency(
    template: Template,
) -> None:
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "BatchSize": 10,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": 10},
        },
    )


def test_the_tick_is_a_scheduler_rate_whose_input_is_a_tick_dispatch_can_parse(
    template: Template,
) -> None:
    (schedule,) = resources(template, "AWS::Scheduler::Schedule").values()
    props = schedule["Properties"]
    assert props["ScheduleExpression"] == "rate(1 minute)"
    assert props["Target"]["RetryPolicy"] == {
        "MaximumEventAgeInSeconds": 600,
        "MaximumRetryAttempts": 2,
    }
    assert "DeadLetterConfig" in props["Target"]
    sent = (
        render(props["Target"]["Input"])
        .replace("<aws.scheduler.scheduled-time>", "2026-11-23T09:00:00Z")
        .replace("<aws.scheduler.schedule-arn>", "arn:aws:scheduler:eu-west-1:1:schedule/d/t")
        .replace("<AWS::AccountId>", "123456789012")
        .replace("<AWS::Region>", "eu-west-1")
    )
    tick = parse_dispatch_event(json.loads(sent))
    assert isinstance(tick, ScheduledEvent)
    assert tick.id == "tick-2026-11-23T09:00:00Z"  # the same on the schedule's retries


def test_alarm_state_changes_of_the_alarms_policies_name_go_to_dispatch(
    template: Template,
) -> None:
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.cloudwatch"],
                "detail-type": ["CloudWatch Alarm State Change"],
                "detail": {"alarmName": ["web-requests-high"]},
            },
            "Targets": [
                Match.object_like(
                    {
                        "RetryPolicy": {"MaximumEventAgeInSeconds": 600, "MaximumRetryAttempts": 2},
                        "DeadLetterConfig": Match.any_value(),
                    }
                )
            ],
        },
    )


def test_dispatch_failures_land_in_its_dead_letter_queue_after_two_retries(
    template: Template,
) -> None:
    template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig",
        {
            "MaximumRetryAttempts": 2,
            "MaximumEventAgeInSeconds": 600,
            "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}},
        },
    )


# --- functions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "memory", "layers"),
    [("dispatch", 256, 3), ("evaluate", 512, 4)],  # evaluate reads the cluster: + kubernetes
)
def test_functions_run_on_arm64_python_3_14_with_their_layers(
    template: Template, folder: str, memory: int, layers: int
) -> None:
    props = function(template, folder)
    assert (props["Runtime"], props["Architectures"], props["Handler"]) == (
        "python3.14",
        ["arm64"],
        "handler.handler",
    )
    assert (props["MemorySize"], props["Timeout"], len(props["Layers"])) == (memory, 60, layers)
    assert props["Environment"]["Variables"]["POLICIES_PATH"] == "/opt/policies"


def test_each_function_gets_its_environment_from_its_settings_model(template: Template) -> None:
    dispatch = function(template, "dispatch")["Environment"]["Variables"]
    evaluate = function(template, "evaluate")["Environment"]["Variables"]
    assert render(dispatch["EVALUATION_QUEUE_URL"]).startswith("<NodescalerEvaluations")
    assert "STATE_TABLE_NAME" not in dispatch
    assert render(evaluate["STATE_TABLE_NAME"]).startswith("<NodescalerStateTable")
    assert (evaluate["DRY_RUN"], evaluate["AUDIT_TTL_DAYS"], evaluate["TAG_POLICY"]) == (
        "false",
        "30",
        "nodescaler/policy",
    )
    assert json.loads(evaluate["EXPANDERS"]) == [{"name": "least-waste"}, {"name": "random"}]


def test_no_role_carries_an_aws_managed_policy(template: Template) -> None:
    for role in resources(template, "AWS::IAM::Role").values():
        assert "ManagedPolicyArns" not in role["Properties"]


# --- least privilege ------------------------------------------------------------------


def test_resizing_is_allowed_only_on_groups_carrying_the_opt_in_tag(template: Template) -> None:
    resize = statement_for(role_statements(template, "evaluate"), "autoscaling:SetDesiredCapacity")
    assert resize["Condition"] == {
        "StringEqualsIgnoreCase": {"aws:ResourceTag/nodescaler/enabled": "true"},
        "StringEquals": {"aws:ResourceTag/nodescaler/cluster": "my-cluster"},
    }
    assert render(resize["Resource"]).endswith(":autoScalingGroup:*:autoScalingGroupName/*")


def test_with_a_cluster_configured_writes_also_need_its_tag_and_eks_is_scoped_to_it() -> None:
    statements = role_statements(synth(clusterName="prod"), "evaluate")
    resize = statement_for(statements, "autoscaling:SetDesiredCapacity")
    assert resize["Condition"]["StringEquals"] == {"aws:ResourceTag/nodescaler/cluster": "prod"}
    eks = statement_for(statements, "eks:UpdateNodegroupConfig")
    assert render(eks["Resource"]).endswith(":nodegroup/prod/*/*")


@pytest.mark.parametrize("folder", ["dispatch", "evaluate"])
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


def test_evaluate_reads_and_writes_the_state_table_with_three_actions_only(
    template: Template,
) -> None:
    state = statement_for(role_statements(template, "evaluate"), "dynamodb:PutItem")
    assert state["Action"] == ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"]


def test_dispatch_can_describe_groups_and_send_evaluations_but_not_resize(
    template: Template,
) -> None:
    actions = {
        action
        for s in role_statements(template, "dispatch")
        if s["Effect"] == "Allow"
        for action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    }
    assert "autoscaling:DescribeAutoScalingGroups" in actions
    assert "sqs:SendMessage" in actions
    assert not any(a.startswith(("autoscaling:Set", "eks:", "dynamodb:")) for a in actions)


def test_evaluate_may_read_the_cluster_it_is_given_access_to(template: Template) -> None:
    statements = role_statements(template, "evaluate")
    describe = statement_for(statements, "eks:DescribeCluster")
    assert render(describe["Resource"]).endswith(
        ":eks:<AWS::Region>:<AWS::AccountId>:cluster/my-cluster"
    )
    (entry,) = resources(template, "AWS::EKS::AccessEntry").values()
    assert entry["Properties"]["ClusterName"] == "my-cluster"
    assert entry["Properties"]["KubernetesGroups"] == ["nodescaler"]
    assert render(entry["Properties"]["PrincipalArn"]).startswith("<NodescalerEvaluateRole")


def test_a_custom_expander_may_be_invoked_and_nothing_else() -> None:
    template = synth(
        expanders=[{"name": "custom", "functionName": "pick-group"}, {"name": "random"}]
    )
    invoke = statement_for(role_statements(template, "evaluate"), "lambda:InvokeFunction")
    assert render(invoke["Resource"]).endswith(":function:pick-group")
    assert not any(
        "lambda:InvokeFunction" in str(s["Action"]) for s in role_statements(synth(), "evaluate")
    )


def test_with_a_vpc_evaluate_runs_in_its_subnets() -> None:
    vpc = {"subnetIds": ["subnet-0a1b"], "securityGroupIds": ["sg-0c1d"]}
    template = synth(vpc=vpc)
    assert function(template, "evaluate")["VpcConfig"] == {
        "SubnetIds": ["subnet-0a1b"],
        "SecurityGroupIds": ["sg-0c1d"],
    }
    assert "VpcConfig" not in function(template, "dispatch")
    statement_for(role_statements(template, "evaluate"), "ec2:CreateNetworkInterface")


def test_the_rbac_manifest_grants_only_what_nodescaler_uses() -> None:
    import yaml

    role, binding = yaml.safe_load_all((REPO / "infra" / "kubernetes" / "rbac.yaml").read_text())
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == {
        *(("", r, v) for r in ("nodes", "pods") for v in ("get", "list", "watch")),
        *(("policy", "poddisruptionbudgets", v) for v in ("get", "list", "watch")),
        ("", "nodes", "patch"),
        ("", "pods/eviction", "create"),
    }
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "nodescaler"}
    ]


# --- what operators see ---------------------------------------------------------------


def test_the_dashboard_has_a_row_per_policy_built_from_searches(template: Template) -> None:
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(
        render(dashboard["Properties"]["DashboardBody"]).replace("<", "").replace(">", "")
    )
    titles = [w["properties"].get("title", "") for w in body["widgets"]]
    for policy in ("gpu-training", "microservices", "business-hours"):
        assert f"{policy}: desired, current and in-service nodes" in titles
        assert f"{policy}: each metric against its target" in titles
        assert f"{policy}: decisions and what limited them" in titles
    text = json.dumps(body)
    assert 'MetricName=\\"DesiredNodes\\" Policy=\\"gpu-training\\"' in text
    assert "Tick duration and evaluation latency" in titles


def test_the_alarms_cover_errors_throttles_dead_letters_latency_and_shortfall(
    template: Template,
) -> None:
    alarms = resources(template, "AWS::CloudWatch::Alarm").values()
    assert len(alarms) == 9
    shortfall = next(
        a["Properties"] for a in alarms if a["Properties"].get("MetricName") == "ShortfallNodes"
    )
    assert (shortfall["EvaluationPeriods"], shortfall["DatapointsToAlarm"]) == (15, 15)
    # every alarm says what happened and what to do about it
    assert all(len(a["Properties"]["AlarmDescription"]) > 40 for a in alarms)
    assert all("AlarmActions" not in a["Properties"] for a in alarms)  # no topic configured


def test_with_an_email_the_alarms_notify_an_encrypted_ssl_only_topic() -> None:
    template = synth(alarms={"email": "ops@example.com"})
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "ops@example.com"}
    )
    template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    for alarm in resources(template, "AWS::CloudWatch::Alarm").values():
        assert len(alarm["Properties"]["AlarmActions"]) == 1
        assert len(alarm["Properties"]["OKActions"]) == 1


def test_with_a_topic_arn_the_alarms_notify_that_topic() -> None:
    arn = "arn:aws:sns:eu-west-1:123456789012:ops"
    template = synth(alarms={"topicArn": arn})
    for alarm in resources(template, "AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [arn]


# --- cdk-nag --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "clusterName": "prod",
            "alarms": {"email": "ops@example.com"},
            "expanders": [{"name": "custom", "functionName": "pick"}],
            "vpc": {"subnetIds": ["subnet-0a"], "securityGroupIds": ["sg-0b"]},
        },
    ],
    ids=["sample", "everything-set"],
)
def test_cdk_nag_aws_solutions_finds_nothing_unsuppressed(overrides: dict[str, Any]) -> None:
    stack = synth_stack(**overrides)
    cdk.Aspects.of(stack).add(AwsSolutionsChecks())
    annotations = Annotations.from_stack(stack)
    findings = [
        *annotations.find_error("*", Match.string_like_regexp("AwsSolutions-.*")),
        *annotations.find_warning("*", Match.string_like_regexp("AwsSolutions-.*")),
    ]
    assert [f"{f.id}: {f.entry.data}" for f in findings] == []

"""The deployed runtime, read from the synthesized template: queues, functions, triggers,
least-privilege IAM, the dashboard and the alarms, and cdk-nag's verdict."""

from __future__ import annotations

import json
import re
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from nodescaler.config import (
    CommonSettings,
    DispatchSettings,
    DrainSettings,
    EvaluateSettings,
    TerminateSettings,
)
from nodescaler.domain.drainability import DrainRules
from nodescaler.events.dispatch import ScheduledEvent, parse_dispatch_event
from nodescaler_sandbox.dashboard_layout import resolved as render  # refs shown as <Name>

from tests.infra.test_stack import REPO, synth, synth_stack


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


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
    assert len(resources(template, "AWS::SQS::QueuePolicy")) == 4  # every queue


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
    written = json.loads(render(props["Target"]["Input"]))
    # Scheduler replaces a context attribute only as a whole value, as its examples show
    # (https://docs.aws.amazon.com/scheduler/latest/UserGuide/managing-schedule-context-attributes.html)
    assert (
        [v for v in strings_in(written) if "<aws.scheduler." in v]
        == [v for v in strings_in(written) if re.fullmatch(r"<aws\.scheduler\.[a-z-]+>", v)]
        != []
    )
    replaced = {  # as Scheduler sends them
        "<aws.scheduler.scheduled-time>": "2026-11-23T09:00:00Z",
        "<aws.scheduler.execution-id>": "d32c5kddcf5bb8c3",
        "<aws.scheduler.schedule-arn>": "arn:aws:scheduler:eu-west-1:1:schedule/d/t",
        "<AWS::AccountId>": "123456789012",
        "<AWS::Region>": "eu-west-1",
    }
    tick = parse_dispatch_event(whole_values_replaced(written, replaced))
    assert isinstance(tick, ScheduledEvent)
    assert tick.identity == "tick-2026-11-23T09:00:00Z"  # the same on the schedule's retries


def whole_values_replaced(value: Any, replaced: dict[str, str]) -> Any:
    """A JSON value with each string that is a key of `replaced` replaced, as a whole."""
    if isinstance(value, dict):
        return {k: whole_values_replaced(v, replaced) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_values_replaced(v, replaced) for v in value]
    return replaced.get(value, value) if isinstance(value, str) else value


def strings_in(value: Any) -> list[str]:
    """Every string a JSON value holds, keys aside."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return [value] if isinstance(value, str) else []


def test_alarm_state_changes_of_the_alarms_policies_name_go_to_dispatch(
    template: Template,
) -> None:
    template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "EventPattern": {
                "source": ["aws.cloudwatch"],
                "detail-type": ["CloudWatch Alarm State Change"],
                "detail": {"alarmName": ["ml-training-queue-backlog", "web-requests-high"]},
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


def test_launch_failures_of_any_group_go_to_dispatch_with_its_retries_and_dead_letters(
    template: Template,
) -> None:
    launches = rule(template, "LaunchFailures")
    assert launches["EventPattern"] == {
        "source": ["aws.autoscaling"],
        "detail-type": ["EC2 Instance Launch Unsuccessful"],
    }
    assert matches(launches["EventPattern"], sample("launch-unsuccessful"))
    (target,) = launches["Targets"]
    assert render(target["Arn"]).startswith("<NodescalerDispatchFunction")
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 600, "MaximumRetryAttempts": 2}
    assert render(target["DeadLetterConfig"]["Arn"]).startswith("<NodescalerDispatchDeadLetters")


def test_terminate_lifecycle_actions_of_the_drain_hook_only_go_to_drain(
    template: Template,
) -> None:
    lifecycle = rule(template, "TerminateLifecycleActions")
    assert lifecycle["EventPattern"] == {
        "source": ["aws.autoscaling"],
        "detail-type": ["EC2 Instance-terminate Lifecycle Action"],
        "detail": {"LifecycleHookName": ["nodescaler-my-cluster-drain"]},
    }
    event = sample("lifecycle-terminate")
    event["detail"]["LifecycleHookName"] = "nodescaler-my-cluster-drain"
    assert matches(lifecycle["EventPattern"], event)
    someone_elses = event | {"detail": event["detail"] | {"LifecycleHookName": "other-drainer"}}
    assert not matches(lifecycle["EventPattern"], someone_elses)


def test_spot_warnings_and_rebalance_recommendations_go_to_drain(template: Template) -> None:
    spot = rule(template, "SpotWarnings")
    assert spot["EventPattern"] == {
        "source": ["aws.ec2"],
        "detail-type": [
            "EC2 Spot Instance Interruption Warning",
            "EC2 Instance Rebalance Recommendation",
        ],
    }
    assert matches(spot["EventPattern"], sample("spot-interruption"))
    assert matches(spot["EventPattern"], sample("rebalance-recommendation"))


@pytest.mark.parametrize("name", ["TerminateLifecycleActions", "SpotWarnings"])
def test_drain_rules_deliver_to_drain_keeping_undeliverable_events_in_its_dead_letters(
    template: Template, name: str
) -> None:
    (target,) = rule(template, name)["Targets"]
    assert render(target["Arn"]).startswith("<NodescalerDrainFunction")
    # past the hook's five-minute heartbeat timeout the instance is gone
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 300, "MaximumRetryAttempts": 2}
    assert render(target["DeadLetterConfig"]["Arn"]).startswith("<NodescalerDrainDeadLetters")


def test_a_failed_drain_is_not_retried_but_kept_in_the_drain_dead_letter_queue(
    template: Template,
) -> None:
    (config,) = (
        c["Properties"]
        for c in resources(template, "AWS::Lambda::EventInvokeConfig").values()
        if render(c["Properties"]["FunctionName"]).startswith("<NodescalerDrainFunction")
    )
    assert (config["MaximumRetryAttempts"], config["MaximumEventAgeInSeconds"]) == (0, 300)
    destination = config["DestinationConfig"]["OnFailure"]["Destination"]
    assert render(destination).startswith("<NodescalerDrainDeadLetters")


def test_no_lifecycle_hook_is_created_unless_the_context_names_groups(template: Template) -> None:
    assert resources(template, "AWS::AutoScaling::LifecycleHook") == {}


def test_each_group_to_drain_gets_the_terminate_hook_the_drain_answers_to() -> None:
    hooks = resources(synth(drainGroups=["web", "gpu-ng"]), "AWS::AutoScaling::LifecycleHook")
    found = {h["Properties"]["AutoScalingGroupName"]: h["Properties"] for h in hooks.values()}
    assert set(found) == {"web", "gpu-ng"}
    for hook in found.values():
        assert hook == {
            "AutoScalingGroupName": hook["AutoScalingGroupName"],
            "LifecycleHookName": "nodescaler-my-cluster-drain",
            "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
            "HeartbeatTimeout": 300,
            "DefaultResult": "CONTINUE",
        }
        # longer than the drain's heartbeat interval, or Auto Scaling gives up mid-drain
        assert hook["HeartbeatTimeout"] > DrainSettings.model_fields["heartbeat_seconds"].default


@pytest.fixture(scope="module")
def no_cluster(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Overrides for a stack without a cluster: no cluster name (allGroups, said on
    purpose), a policy reading a queue."""
    folder = tmp_path_factory.mktemp("policies")
    (folder / "gpu.yaml").write_text((REPO / "policies" / "gpu-training.yaml").read_text())
    return {"clusterName": "", "allGroups": True, "policiesFolder": str(folder)}


def test_without_a_cluster_there_is_no_drain_but_launch_failures_still_back_off(
    no_cluster: dict[str, Any],
) -> None:
    template = synth(**no_cluster)
    names = [
        *resources(template, "AWS::Lambda::Function"),
        *resources(template, "AWS::Events::Rule"),
    ]
    assert not any(
        n.startswith(("NodescalerDrain", "NodescalerSpot", "NodescalerTerm")) for n in names
    )
    assert resources(template, "AWS::EKS::AccessEntry") == {}
    rule(template, "LaunchFailures")


# --- functions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "memory", "timeout", "kubernetes"),
    [
        ("dispatch", 256, 60, False),
        ("evaluate", 512, 60, True),  # the sample's policies read the cluster
        ("drain", 512, 900, True),  # a ten-minute drain, and a minute to spare
        ("terminate", 1024, 2, True),  # Auto Scaling waits two seconds for its answer
    ],
)
def test_functions_run_on_arm64_python_3_14_with_their_layers(
    template: Template, folder: str, memory: int, timeout: int, kubernetes: bool
) -> None:
    props = function(template, folder)
    assert (props["Runtime"], props["Architectures"], props["Handler"]) == (
        "python3.14",
        ["arm64"],
        "handler.handler",
    )
    assert (props["MemorySize"], props["Timeout"]) == (memory, timeout)
    layers = [render(layer) for layer in props["Layers"]]
    assert len(layers) == 3 + kubernetes
    assert any(layer.startswith("<NodescalerLayersKubernetes") for layer in layers) is kubernetes
    assert props["Environment"]["Variables"]["POLICIES_PATH"] == "/opt/policies"


def environment(template: Template, folder: str) -> dict[str, str]:
    """A function's variables, references rendered as text."""
    variables = function(template, folder)["Environment"]["Variables"]
    return {name: render(value) for name, value in variables.items()}


def test_each_function_gets_its_environment_from_its_settings_model(template: Template) -> None:
    dispatch = environment(template, "dispatch")
    evaluate = environment(template, "evaluate")
    assert dispatch["EVALUATION_QUEUE_URL"].startswith("<NodescalerEvaluations")
    for variables in (dispatch, evaluate):  # dispatch records backoffs, evaluate heeds them
        assert variables["STATE_TABLE_NAME"].startswith("<NodescalerStateTable")
        assert (
            variables["BACKOFF_INITIAL_SECONDS"],
            variables["BACKOFF_MAX_SECONDS"],
            variables["BACKOFF_RESET_SECONDS"],
            variables["MAX_PROVISION_SECONDS"],
        ) == ("300", "1800", "10800", "900")
    assert (
        evaluate["DRY_RUN"],
        evaluate["AUDIT_TTL_DAYS"],
        evaluate["TAG_POLICY"],
        evaluate["TAG_PAUSED"],
        evaluate["KUBERNETES_TIMEOUT_SECONDS"],
    ) == ("false", "30", "nodescaler/policy", "nodescaler/paused", "5.0")
    assert json.loads(evaluate["EXPANDERS"]) == [{"name": "least-waste"}, {"name": "random"}]
    assert not any(name.startswith("CLUSTER_MAX_") for name in evaluate)  # no limits by default


def test_the_drain_gets_its_cluster_queue_and_timing_from_its_settings_model(
    template: Template,
) -> None:
    drain = environment(template, "drain")
    assert drain["EVALUATION_QUEUE_URL"].startswith("<NodescalerEvaluations")
    assert (drain["CLUSTER_NAME"], drain["TAG_ENABLED"], drain["TAG_CLUSTER"]) == (
        "my-cluster",
        "nodescaler/enabled",
        "nodescaler/cluster",
    )
    assert (
        drain["DRAIN_TIMEOUT_SECONDS"],
        drain["HEARTBEAT_SECONDS"],
        drain["MAX_GRACE_SECONDS"],
        drain["DRAIN_TIMEOUT_RESULT"],
    ) == ("600", "60", "600", "CONTINUE")
    changed = environment(
        synth(drain={"timeoutSeconds": 300, "maxGraceSeconds": 120, "timeoutResult": "ABANDON"}),
        "drain",
    )
    assert (
        changed["DRAIN_TIMEOUT_SECONDS"],
        changed["MAX_GRACE_SECONDS"],
        changed["DRAIN_TIMEOUT_RESULT"],
    ) == ("300", "120", "ABANDON")


def test_cluster_limits_and_backoff_in_the_context_reach_the_functions() -> None:
    template = synth(
        clusterLimits={"maxNodes": 500, "maxVcpus": 4000, "maxMemoryGib": 16000},
        backoff={"initialSeconds": 60, "maxSeconds": 600},
        kubernetesTimeoutSeconds=2.5,
    )
    evaluate = environment(template, "evaluate")
    assert evaluate["KUBERNETES_TIMEOUT_SECONDS"] == "2.5"
    assert (
        evaluate["CLUSTER_MAX_NODES"],
        evaluate["CLUSTER_MAX_VCPUS"],
        evaluate["CLUSTER_MAX_MEMORY_GIB"],
    ) == ("500", "4000", "16000")
    for folder in ("dispatch", "evaluate"):
        variables = environment(template, folder)
        assert (variables["BACKOFF_INITIAL_SECONDS"], variables["BACKOFF_MAX_SECONDS"]) == (
            "60",
            "600",
        )
    assert "CLUSTER_MAX_NODES" not in environment(template, "dispatch")


def test_cluster_autoscalers_skip_nodes_flags_in_the_context_reach_every_function_that_chooses(
    template: Template,
) -> None:
    # evaluate (protection, unneeded nodes), terminate (which instances go) and the drain
    # (which pods it refuses) decide alike: true, true by default, as Cluster Autoscaler
    for folder in ("evaluate", "terminate", "drain"):
        variables = environment(template, folder)
        flags = (
            variables["SKIP_NODES_WITH_LOCAL_STORAGE"],
            variables["SKIP_NODES_WITH_SYSTEM_PODS"],
        )
        assert flags == ("true", "true")
    changed = synth(skipNodesWithLocalStorage=False, skipNodesWithSystemPods=False)
    for folder in ("evaluate", "terminate", "drain"):
        settings = CommonSettings.from_environment(environment(changed, folder))
        assert settings.drain_rules == DrainRules(False, False)


# What CloudFormation puts where the template has a reference.
DEPLOYED = {
    "<NodescalerEvaluations": "https://sqs.eu-west-1.amazonaws.com/123456789012/e.fifo",
    "<NodescalerEvaluationDeadLetters": "https://sqs.eu-west-1.amazonaws.com/123456789012/d.fifo",
    "<NodescalerStateTable": "nodescaler-state",
}


@pytest.mark.parametrize(
    ("folder", "model"),
    [
        ("dispatch", DispatchSettings),
        ("evaluate", EvaluateSettings),
        ("drain", DrainSettings),
        ("terminate", TerminateSettings),
    ],
)
def test_each_functions_environment_is_accepted_by_its_settings_model(
    folder: str,
    model: type[DispatchSettings | EvaluateSettings | DrainSettings | TerminateSettings],
) -> None:
    template = synth(clusterLimits={"maxNodes": 500}, drainGroups=["web"])
    variables = environment(template, folder)
    for name, value in variables.items():
        variables[name] = next((v for k, v in DEPLOYED.items() if value.startswith(k)), value)
    settings = model.from_environment(variables)  # raises, naming the variable, if not
    assert settings.cluster_name == "my-cluster"


# --- least privilege ------------------------------------------------------------------


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


def test_with_a_vpc_the_functions_that_reach_the_cluster_run_in_its_subnets() -> None:
    vpc = {"subnetIds": ["subnet-0a1b2c3d"], "securityGroupIds": ["sg-0c1d2e3f"]}
    template = synth(vpc=vpc)
    for folder in ("evaluate", "drain"):
        assert function(template, folder)["VpcConfig"] == {
            "SubnetIds": ["subnet-0a1b2c3d"],
            "SecurityGroupIds": ["sg-0c1d2e3f"],
        }
        statement_for(role_statements(template, folder), "ec2:CreateNetworkInterface")
    assert "VpcConfig" not in function(template, "dispatch")


def kubernetes_manifests() -> list[dict[str, Any]]:
    import yaml

    return [
        document
        for path in sorted((REPO / "infra" / "kubernetes").glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
    ]


def granted_to(group: str) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) the manifests grant a Kubernetes group."""
    manifests = kubernetes_manifests()
    roles = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ClusterRole"}
    return {
        (api_group, resource, verb)
        for binding in manifests
        if binding["kind"] == "ClusterRoleBinding"
        and {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}
        in binding["subjects"]
        for rule in roles[binding["roleRef"]["name"]]["rules"]
        for api_group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


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


def test_the_termination_policy_keeps_its_waits_in_the_groups_partitions_of_the_state_table(
    template: Template,
) -> None:
    # Given the deployed terminate function
    statements = role_statements(template, "terminate")
    keep = statement_for(statements, "dynamodb:PutItem")
    # Then it reads, puts and deletes items of the state table in the groups' partitions
    # only (its waits, beside each group's state), never a stored policy's
    assert sorted(actions_of(keep)) == [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
    ]
    assert render(keep["Resource"]).startswith("<NodescalerStateTable")
    assert keep["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["GROUP#*"]}}
    assert environment(template, "terminate")["STATE_TABLE_NAME"].startswith(
        "<NodescalerStateTable"
    )


def test_evaluate_may_read_the_cluster_tell_a_pod_why_it_waits_and_mark_leaving_nodes() -> None:
    assert granted_to("nodescaler-evaluate") == {
        ("", resource, verb) for resource in ("nodes", "pods") for verb in ("get", "list", "watch")
    } | {
        ("policy", "poddisruptionbudgets", "list"),
        ("", "events", "create"),
        ("", "nodes", "patch"),  # its soft taint alone, by the admission policy
    }


def test_given_a_cluster_terminate_is_a_group_of_its_own_that_may_only_read(
    template: Template,
) -> None:
    # Given the stack with a cluster, when terminate's role enters the cluster,
    (entry,) = (
        e["Properties"]
        for e in resources(template, "AWS::EKS::AccessEntry").values()
        if render(e["Properties"]["PrincipalArn"]).startswith("<NodescalerTerminateRole")
    )
    # then it is in a group no other function's role is in, and not evaluate's (which may
    # patch nodes) ...
    assert entry["KubernetesGroups"] == ["nodescaler-terminate"]
    # ... which rbac.yaml lets read what a scale-in's choice needs, and write nothing.
    granted = granted_to("nodescaler-terminate")
    assert {verb for _, _, verb in granted} <= {"get", "list", "watch"}
    assert {
        ("", "nodes", "list"),
        ("", "pods", "list"),
        ("policy", "poddisruptionbudgets", "list"),
    } <= granted
    # No admission policy is needed for it: it sends no UPDATE to be checked.
    assert not any(
        "nodescaler-terminate" in json.dumps(m.get("spec", {}))
        for m in kubernetes_manifests()
        if m["kind"] == "ValidatingAdmissionPolicy"
    )


def test_the_drain_may_find_cordon_and_evict_and_nothing_else() -> None:
    assert granted_to("nodescaler-drain") == {
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "nodes", "patch"),
        ("", "pods", "list"),
        ("", "pods/eviction", "create"),
        # a kube-system pod no budget selects is not evicted (--skip-nodes-with-system-pods)
        ("policy", "poddisruptionbudgets", "list"),
    }


def test_the_groups_the_stack_names_are_the_groups_the_manifests_bind(template: Template) -> None:
    entries = resources(template, "AWS::EKS::AccessEntry").values()
    named = {group for e in entries for group in e["Properties"]["KubernetesGroups"]}
    bound = {
        subject["name"]
        for m in kubernetes_manifests()
        if m["kind"] == "ClusterRoleBinding"
        for subject in m["subjects"]
    }
    assert named == bound


# The admission policy is CEL; cel-python evaluates it as the API server would.
NODE = {
    "metadata": {"name": "ip-10-0-1-5", "labels": {"pool": "web"}, "annotations": {"a": "1"}},
    "spec": {"providerID": "aws:///us-east-1a/i-0abc", "podCIDRs": ["10.1.0.0/24"]},
}


DRAIN_POLICY = "nodescaler-drain-cordons-only"
EVALUATE_POLICY = "nodescaler-evaluate-marks-candidates-only"


def admitted(
    new: dict[str, Any],
    groups: tuple[str, ...] = ("nodescaler-drain",),
    name: str = DRAIN_POLICY,
    old: dict[str, Any] = NODE,
) -> list[str]:
    """The messages of the validations of policy `name` a node update fails; ["not
    matched"] when the policy does not apply to the user."""
    import celpy
    from celpy import json_to_cel

    manifests = kubernetes_manifests()
    (policy,) = (
        m
        for m in manifests
        if m["kind"] == "ValidatingAdmissionPolicy" and m["metadata"]["name"] == name
    )
    (binding,) = (
        m
        for m in manifests
        if m["kind"] == "ValidatingAdmissionPolicyBinding" and m["metadata"]["name"] == name
    )
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    spec = policy["spec"]
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    environment = celpy.Environment()
    activation = {
        "object": json_to_cel(new),
        "oldObject": json_to_cel(old),
        "request": json_to_cel({"userInfo": {"groups": list(groups)}}),
    }

    def holds(expression: str) -> bool:
        return bool(environment.program(environment.compile(expression)).evaluate(activation))

    if not all(holds(condition["expression"]) for condition in spec["matchConditions"]):
        return ["not matched"]
    return [v["message"] for v in spec["validations"] if not holds(v["expression"])]


def patched(**changes: Any) -> dict[str, Any]:
    node = json.loads(json.dumps(NODE))
    for path, value in changes.items():
        section, field = path.split("__")
        node[section][field] = value
    return node


def test_the_drain_may_cordon_and_uncordon_a_node() -> None:
    assert admitted(patched(spec__unschedulable=True)) == []
    assert admitted(patched(spec__unschedulable=False)) == []


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({"spec__taints": [{"key": "x", "effect": "NoExecute"}]}, "taints"),
        ({"metadata__labels": {"pool": "batch"}}, "labels"),
        ({"metadata__annotations": {}}, "annotations"),
        ({"metadata__finalizers": ["keep"]}, "finalizers"),
        ({"metadata__ownerReferences": [{"kind": "X", "name": "y"}]}, "owners"),
        ({"spec__providerID": "aws:///us-east-1a/i-0def"}, "only spec.unschedulable"),
        ({"spec__podCIDRs": []}, "only spec.unschedulable"),
    ],
)
def test_the_drain_may_change_nothing_else_of_a_node(change: dict[str, Any], refused: str) -> None:
    messages = admitted(patched(**change, spec__unschedulable=True))
    assert len(messages) == 1 and messages[0].endswith(refused)


def test_the_admission_policy_leaves_every_other_user_alone() -> None:
    tainted = patched(spec__taints=[{"key": "x", "effect": "NoExecute"}])
    assert admitted(tainted, groups=("system:nodes", "nodescaler-evaluate")) == ["not matched"]
    assert admitted(tainted, ("system:nodes",), EVALUATE_POLICY) == ["not matched"]


CANDIDATE = {"key": "nodescaler.io/deletion-candidate", "effect": "PreferNoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def evaluate_admits(new: dict[str, Any], old: dict[str, Any] = NODE) -> list[str]:
    return admitted(new, ("nodescaler-evaluate",), EVALUATE_POLICY, old)


def test_evaluate_may_add_and_remove_its_soft_taint_beside_the_nodes_own() -> None:
    gpu = patched(spec__taints=[GPU_TAINT])
    assert evaluate_admits(patched(spec__taints=[GPU_TAINT, CANDIDATE]), gpu) == []
    assert evaluate_admits(gpu, patched(spec__taints=[GPU_TAINT, CANDIDATE])) == []
    assert evaluate_admits(patched(spec__taints=[CANDIDATE])) == []


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        ({"spec__taints": []}, "only its own taint of a node"),  # the GPU taint removed
        ({"spec__taints": [GPU_TAINT, {**CANDIDATE, "effect": "NoExecute"}]}, "PreferNoSchedule"),
        (
            {"spec__taints": [GPU_TAINT, CANDIDATE], "spec__unschedulable": True},
            "its taint of a node",
        ),
        ({"spec__taints": [GPU_TAINT], "metadata__labels": {}}, "its taint of a node"),
        ({"spec__taints": [GPU_TAINT], "spec__providerID": "aws:///x/i-1"}, "its taint of a node"),
    ],
)
def test_evaluate_may_change_nothing_else_of_a_node(change: dict[str, Any], refused: str) -> None:
    messages = evaluate_admits(patched(**change), patched(spec__taints=[GPU_TAINT]))
    assert len(messages) == 1 and messages[0].endswith(refused)


# --- what operators see ---------------------------------------------------------------


def dashboard_widgets(template: Template) -> dict[str, str]:
    """Each widget's title → its properties as text."""
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(
        render(dashboard["Properties"]["DashboardBody"]).replace("<", "").replace(">", "")
    )
    return {w["properties"].get("title", ""): json.dumps(w["properties"]) for w in body["widgets"]}


def dashboard_body(template: Template) -> list[dict[str, Any]]:
    """The dashboard's widgets in order, references shown as their names."""
    (dashboard,) = resources(template, "AWS::CloudWatch::Dashboard").values()
    text = render(dashboard["Properties"]["DashboardBody"]).replace("<", "").replace(">", "")
    widgets: list[dict[str, Any]] = json.loads(text)["widgets"]
    return widgets


def searches(widget: str) -> list[str]:
    return [e[0]["expression"] for e in json.loads(widget)["metrics"] if "expression" in e[0]]


def test_the_dashboard_shows_the_groups_of_every_policy_even_those_applied_later(
    template: Template,
) -> None:
    """Given a deployment with three policies; When synthesized; Then the groups' graphs are
    SEARCHes over the Policy and NodeGroup dimensions naming no policy (a policy applied
    with `nodescaler apply` after the deploy shows too), and the decisions table filters
    on none: no row is fixed at synth."""
    widgets = dashboard_widgets(template)
    assert not any(title.startswith("gpu-training") for title in widgets)  # no fixed rows
    for title in (
        "Node groups: desired, current and in-service nodes, forecast and warm",
        "Node groups: pending pods their nodes are to take",
        "Node groups: each metric against its target",
        "Node groups: changes and unavailable metrics",
        "Node groups: backed off or paused, and nodes protected from scale-in",
    ):
        found = searches(widgets[title])
        assert found and all(
            re.search(r"\{Nodescaler,(Metric,)?NodeGroup,Policy,service\}", s) for s in found
        )
        assert not any("Policy=" in s for s in found), title
    backoff = searches(
        widgets["Node groups: backed off or paused, and nodes protected from scale-in"]
    )
    assert [s.split('MetricName="')[1].split('"')[0] for s in backoff] == [
        "BackedOff",
        "Paused",
        "ProtectedNodes",
    ]
    decisions = widgets["Node groups: decisions and what limited them, every policy"]
    assert "decision.policy as policy" in decisions and "filter decision.policy =" not in decisions
    assert "Tick duration and evaluation latency" in widgets


def test_the_dashboard_graphs_each_groups_pending_pods_as_evaluate_reports_them(
    template: Template,
) -> None:
    (search,) = searches(
        dashboard_widgets(template)["Node groups: pending pods their nodes are to take"]
    )
    assert search == (
        'SEARCH(\'{Nodescaler,NodeGroup,Policy,service} MetricName="PendingPods" '
        "service=\"nodescaler-my-cluster\"', 'Maximum', 60)"
    )


def test_the_dashboard_opens_on_every_alarms_state(template: Template) -> None:
    header, status, *_ = dashboard_body(template)
    assert header["type"] == "text" and status["type"] == "alarm"
    assert (status["x"], status["y"], status["width"]) == (0, header["height"], 24)
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    assert sorted(status["properties"]["alarms"]) == sorted(f"{name}.Arn" for name in alarms)


def test_the_dashboard_shows_the_clusters_nodes_against_its_limits() -> None:
    limited = synth(clusterLimits={"maxNodes": 100, "maxVcpus": 400})
    (title,) = [t for t in dashboard_widgets(limited) if t.startswith("Cluster:")]
    assert title == (
        "Cluster: nodes of all managed groups against its limits (at most 100 nodes, "
        "at most 400 vCPUs)"
    )
    cluster = json.loads(dashboard_widgets(limited)[title])
    assert cluster["annotations"]["horizontal"] == [
        {"value": 100, "label": "maxNodes", "yAxis": "left"}
    ]
    expressions = [e[0]["expression"] for e in cluster["metrics"]]
    assert [e.split('MetricName="')[1].split('"')[0] for e in expressions] == [
        "DesiredNodes",
        "CurrentNodes",
    ]
    assert all(e.startswith("SUM(SEARCH(") and "'Maximum', 60))" in e for e in expressions)


def test_the_dashboard_shows_the_events_refused_as_unconfirmed(template: Template) -> None:
    # a forged drain or launch-failure event is refused and counted: an operator sees it
    (problems,) = [
        w for title, w in dashboard_widgets(template).items() if title.startswith("Problems")
    ]
    assert '"UnconfirmedEvents"' in problems


def test_the_dashboard_shows_launch_failures_by_group_and_every_functions_health(
    template: Template,
) -> None:
    widgets = dashboard_widgets(template)
    launches = widgets["Launch failures, by node group (each backs its group off)"]
    assert '{Nodescaler,NodeGroup,service} MetricName=\\"LaunchFailures\\"' in launches
    health = widgets["Invocations, errors, throttles"]
    for name in ("dispatch", "evaluate", "drain"):
        assert all(f"{name} {what}" in health for what in ("invocations", "errors", "throttles"))
    queues = widgets["Queues: waiting evaluations and dead letters"]
    assert all(f"{name} dead letters" in queues for name in ("dispatch", "evaluation", "drain"))


def test_the_dashboard_has_a_drain_row(template: Template) -> None:
    widgets = dashboard_widgets(template)
    outcomes = widgets["Drains: done, timed out, failed, lifecycle actions expired"]
    for metric in ("NodesDrained", "DrainTimeouts", "DrainFailures", "LifecycleActionsExpired"):
        assert f'"{metric}", "service", "nodescaler-my-cluster"' in outcomes
    assert (
        '"PodsEvicted", "service", "nodescaler-my-cluster"'
        in widgets["Pods evicted, and how long drains take"]
    )
    assert "Drains: the latest, and what was left on the node" in widgets


def alarm_on(template: Template, metric: str) -> dict[str, Any]:
    (found,) = (
        a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == metric
    )
    return found


def test_the_alarms_cover_errors_throttles_dead_letters_latency_shortfall_and_drains(
    template: Template,
) -> None:
    alarms = resources(template, "AWS::CloudWatch::Alarm").values()
    # errors and throttles of four functions, three dead-letter queues, ticks stopped, groups
    # unserved, evaluation errors, latency, shortfall, backoff, drain failures, drain
    # timeouts, lifecycle actions expired, stored policies unread, scaling events not put
    assert len(alarms) == 26
    unread = alarm_on(template, "StoredPolicyReadFailures")
    assert (unread["EvaluationPeriods"], unread["Period"]) == (3, 300)  # persistent, not a blip
    assert alarm_on(template, "ScalingEventsNotPut")["Threshold"] == 1
    shortfall = alarm_on(template, "ShortfallNodes")
    assert (shortfall["EvaluationPeriods"], shortfall["DatapointsToAlarm"]) == (15, 15)
    # every alarm says what happened and what to do about it
    assert all(len(a["Properties"]["AlarmDescription"]) > 40 for a in alarms)
    assert all("AlarmActions" not in a["Properties"] for a in alarms)  # no topic configured


@pytest.mark.parametrize(
    "metric",
    ["MetricSourcesRefused", "UnconfirmedEvents", "TerminationErrors", "TerminationsForced"],
)
def test_a_refused_source_or_event_and_a_forced_or_failed_termination_alarm_at_once(
    template: Template, metric: str
) -> None:
    alarm = alarm_on(template, metric)
    assert (alarm["Statistic"], alarm["Threshold"], alarm["EvaluationPeriods"]) == ("Sum", 1, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "nodescaler-my-cluster"}]


def test_a_group_backed_off_for_most_of_half_an_hour_alarms(template: Template) -> None:
    backoff = alarm_on(template, "BackedOff")
    assert backoff["Dimensions"] == [
        {"Name": "service", "Value": "nodescaler-my-cluster"}
    ]  # any group
    assert (backoff["Statistic"], backoff["Period"], backoff["Threshold"]) == ("Maximum", 60, 1)
    assert (backoff["EvaluationPeriods"], backoff["DatapointsToAlarm"]) == (30, 24)


def test_ticks_that_stop_arriving_alarm_after_three_periods_without_a_dispatch(
    template: Template,
) -> None:
    """Given the schedule stops (disabled, deleted, its role refused), no dispatch runs and
    Lambda sends no Invocations datapoint: missing data must breach, or it never alarms."""
    ticks = alarm_on(template, "Invocations")
    assert (ticks["Namespace"], ticks["Statistic"], ticks["Period"]) == ("AWS/Lambda", "Sum", 60)
    assert ticks["Dimensions"] == [
        {"Name": "FunctionName", "Value": {"Ref": ticks["Dimensions"][0]["Value"]["Ref"]}}
    ]
    assert ticks["Dimensions"][0]["Value"]["Ref"].startswith("NodescalerDispatchFunction")
    assert (ticks["ComparisonOperator"], ticks["Threshold"]) == ("LessThanThreshold", 1)
    assert (ticks["EvaluationPeriods"], ticks["DatapointsToAlarm"]) == (3, 3)
    assert ticks["TreatMissingData"] == "breaching"


def test_a_group_rejected_or_blind_for_15_minutes_alarms(template: Template) -> None:
    unserved = alarm_on(template, "NodeGroupUnserved")
    assert unserved["Dimensions"] == [{"Name": "service", "Value": "nodescaler-my-cluster"}]
    assert (unserved["Statistic"], unserved["Period"], unserved["Threshold"]) == ("Maximum", 60, 1)
    assert unserved["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert (unserved["EvaluationPeriods"], unserved["DatapointsToAlarm"]) == (15, 15)
    assert unserved["TreatMissingData"] == "notBreaching"  # no evaluation: the ticks alarm's


@pytest.mark.parametrize("metric", ["DrainFailures", "DrainTimeouts", "LifecycleActionsExpired"])
def test_a_failed_or_late_drain_alarms_at_once(template: Template, metric: str) -> None:
    alarm = alarm_on(template, metric)
    assert (alarm["Statistic"], alarm["Threshold"], alarm["EvaluationPeriods"]) == ("Sum", 1, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_per_evaluation_alarms_look_at_one_tick_at_a_time() -> None:
    # Groups report once a tick: with 5-minute ticks, 1-minute periods would mostly be empty.
    template = synth(tickMinutes=5)
    shortfall = alarm_on(template, "ShortfallNodes")
    assert (shortfall["Period"], shortfall["EvaluationPeriods"]) == (300, 3)
    backoff = alarm_on(template, "BackedOff")
    assert (backoff["Period"], backoff["EvaluationPeriods"], backoff["DatapointsToAlarm"]) == (
        300,
        6,
        5,
    )
    assert (
        alarm_on(template, "Invocations")["Period"],
        alarm_on(template, "Invocations")["EvaluationPeriods"],
    ) == (300, 3)
    unserved = alarm_on(template, "NodeGroupUnserved")
    assert (unserved["Period"], unserved["EvaluationPeriods"]) == (300, 3)


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
            "vpc": {"subnetIds": ["subnet-0a1b2c3d"], "securityGroupIds": ["sg-0b1c2d3e"]},
            "drainGroups": ["web", "gpu-ng"],
            "clusterLimits": {"maxNodes": 100},
        },
    ],
    ids=["sample", "everything-set"],
)
def test_cdk_nag_finds_nothing_unsuppressed(overrides: dict[str, Any]) -> None:
    assert nag_findings(**overrides) == []


def test_cdk_nag_finds_nothing_unsuppressed_without_a_cluster(
    no_cluster: dict[str, Any],
) -> None:
    assert nag_findings(**no_cluster, clusterLimits={"maxMemoryGib": 4096}) == []


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


def test_every_function_is_traced(template: Template) -> None:
    for folder in ("dispatch", "evaluate", "drain"):
        assert function(template, folder)["TracingConfig"] == {"Mode": "Active"}


def test_alarms_with_no_destination_warn_once_and_with_one_do_not() -> None:
    def warnings(**overrides: Any) -> list[str]:
        found = Annotations.from_stack(synth_stack(**overrides)).find_warning(
            "*", Match.string_like_regexp(".*alarms have no destination.*")
        )
        return [f.id for f in found]

    assert warnings() == ["/Test/Nodescaler/Alarms"]
    assert warnings(alarms={"email": "ops@example.com"}) == []
    assert warnings(alarms={"topicArn": "arn:aws:sns:us-east-1:123456789012:pager"}) == []


def test_an_evaluation_outlives_its_retries_and_its_dead_letter_outlives_it(
    template: Template,
) -> None:
    queues = resources(template, "AWS::SQS::Queue")
    (evaluations,) = (
        q["Properties"]
        for q in queues.values()
        if "RedrivePolicy" in q["Properties"] and q["Properties"].get("FifoQueue")
    )
    receives = evaluations["RedrivePolicy"]["maxReceiveCount"]
    retention = evaluations["MessageRetentionPeriod"]
    assert retention >= receives * evaluations["VisibilityTimeout"]
    for queue in queues.values():  # every dead-letter queue keeps longer than its sources
        assert queue["Properties"]["MessageRetentionPeriod"] >= retention


# --- trust: what a compromised or mistaken tag cannot reach ---------------------------


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
    sent_to = [render(s["Resource"]) for s in statements_for(statements, "sqs:SendMessage")]
    assert [re.sub(r"[0-9A-F]{8}\.Arn>$", "", r) for r in sent_to] == [
        "<NodescalerEvaluationDeadLetters"
    ]
    consume = statement_for(statements, "sqs:ChangeMessageVisibility")
    assert render(consume["Resource"]).startswith("<NodescalerEvaluations")


def test_the_drain_knows_the_groups_the_stack_hooked_by_name() -> None:
    variables = environment(synth(drainGroups=["web", "batch"]), "drain")
    assert json.loads(variables["DRAIN_GROUPS"]) == ["web", "batch"]

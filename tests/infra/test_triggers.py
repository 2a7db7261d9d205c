"""What starts each function and what keeps what fails, read from the synthesized template:
the evaluation queue, the tick's schedule, the EventBridge rules, the lifecycle hooks and
the dead-letter queues (infra/dispatch.py, infra/evaluate.py, infra/drain.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from nodescaler.config import (
    DrainSettings,
)
from nodescaler.events.dispatch import ScheduledEvent, parse_dispatch_event

from tests.infra.stack_template import matches, render, resources, rule, sample
from tests.infra.test_stack import synth


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

"""Every AWS service that publishes into a topic or queue of the stack can: the topic or
queue is unencrypted, uses SQS-managed SSE, or is encrypted with a customer-managed key
whose key policy lets that service use it.

An AWS-managed key (alias/aws/sns, alias/aws/sqs) has a key policy no one can change, which
lets no service publisher in: CloudWatch's alarm actions into such a topic all fail
("CloudWatch Alarms does not have authorization to access the SNS topic encryption key").
https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services
https://repost.aws/knowledge-center/cloudwatch-configure-alarm-sns
"""

from __future__ import annotations

from collections import defaultdict
from fnmatch import fnmatchcase
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from tests.infra.stack_template import render
from tests.infra.test_scaling_events_rule import readme_rule
from tests.infra.test_stack import synth

TOPIC, QUEUE, KEY = "AWS::SNS::Topic", "AWS::SQS::Queue", "AWS::KMS::Key"
# What a service needs of the key to put a message into an encrypted topic or queue.
PUBLISHER_NEEDS = ("kms:Decrypt", "kms:GenerateDataKey")
ALARM_ACTIONS = ("AlarmActions", "OKActions", "InsufficientDataActions")
CLOUDWATCH, EVENTBRIDGE = "cloudwatch.amazonaws.com", "events.amazonaws.com"


def logical_id(value: Any) -> str | None:
    """The resource a `Ref` or `Fn::GetAtt` names; None for anything else (an ARN given)."""
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    return None


def listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def services_of(statement: dict[str, Any]) -> set[str]:
    principal = statement.get("Principal")
    if statement["Effect"] != "Allow" or not isinstance(principal, dict):
        return set()
    return set(listed(principal.get("Service", [])))


def publishers(resources: dict[str, Any]) -> dict[str, set[str]]:
    """Each topic and queue of the stack → the AWS services that put messages into it: those
    its policy allows, the alarms whose actions name it, the rules that target it or
    dead-letter into it."""
    found: dict[str, set[str]] = defaultdict(set)
    for resource in resources.values():
        props = resource.get("Properties", {})
        match resource["Type"]:
            case "AWS::SNS::TopicPolicy" | "AWS::SQS::QueuePolicy":
                statements = props["PolicyDocument"]["Statement"]
                services = {s for statement in statements for s in services_of(statement)}
                for target in props.get("Topics", []) + props.get("Queues", []):
                    found[str(logical_id(target))] |= services
            case "AWS::CloudWatch::Alarm":
                for action in (a for key in ALARM_ACTIONS for a in props.get(key, [])):
                    found[str(logical_id(action))].add(CLOUDWATCH)
            case "AWS::Events::Rule":
                for target in props.get("Targets", []):
                    for arn in (target["Arn"], target.get("DeadLetterConfig", {}).get("Arn")):
                        found[str(logical_id(arn))].add(EVENTBRIDGE)
    return {
        name: services
        for name, services in found.items()
        if services and resources.get(name, {}).get("Type") in (TOPIC, QUEUE)
    }


def grants(key: dict[str, Any], service: str) -> bool:
    """The key's policy lets `service` do all a publisher needs."""
    return any(
        service in services_of(statement)
        and all(
            any(fnmatchcase(need, allowed) for allowed in listed(statement["Action"]))
            for need in PUBLISHER_NEEDS
        )
        for statement in key["Properties"]["KeyPolicy"]["Statement"]
    )


def unusable(resources: dict[str, Any]) -> list[str]:
    """Each publisher that can't put a message where it publishes, and why."""
    problems = []
    for name, services in sorted(publishers(resources).items()):
        props = resources[name].get("Properties", {})
        key = props.get("KmsMasterKeyId")
        if key is None or props.get("SqsManagedSseEnabled"):
            continue  # unencrypted, or SQS-managed SSE, which EventBridge and SNS can use
        key_name = logical_id(key)
        if key_name is None or resources[key_name]["Type"] != KEY:
            problems.append(
                f"{name}: encrypted with {render(key)}, whose key policy the stack can't "
                f"make let {', '.join(sorted(services))} in"
            )
            continue
        problems.extend(
            f"{name}: key {key_name}'s policy does not let {service} use it"
            for service in sorted(services)
            if not grants(resources[key_name], service)
        )
    return problems


def operator_stack_from_the_readme() -> Template:
    stack = cdk.Stack(cdk.App(), "Operator")
    exec(readme_rule(), {"stack": stack})  # as a user's app would run it
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def with_email() -> dict[str, Any]:
    """The stack with everything that publishes: alarms to an email topic, a cluster (the
    drain's rules), an alarm rule."""
    template: dict[str, Any] = synth(alarms={"email": "ops@example.com"}).to_json()
    return template["Resources"]  # type: ignore[no-any-return]


def test_given_alarms_emailed_every_service_publisher_can_use_the_key_of_what_it_publishes_to(
    with_email: dict[str, Any],
) -> None:
    found = publishers(with_email)
    # the walk sees them all: CloudWatch into the alarm topic, EventBridge into the queues
    # its rules dead-letter into
    assert {name: sorted(s) for name, s in found.items() if name.startswith("NodescalerAlarms")}
    assert sorted({s for services in found.values() for s in services}) == [
        CLOUDWATCH,
        EVENTBRIDGE,
    ]
    assert [n for n, s in found.items() if EVENTBRIDGE in s and n.startswith("NodescalerDrain")]
    assert unusable(with_email) == []


def test_the_readme_rule_publishes_to_a_topic_eventbridge_can_use() -> None:
    resources = operator_stack_from_the_readme().to_json()["Resources"]
    assert list(publishers(resources).values()) == [{EVENTBRIDGE}]
    assert unusable(resources) == []


def test_a_queue_with_a_key_that_does_not_let_eventbridge_in_is_found() -> None:
    # Given a rule dead-lettering into a queue whose customer-managed key lets only the
    # account's IAM principals in, and an alarm notifying a topic with the AWS-managed key,
    root = {"AWS": "arn:aws:iam::123456789012:root"}
    resources = {
        "Key": {
            "Type": KEY,
            "Properties": {
                "KeyPolicy": {
                    "Statement": [
                        {"Effect": "Allow", "Principal": root, "Action": "kms:*", "Resource": "*"}
                    ]
                }
            },
        },
        "Queue": {"Type": QUEUE, "Properties": {"KmsMasterKeyId": {"Fn::GetAtt": ["Key", "Arn"]}}},
        "Topic": {"Type": TOPIC, "Properties": {"KmsMasterKeyId": "alias/aws/sns"}},
        "Rule": {
            "Type": "AWS::Events::Rule",
            "Properties": {
                "Targets": [
                    {
                        "Arn": "arn:aws:lambda:::function:f",
                        "DeadLetterConfig": {"Arn": {"Ref": "Queue"}},
                    }
                ]
            },
        },
        "Alarm": {
            "Type": "AWS::CloudWatch::Alarm",
            "Properties": {"OKActions": [{"Ref": "Topic"}]},
        },
    }
    # when the template is walked, then both are named, with the service each shuts out.
    assert unusable(resources) == [
        "Queue: key Key's policy does not let events.amazonaws.com use it",
        "Topic: encrypted with alias/aws/sns, whose key policy the stack can't make let "
        "cloudwatch.amazonaws.com in",
    ]


def alarm_condition(resources: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The CloudWatch statements of the alarm topic's key policy and of its topic policy."""
    ((name, topic),) = ((n, r) for n, r in resources.items() if r["Type"] == TOPIC)
    key = resources[str(logical_id(topic["Properties"]["KmsMasterKeyId"]))]["Properties"]
    (cloudwatch,) = (s for s in key["KeyPolicy"]["Statement"] if CLOUDWATCH in services_of(s))
    (policy,) = (
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::SNS::TopicPolicy" and r["Properties"]["Topics"] == [{"Ref": name}]
    )
    (publish,) = (s for s in policy["PolicyDocument"]["Statement"] if CLOUDWATCH in services_of(s))
    return cloudwatch, publish


def admitted(statement: dict[str, Any]) -> list[str]:
    """The alarm ARNs (or ARN patterns) the statement's SourceArn condition lets in."""
    ((operator, values),) = (
        (op, v) for op, v in statement["Condition"].items() if op.startswith("Arn")
    )
    assert operator in ("ArnEquals", "ArnLike")
    return [render(v) for v in listed(values["aws:SourceArn"])]


def alarm_arns(resources: dict[str, Any]) -> list[str]:
    return sorted(
        "arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:"
        + r["Properties"]["AlarmName"]
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
    )


def test_the_alarm_topics_key_lets_cloudwatch_in_for_this_accounts_alarms_only(
    with_email: dict[str, Any],
) -> None:
    ((_, topic),) = ((n, r) for n, r in with_email.items() if r["Type"] == TOPIC)
    key = with_email[str(logical_id(topic["Properties"]["KmsMasterKeyId"]))]["Properties"]
    assert key["EnableKeyRotation"] is True
    cloudwatch, publish = alarm_condition(with_email)
    assert cloudwatch["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert cloudwatch["Condition"]["StringEquals"] == {
        "aws:SourceAccount": {"Ref": "AWS::AccountId"}
    }
    # Each of the deployment's alarms by its exact ARN (the fast path's too), no pattern
    assert sorted(admitted(cloudwatch)) == alarm_arns(with_email)
    assert any(arn.endswith("-fast-path-errors") for arn in admitted(cloudwatch))
    assert not any("*" in arn or "?" in arn for arn in admitted(cloudwatch))
    # and the topic's policy lets CloudWatch publish, for the same alarms
    assert publish["Action"] == "sns:Publish"
    assert publish["Condition"] == cloudwatch["Condition"]


def test_given_deployments_prod_and_prod_eu_then_prods_topic_admits_none_of_prod_eus_alarms() -> (
    None
):
    # Given deployment prod (alarms nodescaler-prod-*) and deployment prod-eu, whose alarms
    # (nodescaler-prod-eu-*) start with prod's deployment name
    prod = synth(name="prod", alarms={"email": "ops@example.com"}).to_json()["Resources"]
    prod_eu = synth(name="prod-eu", alarms={"email": "ops@example.com"}).to_json()["Resources"]
    # When CloudWatch, acting for one of prod-eu's alarms, asks prod's key and topic
    for statement in alarm_condition(prod):
        # Then no ARN or pattern of prod's condition matches it (IAM's ArnLike wildcards
        # are fnmatch's * and ?), while each of prod's own alarms is let in
        for alarm in alarm_arns(prod_eu):
            assert not any(fnmatchcase(alarm, allowed) for allowed in admitted(statement))
        for alarm in alarm_arns(prod):
            assert any(fnmatchcase(alarm, allowed) for allowed in admitted(statement))

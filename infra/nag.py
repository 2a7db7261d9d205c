"""cdk-nag's findings that are intended, each with the reason it is: applied to the
resources they concern, so any other finding still fails synth."""

from __future__ import annotations

from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import IConstruct

from infra import permissions
from infra.dispatch import DispatchFunction
from infra.drain import DrainFunction
from infra.evaluate import EvaluateFunction

NO_RESOURCE_LEVEL = NagPackSuppression(
    id="AwsSolutions-IAM5",
    reason="The Describe calls (Auto Scaling groups, instances, scaling activities and "
    "launch configurations, EC2 instance types and launch template versions), "
    "cloudwatch:GetMetricData, X-Ray's PutTraceSegments and PutTelemetryRecords and the "
    "network-interface actions of a function in a VPC support no resource-level "
    "permissions; the Deny on ASG tag changes covers every group on purpose.",
    applies_to=["Resource::*"],
)


def explain_dispatch(dispatch: DispatchFunction) -> None:
    NagSuppressions.add_resource_suppressions(
        dispatch.dead_letters,
        [
            NagPackSuppression(
                id="AwsSolutions-SQS3",
                reason="It is a dead-letter queue: the failure destination of the dispatch "
                "function, its schedule and its alarm rule.",
            )
        ],
        apply_to_children=True,
    )
    NagSuppressions.add_resource_suppressions(
        dispatch.lambda_.role, [NO_RESOURCE_LEVEL], apply_to_children=True
    )
    NagSuppressions.add_resource_suppressions(
        dispatch.tick_role,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="CDK's grantInvoke allows the dispatch function and its versions "
                "(ARN:*); the schedule invokes only the unqualified function.",
                applies_to=[RegexAppliesTo(regex=r"/^Resource::<.*Dispatch.*\.Arn>:\*$/g")],
            )
        ],
        apply_to_children=True,
    )


def explain_evaluate(evaluate: EvaluateFunction) -> None:
    NagSuppressions.add_resource_suppressions(
        evaluate.lambda_.role,
        [
            NO_RESOURCE_LEVEL,
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Node groups are opted in by tag, at run time: SetDesiredCapacity is "
                "allowed on any ASG only under an IAM condition on its opt-in (and cluster) "
                "tags.",
                applies_to=[permissions.ALL_GROUPS_FINDING],
            ),
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="EKS node groups are found at run time: DescribeNodegroup and "
                "UpdateNodegroupConfig are scoped to the configured cluster's node groups (the "
                "account's, when no cluster is configured), and UpdateNodegroupConfig further "
                "to a node group itself tagged as opted in (and for this cluster); the function "
                "resizes one only after DescribeNodegroup shows the opted-in ASG is its own.",
                applies_to=[RegexAppliesTo(regex=r"/^Resource::arn:.*:eks:.*:nodegroup\/.*$/g")],
            ),
        ],
        apply_to_children=True,
    )


def explain_drain(drain: DrainFunction) -> None:
    NagSuppressions.add_resource_suppressions(
        drain.dead_letters,
        [
            NagPackSuppression(
                id="AwsSolutions-SQS3",
                reason="It is a dead-letter queue: the failure destination of the drain "
                "function and of its lifecycle-action and Spot-warning rules.",
            )
        ],
        apply_to_children=True,
    )
    NagSuppressions.add_resource_suppressions(
        drain.lambda_.role,
        [
            NO_RESOURCE_LEVEL,
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Terminating instances of any opted-in group are drained: the "
                "lifecycle actions are allowed on any ASG only under an IAM condition on "
                "its opt-in (and cluster) tags.",
                applies_to=[permissions.ALL_GROUPS_FINDING],
            ),
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="The groups of drainGroups are named in cdk.json, their ids only "
                "known once they exist: the lifecycle actions are allowed on those names.",
                applies_to=[
                    RegexAppliesTo(
                        regex=r"/^Resource::arn:.*:autoscaling:.*:autoScalingGroup:\*:"
                        r"autoScalingGroupName\/[\w.\-]+$/g"
                    )
                ],
            ),
        ],
        apply_to_children=True,
    )


def explain_serverless(
    dispatch: DispatchFunction,
    evaluate: EvaluateFunction,
    drain: DrainFunction | None,
    evaluation_dead_letters: IConstruct,
    alarm_topic: IConstruct | None,
) -> None:
    """ServerlessChecks' findings that are intended: nodescaler's failures are dead-lettered
    where they can be read whole, not in the places the pack looks."""
    on_failure = (
        "Its asynchronous invocations' failures go to an on-failure destination (a queue of "
        "its own), which keeps the event, the error and the attempts; a Lambda DLQ would keep "
        "the event alone."
    )
    dead_end = (
        "It is a dead-letter queue: the end of the line, kept 14 days, on the dashboard and "
        "alarmed when it is not empty."
    )
    reasons: list[tuple[IConstruct, str, str]] = [
        (dispatch.lambda_.function, "Serverless-LambdaDLQ", on_failure),
        (
            evaluate.lambda_.function,
            "Serverless-LambdaDLQ",
            "It is invoked by the evaluation queue, whose redrive policy dead-letters an "
            "evaluation after maxReceiveCount receives; a Lambda DLQ serves only asynchronous "
            "invocations.",
        ),
        (
            evaluate.lambda_.function,
            "Serverless-LambdaEventSourceMappingDestination",
            "An event source mapping's on-failure destination is for streams and Kafka; for "
            "an SQS source the queue's redrive policy is the destination, and a failed "
            "record returns to the queue within seconds (partial batch failures).",
        ),
        *(
            (queue, "Serverless-SQSRedrivePolicy", dead_end)
            for queue in (evaluation_dead_letters, dispatch.dead_letters)
        ),
    ]
    if drain is not None:
        reasons += [
            (drain.lambda_.function, "Serverless-LambdaDLQ", on_failure),
            (drain.dead_letters, "Serverless-SQSRedrivePolicy", dead_end),
        ]
    if alarm_topic is not None:
        reasons.append(
            (
                alarm_topic,
                "Serverless-SNSRedrivePolicy",
                "The alarm topic's subscribers are people: SNS retries a failed delivery, and "
                "every alarm's state stays in CloudWatch and on the dashboard; a queue of "
                "undelivered alarm emails would alert no one.",
            )
        )
    for resource, rule, reason in reasons:
        NagSuppressions.add_resource_suppressions(
            resource, [NagPackSuppression(id=rule, reason=reason)], apply_to_children=True
        )

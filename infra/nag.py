"""cdk-nag's findings that are intended, each with the reason it is: applied to the
resources they concern, so any other finding still fails synth."""

from __future__ import annotations

from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import IConstruct

from . import permissions
from .dispatch import DispatchFunction
from .drain import DrainFunction
from .evaluate import EvaluateFunction
from .terminate import TerminateFunction

NO_RESOURCE_LEVEL = NagPackSuppression(
    id="AwsSolutions-IAM5",
    reason="The Describe calls (Auto Scaling groups, instances, scaling activities and "
    "launch configurations, EC2 instance types and launch template versions), "
    "cloudwatch:GetMetricData, X-Ray's PutTraceSegments and PutTelemetryRecords and the "
    "network-interface actions of a function in a VPC support no resource-level "
    "permissions; the Deny on ASG tag changes covers every group on purpose.",
    applies_to=["Resource::*"],
)
# ServerlessChecks looks for a Lambda DLQ; nodescaler's failures go where they are read whole.
ON_FAILURE_DESTINATION = (
    "Its asynchronous invocations' failures go to an on-failure destination (a queue of its "
    "own), which keeps the event, the error and the attempts; a Lambda DLQ would keep the "
    "event alone."
)


def explain(resource: IConstruct, *suppressions: NagPackSuppression) -> None:
    NagSuppressions.add_resource_suppressions(resource, list(suppressions), apply_to_children=True)


def explain_dead_letter_queue(queue: IConstruct, failing_into_it: str | None = None) -> None:
    """A dead-letter queue is the end of the line: no redrive of its own. `failing_into_it`
    names what sends it failures, when it is a destination rather than a queue's redrive
    target (which cdk-nag recognises as a dead-letter queue by itself)."""
    explain(
        queue,
        NagPackSuppression(
            id="Serverless-SQSRedrivePolicy",
            reason="It is a dead-letter queue: the end of the line, kept 14 days, on the "
            "dashboard and alarmed when it is not empty.",
        ),
    )
    if failing_into_it is not None:
        explain(
            queue,
            NagPackSuppression(
                id="AwsSolutions-SQS3",
                reason=f"It is a dead-letter queue: the failure destination of {failing_into_it}.",
            ),
        )


def explain_dispatch(dispatch: DispatchFunction) -> None:
    explain_dead_letter_queue(
        dispatch.dead_letters, "the dispatch function, its schedule and its alarm rule"
    )
    explain(dispatch.lambda_.role, NO_RESOURCE_LEVEL)
    explain(
        dispatch.lambda_.function,
        NagPackSuppression(id="Serverless-LambdaDLQ", reason=ON_FAILURE_DESTINATION),
    )
    explain(
        dispatch.tick_role,
        NagPackSuppression(
            id="AwsSolutions-IAM5",
            reason="CDK's grantInvoke allows the dispatch function and its versions "
            "(ARN:*); the schedule invokes only the unqualified function.",
            applies_to=[RegexAppliesTo(regex=r"/^Resource::<.*Dispatch.*\.Arn>:\*$/g")],
        ),
    )


def explain_evaluate(evaluate: EvaluateFunction, dead_letters: IConstruct) -> None:
    explain_dead_letter_queue(dead_letters)
    explain(
        evaluate.lambda_.role,
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
            reason="The groups of allowedGroups are named (or prefixed) in cdk.json, their "
            "ids only known once they exist: the writes are allowed on those names, under "
            "the same tag conditions.",
            applies_to=[
                RegexAppliesTo(
                    regex=r"/^Resource::arn:.*:autoscaling:.*:autoScalingGroup:\*:"
                    r"autoScalingGroupName\/[\w.\-]+\*?$/g"
                )
            ],
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
    )
    explain(
        evaluate.lambda_.function,
        NagPackSuppression(
            id="Serverless-LambdaDLQ",
            reason="It is invoked by the evaluation queue, whose redrive policy dead-letters "
            "an evaluation after maxReceiveCount receives; a Lambda DLQ serves only "
            "asynchronous invocations.",
        ),
        NagPackSuppression(
            id="Serverless-LambdaEventSourceMappingDestination",
            reason="An event source mapping's on-failure destination is for streams and "
            "Kafka; for an SQS source the queue's redrive policy is the destination, and a "
            "failed record returns to the queue within seconds (partial batch failures).",
        ),
    )


def explain_drain(drain: DrainFunction) -> None:
    explain_dead_letter_queue(
        drain.dead_letters,
        "the drain function and of its lifecycle-action and Spot-warning rules",
    )
    explain(
        drain.lambda_.role,
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
    )
    explain(
        drain.lambda_.function,
        NagPackSuppression(id="Serverless-LambdaDLQ", reason=ON_FAILURE_DESTINATION),
    )


def explain_alarm_topic(topic: IConstruct) -> None:
    explain(
        topic,
        NagPackSuppression(
            id="Serverless-SNSRedrivePolicy",
            reason="The alarm topic's subscribers are people: SNS retries a failed delivery, "
            "and every alarm's state stays in CloudWatch and on the dashboard; a queue of "
            "undelivered alarm emails would alert no one.",
        ),
    )


def explain_terminate(terminate: TerminateFunction) -> None:
    explain(terminate.lambda_.role, NO_RESOURCE_LEVEL)
    explain(
        terminate.lambda_.function,
        NagPackSuppression(
            id="Serverless-LambdaDLQ",
            reason="Auto Scaling invokes it synchronously and waits for the answer: a failed "
            "invocation is asked again by the group, there is no event to keep.",
        ),
    )

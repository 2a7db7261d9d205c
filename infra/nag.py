"""cdk-nag's findings that are intended, each with the reason it is: applied to the
resources they concern, so any other finding still fails synth."""

from __future__ import annotations

from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo

from infra import permissions
from infra.dispatch import DispatchFunction
from infra.drain import DrainFunction
from infra.evaluate import EvaluateFunction

NO_RESOURCE_LEVEL = NagPackSuppression(
    id="AwsSolutions-IAM5",
    reason="The Describe calls (Auto Scaling groups, instances, scaling activities and "
    "launch configurations, EC2 instance types and launch template versions), "
    "cloudwatch:GetMetricData and the network-interface actions of a function in a VPC "
    "support no resource-level permissions; the Deny on ASG tag changes covers every "
    "group on purpose.",
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
                reason="EKS node groups are found at run time: UpdateNodegroupConfig and "
                "DescribeNodegroup are scoped to the configured cluster's node groups (to "
                "the account's, when no cluster is configured).",
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

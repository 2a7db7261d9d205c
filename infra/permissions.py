"""The IAM statements nodescaler's functions need, and no more.

Writes to node groups are allowed only on Auto Scaling Groups that carry the opt-in tag
(and the cluster tag when a cluster is configured), checked by IAM on the resource's
tags; changing an ASG's tags is denied outright, so no function can opt a group in.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlparse

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from nodescaler.config import CustomExpanderSpec, ExpanderSpec
from nodescaler.domain.optin import TagNames
from nodescaler.domain.policy import NodeGroupPolicy, SqsQueueMetric

ALL_GROUPS = (
    f"arn:{Aws.PARTITION}:autoscaling:{Aws.REGION}:{Aws.ACCOUNT_ID}:autoScalingGroup:*:"
    "autoScalingGroupName/*"
)
# How cdk-nag names ALL_GROUPS in its findings.
ALL_GROUPS_FINDING = (
    "Resource::arn:<AWS::Partition>:autoscaling:<AWS::Region>:<AWS::AccountId>:"
    "autoScalingGroup:*:autoScalingGroupName/*"
)


def describe_node_groups() -> iam.PolicyStatement:
    # Describe* calls support no resource-level permissions.
    return iam.PolicyStatement(actions=["autoscaling:DescribeAutoScalingGroups"], resources=["*"])


def write_opted_in_groups(
    actions: Iterable[str], tags: TagNames, cluster_name: str
) -> iam.PolicyStatement:
    conditions: dict[str, dict[str, str]] = {
        "StringEqualsIgnoreCase": {f"aws:ResourceTag/{tags.enabled}": "true"}
    }
    if cluster_name:
        conditions["StringEquals"] = {f"aws:ResourceTag/{tags.cluster}": cluster_name}
    return iam.PolicyStatement(
        actions=[f"autoscaling:{a}" for a in actions], resources=[ALL_GROUPS], conditions=conditions
    )


def deny_tag_changes() -> iam.PolicyStatement:
    return iam.PolicyStatement(
        effect=iam.Effect.DENY,
        actions=["autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags"],
        resources=["*"],
    )


def resize_eks_node_groups(cluster_name: str) -> iam.PolicyStatement:
    cluster = cluster_name or "*"  # no cluster configured: any cluster's node groups
    return iam.PolicyStatement(
        actions=["eks:UpdateNodegroupConfig"],
        resources=[
            f"arn:{Aws.PARTITION}:eks:{Aws.REGION}:{Aws.ACCOUNT_ID}:nodegroup/{cluster}/*/*"
        ],
    )


def queue_arn(queue: str) -> str:
    """The ARN of a queue as a policy names it: a name, a URL or an ARN."""
    if queue.startswith("arn:"):
        return queue
    if queue.startswith("https://"):  # https://sqs.<region>.amazonaws.com/<account>/<name>
        url = urlparse(queue)
        region = url.hostname.split(".")[1] if url.hostname else Aws.REGION
        account, name = url.path.strip("/").split("/")
        return f"arn:{Aws.PARTITION}:sqs:{region}:{account}:{name}"
    return f"arn:{Aws.PARTITION}:sqs:{Aws.REGION}:{Aws.ACCOUNT_ID}:{queue}"


def read_policy_queues(policies: Iterable[NodeGroupPolicy]) -> iam.PolicyStatement | None:
    queues = sorted(
        {
            queue_arn(metric.sqs_queue.queue)
            for policy in policies
            for metric in policy.spec.metrics
            if isinstance(metric, SqsQueueMetric)
        }
    )
    if not queues:
        return None
    return iam.PolicyStatement(
        actions=["sqs:GetQueueAttributes", "sqs:GetQueueUrl"], resources=queues
    )


def read_cloudwatch_metrics() -> iam.PolicyStatement:
    # GetMetricData supports no resource-level permissions.
    return iam.PolicyStatement(actions=["cloudwatch:GetMetricData"], resources=["*"])


def read_write_state(table_arn: str) -> iam.PolicyStatement:
    # TransactWriteItems is authorized as PutItem on each item it writes.
    return iam.PolicyStatement(
        actions=["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query"],
        resources=[table_arn],
    )


def read_eks_cluster(cluster_name: str) -> list[iam.PolicyStatement]:
    eks = f"arn:{Aws.PARTITION}:eks:{Aws.REGION}:{Aws.ACCOUNT_ID}"
    return [
        iam.PolicyStatement(
            actions=["eks:DescribeCluster"], resources=[f"{eks}:cluster/{cluster_name}"]
        ),
        iam.PolicyStatement(
            actions=["eks:DescribeNodegroup"], resources=[f"{eks}:nodegroup/{cluster_name}/*/*"]
        ),
    ]


def read_instance_shapes() -> iam.PolicyStatement:
    # What a group at zero would launch; these Describe calls have no resource-level scope.
    return iam.PolicyStatement(
        actions=[
            "ec2:DescribeInstanceTypes",
            "ec2:DescribeLaunchTemplateVersions",
            "autoscaling:DescribeLaunchConfigurations",
        ],
        resources=["*"],
    )


def invoke_custom_expanders(expanders: Iterable[ExpanderSpec]) -> list[iam.PolicyStatement]:
    functions = sorted(
        e.function_name
        if e.function_name.startswith("arn:")
        else f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{Aws.ACCOUNT_ID}:function:{e.function_name}"
        for e in expanders
        if isinstance(e, CustomExpanderSpec)
    )
    if not functions:
        return []
    return [iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=functions)]


def manage_network_interfaces() -> iam.PolicyStatement:
    # What Lambda needs to attach a function to a VPC; these actions take no resource scope.
    return iam.PolicyStatement(
        actions=[
            "ec2:CreateNetworkInterface",
            "ec2:DescribeNetworkInterfaces",
            "ec2:DeleteNetworkInterface",
            "ec2:AssignPrivateIpAddresses",
            "ec2:UnassignPrivateIpAddresses",
        ],
        resources=["*"],
    )

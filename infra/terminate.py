"""The terminate function (deployed with a cluster): a custom termination policy that
opted-in Auto Scaling groups invoke on a scale-in, to learn which instances may go.

The stack cannot change groups it does not own: an operator attaches it to a group (the
README says how; the `TerminationPolicyArn` output is its ARN). Auto Scaling invokes it
through its service-linked role, which the function's resource policy lets in.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Duration
from aws_cdk import aws_iam as iam
from nodescaler.config import TerminateSettings

from . import permissions
from .functions import NodescalerFunction, Shared

# Auto Scaling waits at most two seconds for the answer; past that it asks again later.
TERMINATE_TIMEOUT = Duration.seconds(2)
# The cluster must answer well inside those two seconds, with time to choose and reply.
KUBERNETES_TIMEOUT_SECONDS = 1.2
AUTO_SCALING_ROLE = "aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"


class TerminateFunction:
    """A scale-in's instances, chosen from the cluster: never Ready, empty, then those
    whose pods fit elsewhere (`nodescaler.service.termination_policy`)."""

    def __init__(self, shared: Shared) -> None:
        scope, settings = shared.scope, shared.settings
        self.lambda_ = NodescalerFunction(
            scope,
            "Terminate",
            service=settings.deployment,
            folder="terminate",
            description="nodescaler: which instances a scale-in of an opted-in group takes",
            layers=shared.layers.for_function(kubernetes=True),
            environment=TerminateSettings.model_construct(
                kubernetes_timeout_seconds=KUBERNETES_TIMEOUT_SECONDS,
                state_table=shared.table.table_name,  # how long a cause has waited
                drain_hook=settings.drain_hook,  # whether a group drains its nodes
                **shared.cluster_connection,
                **shared.common,
            ).environment(),
            memory_mb=1024,  # CPU for a cold start within Auto Scaling's two seconds
            timeout=TERMINATE_TIMEOUT,
        )
        self.lambda_.allow(
            permissions.describe_node_groups("DescribeLifecycleHooks"),
            permissions.deny_tag_changes(),
            *shared.cluster_rights(),
            permissions.keep_termination_waits(shared.table.table_arn),
        )
        # A group of its own that only reads: evaluate's may patch nodes (its taint).
        shared.cluster_access(
            "TerminateClusterAccess", self.lambda_.role, kubernetes_group="nodescaler-terminate"
        )
        self.lambda_.run_in_vpc(settings.vpc)
        function = self.lambda_.function
        function.add_permission(
            "InvokedByAutoScaling",
            principal=iam.ArnPrincipal(
                f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:role/{AUTO_SCALING_ROLE}"
            ),
            action="lambda:InvokeFunction",
        )
        CfnOutput(
            scope,
            "TerminationPolicyArn",
            value=function.function_arn,
            description="a group's custom termination policy: aws autoscaling "
            "update-auto-scaling-group --termination-policies <this ARN>",
        )

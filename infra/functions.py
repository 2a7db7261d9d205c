"""One nodescaler Lambda function (arm64, the layers, its own role and log group), and what
the functions share: the settings, the layers, the state table, the evaluation
queue, access to the cluster and to its VPC.

Each function gets a role of its own with exactly the statements its module grants, and
logging rights on its own log group only (no AWS managed policy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.observability.metric_names import NAMESPACE, SERVICE_VARIABLE

from . import permissions
from .layers import ARCHITECTURE, RUNTIME, Layers
from .settings import DeploySettings, VpcSettings

# The handlers, shipped with the package (a link to the repository's functions/ folder).
FUNCTIONS = (Path(__file__).parent / "assets" / "functions").resolve()


class NodescalerFunction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        folder: str,
        service: str,  # the `service` dimension of its metrics: the deployment's name
        description: str,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        memory_mb: int,
        timeout: Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"nodescaler {folder} function",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            code=lambda_.Code.from_asset(
                str(FUNCTIONS / folder), exclude=["**/__pycache__", "**/*.pyc"]
            ),
            handler="handler.handler",
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            layers=list(layers),
            memory_size=memory_mb,
            timeout=timeout,
            role=self.role,
            log_group=self.log_group,
            # X-Ray: each invocation's AWS calls, timed (evaluate's latency is the product's)
            tracing=lambda_.Tracing.ACTIVE,
            environment={
                **environment,
                SERVICE_VARIABLE: service,
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            },
        )

    def allow(self, *statements: iam.PolicyStatement) -> None:
        for statement in statements:
            self.role.add_to_policy(statement)

    def run_in_vpc(self, vpc: VpcSettings | None) -> None:
        """Into the cluster's VPC, for a private API endpoint (VPC endpoints or NAT for AWS)."""
        if vpc is None:
            return
        cfn = self.function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction)
        cfn.vpc_config = lambda_.CfnFunction.VpcConfigProperty(
            subnet_ids=vpc.subnet_ids, security_group_ids=vpc.security_group_ids
        )
        self.allow(permissions.manage_network_interfaces())


def secure_queue(scope: Construct, construct_id: str, **props: object) -> sqs.Queue:
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        **props,  # type: ignore[arg-type]
    )


@dataclass(frozen=True)
class Shared:
    """What each function's module builds on. `scope` is the Nodescaler construct: every
    function adds its resources there, by the ids they have always had, so a stack deployed
    before this code was split by function sees none of its resources replaced."""

    scope: Construct
    settings: DeploySettings
    policies: Mapping[str, NodeGroupPolicy]
    layers: Layers
    table: dynamodb.ITableV2
    evaluation_queue: sqs.Queue
    evaluation_dead_letters: sqs.Queue

    @property
    def common(self) -> dict[str, Any]:
        """Every function's settings: where the policies are, the cluster, the tag names,
        which pods keep their node."""
        tags = self.settings.tags.names()
        return {
            "policies_path": Path(Layers.POLICIES_PATH),
            "cluster_name": self.settings.cluster_name,
            "allowed_groups": self.settings.allowed_groups,
            "tag_enabled": tags.enabled,
            "tag_policy": tags.policy,
            "tag_cluster": tags.cluster,
            "tag_dry_run": tags.dry_run,
            "tag_paused": tags.paused,
            "skip_nodes_with_local_storage": self.settings.skip_nodes_with_local_storage,
            "skip_nodes_with_system_pods": self.settings.skip_nodes_with_system_pods,
            "blocking_system_pod_disruption_timeout_seconds": (
                self.settings.blocking_system_pod_disruption_timeout_seconds
            ),
            "startup_taints": self.settings.startup_taints,
        }

    @property
    def events(self) -> dict[str, Any]:
        """dispatch, evaluate and drain put scaling events on this bus (and may, on it only:
        `permissions.put_scaling_events`)."""
        return {"event_bus_name": self.settings.event_bus}

    @property
    def capacity(self) -> dict[str, Any]:
        """dispatch records a group's backoff after a failed launch, evaluate heeds it."""
        backoff = self.settings.backoff
        return {
            "state_table": self.table.table_name,
            "backoff_initial_seconds": backoff.initial_seconds,
            "backoff_max_seconds": backoff.max_seconds,
            "backoff_reset_seconds": backoff.reset_seconds,
            "max_provision_seconds": backoff.max_provision_seconds,
        }

    @property
    def cluster_connection(self) -> dict[str, Any]:
        """How evaluate, drain and terminate reach the cluster: EKS's by `cluster_name`
        (nothing more to set), or any Kubernetes through the secret `kubernetes` names."""
        access = self.settings.kubernetes
        return access.environment() if access is not None else {}

    @property
    def zonal_shift_resources(self) -> list[str]:
        """The resources whose zonal shifts evaluate obeys: the EKS cluster (a cluster
        reached through a secret is no EKS cluster, which ARC could shift), and cdk.json's
        `zonalShift.resources`."""
        settings = self.settings
        eks_cluster = settings.cluster_name and settings.kubernetes is None
        cluster = [permissions.eks_cluster_arn(settings.cluster_name)] if eks_cluster else []
        return [*cluster, *settings.zonal_shift.resources]

    def cluster_rights(self) -> list[iam.PolicyStatement]:
        """What reaching the cluster takes: DescribeCluster for EKS, else the one secret."""
        access = self.settings.kubernetes
        if access is not None:
            return [permissions.read_cluster_secret(access.secret_arn)]
        return [permissions.describe_eks_cluster(self.settings.cluster_name)]

    def cluster_access(self, construct_id: str, role: iam.IRole, kubernetes_group: str) -> None:
        """The role's Kubernetes identity: a group infra/kubernetes/rbac.yaml binds. A
        cluster outside EKS knows the secret's service account instead (rbac.yaml's
        binding of it), so there is no access entry to make."""
        if self.settings.kubernetes is not None:
            return
        eks.CfnAccessEntry(
            self.scope,
            construct_id,
            cluster_name=self.settings.cluster_name,
            principal_arn=role.role_arn,
            kubernetes_groups=[kubernetes_group],
            type="STANDARD",
        )

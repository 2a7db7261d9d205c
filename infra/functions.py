"""One nodescaler Lambda function: arm64, the layers, its own role and log group.

Each function gets a role of its own with exactly the statements its construct grants,
and logging rights on its own log group only (no AWS managed policy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct
from nodescaler.observability import NAMESPACE, SERVICE

from infra.layers import ARCHITECTURE, RUNTIME

FUNCTIONS = Path(__file__).resolve().parents[1] / "functions"


class NodescalerFunction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        folder: str,
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
            environment={
                **environment,
                "POWERTOOLS_SERVICE_NAME": SERVICE,
                "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            },
        )

    def allow(self, *statements: iam.PolicyStatement) -> None:
        for statement in statements:
            self.role.add_to_policy(statement)

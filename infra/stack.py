"""The nodescaler stack: everything `cdk deploy` creates, built from validated settings."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct
from nodescaler.domain.policy import NodeGroupPolicy

from infra.settings import DeploySettings
from infra.state import StateTable


class NodescalerStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploySettings,
        policies: dict[str, NodeGroupPolicy],
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.settings = settings
        self.policies = policies
        self.state = StateTable(self, "State", deletion_protection=settings.deletion_protection)
        CfnOutput(self, "StateTableName", value=self.state.table.table_name)

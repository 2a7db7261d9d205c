"""The nodescaler stack: everything `cdk deploy` creates for one deployment, built from
validated settings."""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import CfnOutput, Stack
from constructs import Construct
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.versions import PolicyReads

from .nodescaler import Nodescaler
from .settings import DeploySettings


class NodescalerStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: DeploySettings,
        policies: dict[str, NodeGroupPolicy],
        policies_folder: Path | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.nodescaler = Nodescaler(
            self,
            "Nodescaler",
            settings=settings,
            policies=policies,
            policies_folder=policies_folder,  # None: the policies are written out
        )
        CfnOutput(self, "StateTableName", value=self.nodescaler.state.table.table_name)
        CfnOutput(self, "DeploymentName", value=settings.deployment)
        CfnOutput(self, "EvaluationQueueUrl", value=self.nodescaler.evaluation_queue.queue_url)
        CfnOutput(
            self,
            "PolicyWriterPolicyArn",
            value=self.nodescaler.policy_writer.managed_policy_arn,
            description="attach to the operators who apply policies without a deploy",
        )
        # `nodescaler get policies` lists these; `apply` warns of what they do not read.
        deployed = {"names": sorted(policies), "reads": PolicyReads.of(policies.values()).as_json()}
        CfnOutput(self, "DeployedPolicies", value=json.dumps(deployed, separators=(",", ":")))

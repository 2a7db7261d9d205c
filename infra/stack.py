"""The nodescaler stack: everything `cdk deploy` creates for one deployment, built from
validated settings (the construct publishes the outputs the CLI reads)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Stack
from constructs import Construct
from nodescaler.domain.policy import NodeGroupPolicy

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

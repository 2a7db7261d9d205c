"""Deployment settings: the `nodescaler` object of cdk.json's context, validated before synth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from nodescaler.domain.documents import PolicyError, problems_of
from nodescaler.domain.optin import TagNames
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.policy_files import load_policies
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

CONTEXT_KEY = "nodescaler"

TagKey = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[\w .:/=+\-@]+$")]


class _Context(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class TagKeys(_Context):
    """The ASG tags that opt a group in and configure it."""

    enabled: TagKey = TagNames.enabled
    policy: TagKey = TagNames.policy
    cluster: TagKey = TagNames.cluster
    dry_run: TagKey = TagNames.dry_run

    def names(self) -> TagNames:
        return TagNames(self.enabled, self.policy, self.cluster, self.dry_run)


class DeploySettings(_Context):
    cluster_name: Annotated[
        str, Field(max_length=100, pattern=r"^([0-9A-Za-z][A-Za-z0-9\-_]*)?$")
    ] = ""
    policies_folder: Path = Path("policies")
    tick_minutes: Annotated[int, Field(ge=1, le=60)] = 1
    dry_run: bool = False
    deletion_protection: bool = True
    tags: TagKeys = TagKeys()


class SettingsError(ValueError):
    """cdk.json context or a policy that cannot be deployed; one line per problem."""


def load_settings(
    context: dict[str, Any] | None, base: Path
) -> tuple[DeploySettings, dict[str, NodeGroupPolicy]]:
    """Validate the context and every policy document it points to."""
    try:
        settings = DeploySettings.model_validate(context or {})
    except ValidationError as error:
        problems = problems_of(error, "cdk.json", under=("context", CONTEXT_KEY))
        raise SettingsError("\n".join(problems)) from None
    folder = settings.policies_folder
    folder = folder if folder.is_absolute() else base / folder
    try:
        policies = load_policies(folder)
    except PolicyError as error:
        raise SettingsError("\n".join(error.problems)) from None
    return settings, policies

"""One settings model per function, read from the environment once at cold start.

Field aliases are the environment variable names; infra builds each function's
environment from the same model (`environment()`), so a name is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nodescaler.domain.optin import TagNames


class SettingsError(RuntimeError):
    """A function's environment is missing or has a bad setting; names the variable."""


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Self:
        try:
            return cls.model_validate(dict(environ))
        except ValidationError as error:
            problems = []
            for e in error.errors():
                name = str(e["loc"][0]) if e["loc"] else "(environment)"
                what = "is not set" if e["type"] == "missing" else str(e["msg"])
                problems.append(f"setting {name} {what}")
            raise SettingsError(f"{cls.__name__}: " + "; ".join(problems)) from None

    def environment(self) -> dict[str, str]:
        """The environment variables that reproduce these settings."""
        values: dict[str, Any] = self.model_dump(by_alias=True, exclude_none=True)
        return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()}


class CommonSettings(_Settings):
    policies_path: Annotated[Path, Field(alias="POLICIES_PATH")] = Path("/opt/policies")
    cluster_name: Annotated[str, Field(alias="CLUSTER_NAME")] = ""
    tag_enabled: Annotated[str, Field(alias="TAG_ENABLED", min_length=1)] = TagNames.enabled
    tag_policy: Annotated[str, Field(alias="TAG_POLICY", min_length=1)] = TagNames.policy
    tag_cluster: Annotated[str, Field(alias="TAG_CLUSTER", min_length=1)] = TagNames.cluster
    tag_dry_run: Annotated[str, Field(alias="TAG_DRY_RUN", min_length=1)] = TagNames.dry_run

    @property
    def tag_names(self) -> TagNames:
        return TagNames(self.tag_enabled, self.tag_policy, self.tag_cluster, self.tag_dry_run)


class DispatchSettings(CommonSettings):
    """The dispatch function: ticks and alarm state changes → the evaluation queue."""

    evaluation_queue_url: Annotated[str, Field(alias="EVALUATION_QUEUE_URL", pattern=r"^https?://")]


class EvaluateSettings(CommonSettings):
    """The evaluate function: one decision per queued request."""

    state_table: Annotated[str, Field(alias="STATE_TABLE_NAME", min_length=3)]
    dry_run: Annotated[bool, Field(alias="DRY_RUN")] = False
    # A kubeconfig for the Kubernetes metrics (the sandbox); else the EKS cluster CLUSTER_NAME.
    kubeconfig_path: Annotated[Path | None, Field(alias="KUBECONFIG_PATH")] = None
    audit_ttl_days: Annotated[int, Field(alias="AUDIT_TTL_DAYS", ge=1, le=3650)] = 30

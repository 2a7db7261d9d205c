"""Deployment settings: the `nodescaler` object of cdk.json's context, validated before synth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Self

from nodescaler.adapters.policy_files import load_policies
from nodescaler.config import (
    DEFAULT_EXPANDERS,
    CapacitySettings,
    DrainSettings,
    EvaluateSettings,
    ExpanderChain,
    KubernetesTimeout,
    Seconds,
)
from nodescaler.domain.documents import problems_of
from nodescaler.domain.optin import TagNames
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.errors import PolicyError, SettingsError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

CONTEXT_KEY = "nodescaler"

TagKey = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[\w .:/=+\-@]+$")]
# An Auto Scaling group's name as it goes into an IAM resource ARN: no wildcards.
GroupName = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[\w.\-]+$")]


def _default(model: type[BaseModel], field: str) -> Any:
    """A runtime setting's default, so a default is written once (in nodescaler.config)."""
    return model.model_fields[field].default


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
    paused: TagKey = TagNames.paused

    def names(self) -> TagNames:
        return TagNames(self.enabled, self.policy, self.cluster, self.dry_run, self.paused)


class AlarmSettings(_Context):
    """Where alarms go, and when a slow or short group is worth waking someone for."""

    email: Annotated[str | None, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")] = None
    topic_arn: Annotated[
        str | None, Field(pattern=r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:.+$")
    ] = None
    # A group whose in-service count stays below its desired count this long (minutes).
    shortfall_minutes: Annotated[int, Field(ge=2, le=1440)] = 15
    # From the tick or alarm to the decision, 90th percentile (seconds).
    evaluation_latency_seconds: Annotated[int, Field(ge=1, le=900)] = 60
    # A group (or several in turn) backed off after failed launches for most of this long.
    backoff_minutes: Annotated[int, Field(ge=5, le=1440)] = 30


class VpcSettings(_Context):
    """Where the evaluate function runs when the EKS API endpoint is private."""

    subnet_ids: Annotated[
        list[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]+$")]], Field(min_length=1)
    ]
    security_group_ids: Annotated[
        list[Annotated[str, Field(pattern=r"^sg-[0-9a-f]+$")]], Field(min_length=1, max_length=5)
    ]


class BackoffSettings(_Context):
    """How long a group that failed to launch is left alone: doubling from `initialSeconds`
    to `maxSeconds`, forgotten `resetSeconds` after the last failure; a scale-up not in
    service after `maxProvisionSeconds` counts as a failure (Cluster Autoscaler's defaults)."""

    initial_seconds: Seconds = _default(CapacitySettings, "backoff_initial_seconds")
    max_seconds: Seconds = _default(CapacitySettings, "backoff_max_seconds")
    reset_seconds: Seconds = _default(CapacitySettings, "backoff_reset_seconds")
    max_provision_seconds: Seconds = _default(CapacitySettings, "max_provision_seconds")

    @model_validator(mode="after")
    def _doubling_upwards(self) -> Self:
        if self.max_seconds < self.initial_seconds:
            raise ValueError(
                f"maxSeconds ({self.max_seconds}) is below initialSeconds ({self.initial_seconds})"
            )
        return self


class ClusterLimits(_Context):
    """Ceilings on the whole cluster (every managed group together); none by default."""

    max_nodes: Annotated[int | None, Field(ge=0)] = None
    max_vcpus: Annotated[int | None, Field(ge=0)] = None
    max_memory_gib: Annotated[int | None, Field(ge=0)] = None

    @property
    def by_size(self) -> bool:
        """Whether a node counts by its instance type's size, which is then looked up."""
        return self.max_vcpus is not None or self.max_memory_gib is not None


class DrainContext(_Context):
    """How the drain function drains a node (it is deployed with a cluster)."""

    timeout_seconds: Annotated[int, Field(ge=10, le=840)] = _default(
        DrainSettings, "drain_timeout_seconds"
    )
    max_grace_seconds: Annotated[int, Field(ge=0, le=3600)] = _default(
        DrainSettings, "max_grace_seconds"
    )
    timeout_result: Literal["CONTINUE", "ABANDON"] = _default(DrainSettings, "drain_timeout_result")


class DeploySettings(_Context):
    cluster_name: Annotated[
        str, Field(max_length=100, pattern=r"^([0-9A-Za-z][A-Za-z0-9\-_]*)?$")
    ] = ""
    policies_folder: Path = Path("policies")
    tick_minutes: Annotated[int, Field(ge=1, le=60)] = 1
    dry_run: bool = False
    deletion_protection: bool = True
    tags: TagKeys = TagKeys()
    # How many evaluate functions may run at once (Lambda's SQS maximum concurrency, 2-1000).
    evaluate_concurrency: Annotated[int, Field(ge=2, le=1000)] = 10
    # Receives of an evaluation request before it is dead-lettered.
    max_receive_count: Annotated[int, Field(ge=1, le=10)] = 3
    audit_ttl_days: Annotated[int, Field(ge=1, le=3650)] = 30
    # How long the Kubernetes API server may take to answer before its metrics count as missing.
    kubernetes_timeout_seconds: KubernetesTimeout = _default(
        EvaluateSettings, "kubernetes_timeout_seconds"
    )
    alarms: AlarmSettings = AlarmSettings()
    # Which group grows when pending pods fit several (see README, "Expanders").
    expanders: ExpanderChain = DEFAULT_EXPANDERS
    vpc: VpcSettings | None = None
    backoff: BackoffSettings = BackoffSettings()
    cluster_limits: ClusterLimits = ClusterLimits()
    # The stack puts the drain's terminate lifecycle hook on these Auto Scaling groups;
    # README shows the command for any other.
    drain_groups: list[GroupName] = []
    drain: DrainContext = DrainContext()

    @field_validator("drain_groups")
    @classmethod
    def _each_group_once(cls, groups: list[str]) -> list[str]:
        twice = sorted({g for g in groups if groups.count(g) > 1})
        if twice:  # two hooks of one name on one group: CloudFormation would fail at deploy
            raise ValueError(f"listed more than once: {', '.join(twice)}")
        return groups

    def policies_path(self, base: Path) -> Path:
        """The policy folder, relative paths taken from `base` (the folder of cdk.json)."""
        return (
            self.policies_folder
            if self.policies_folder.is_absolute()
            else base / self.policies_folder
        )


def load_settings(
    context: dict[str, Any] | None, base: Path
) -> tuple[DeploySettings, dict[str, NodeGroupPolicy]]:
    """Validate the context and every policy document it points to."""
    try:
        settings = DeploySettings.model_validate(context or {})
    except ValidationError as error:
        problems = problems_of(error, "cdk.json", under=("context", CONTEXT_KEY))
        raise SettingsError("\n".join(problems)) from None
    try:
        policies = load_policies(settings.policies_path(base))
    except PolicyError as error:
        raise SettingsError("\n".join(error.problems)) from None
    needs_cluster = sorted(p.name for p in policies.values() if p.reads_kubernetes)
    if needs_cluster and not settings.cluster_name:
        raise SettingsError(
            f"cdk.json: context.{CONTEXT_KEY}.clusterName: is empty, but policies "
            f"{', '.join(needs_cluster)} read Kubernetes metrics from the cluster; set the EKS "
            "cluster's name"
        )
    if settings.drain_groups and not settings.cluster_name:
        raise SettingsError(
            f"cdk.json: context.{CONTEXT_KEY}.drainGroups: names groups to drain, but "
            "clusterName is empty; set the EKS cluster's name (draining needs the cluster)"
        )
    return settings, policies

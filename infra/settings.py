"""Deployment settings: the `nodescaler` object of cdk.json's context, validated before synth.

One object is one deployment; with `deployments`, a list of objects each laid over the rest,
the app builds one stack per entry (one per cluster). `-c nodescaler='{...}'` is laid over
cdk.json's object the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from nodescaler.adapters.policy_files import load_policies
from nodescaler.config import (
    DEFAULT_EXPANDERS,
    AllowedGroup,
    CapacitySettings,
    CommonSettings,
    DrainSettings,
    EvaluateSettings,
    EventBusName,
    EventSettings,
    ExpanderChain,
    KubernetesTimeout,
    Seconds,
)
from nodescaler.deployment import (
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    deployment_id,
    drain_hook,
    name_for_cluster,
)
from nodescaler.domain.documents import field_path, index_by_name, problems_of
from nodescaler.domain.optin import TagNames
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.errors import PolicyError, SettingsError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

CONTEXT_KEY = "nodescaler"
DEPLOYMENTS_KEY = "deployments"

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
        list[Annotated[str, Field(pattern=r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")]],
        Field(min_length=1),
    ]
    security_group_ids: Annotated[
        list[Annotated[str, Field(pattern=r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")]],
        Field(min_length=1, max_length=5),
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


class KubernetesAccess(_Context):
    """A cluster that is not EKS (self-managed Kubernetes on EC2): the Secrets Manager
    secret holding a kubeconfig or a service account token, and, for a token alone, the
    API server it goes to and the CA that signed that server's certificate (base64 PEM).
    With an endpoint, a kubeconfig naming another server is refused at run time."""

    secret_arn: Annotated[
        str, Field(pattern=r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]+$")
    ]
    endpoint: Annotated[str | None, Field(pattern=r"^https://[^\s/]+(:\d+)?/?$")] = None
    ca_bundle: Annotated[str | None, Field(max_length=8192)] = None

    @field_validator("ca_bundle")
    @classmethod
    def _a_pem_certificate(cls, data: str | None) -> str | None:
        import base64
        import binascii

        if data is not None:
            try:
                pem = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError("is not base64 (give the CA's PEM, base64-encoded)") from None
            if b"-----BEGIN CERTIFICATE-----" not in pem:
                raise ValueError("holds no PEM certificate")
        return data

    @model_validator(mode="after")
    def _ca_with_its_endpoint(self) -> Self:
        if self.ca_bundle is not None and self.endpoint is None:
            raise ValueError("caBundle is given without the endpoint it is trusted for")
        return self

    def environment(self) -> dict[str, Any]:
        """The functions' settings that reach the cluster this way."""
        return {
            "kubernetes_secret": self.secret_arn,
            "kubernetes_endpoint": self.endpoint,
            "kubernetes_ca_data": self.ca_bundle,
        }


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
    # The deployment's name, from which its stack and physical names derive (`deployment`);
    # by default the cluster's.
    name: Annotated[str | None, Field(max_length=NAME_MAX_LENGTH, pattern=NAME_PATTERN)] = None
    cluster_name: Annotated[
        str, Field(max_length=100, pattern=r"^([0-9A-Za-z][A-Za-z0-9\-_]*)?$")
    ] = ""
    # No cluster: said on purpose, for the opted-in groups whose cluster tag names none.
    all_groups: bool = False
    # The only groups it may resize: names, or prefixes ending in `*`; unset, every group.
    allowed_groups: list[AllowedGroup] | None = None
    policies_folder: Path = Path("policies")
    tick_minutes: Annotated[int, Field(ge=1, le=60)] = 1
    # Between ticks, a look every few seconds at unschedulable pods and the policies' queues
    # (README, "The fast path"); false: the tick alone.
    fast_path: bool = True
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
    # Unset: the cluster is EKS's `clusterName`. Set: any Kubernetes, through a secret.
    kubernetes: KubernetesAccess | None = None
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
    # Where each resize, backoff and drain outcome is put (README, "Scaling events").
    event_bus: EventBusName = _default(EventSettings, "event_bus_name")
    # Cluster Autoscaler's flags of the same names and defaults: a node running a pod with
    # local storage, or a kube-system pod no disruption budget selects, stays (scale-in's
    # choice, the terminate function's, and the drain, which does not evict such a pod).
    skip_nodes_with_local_storage: bool = _default(CommonSettings, "skip_nodes_with_local_storage")
    skip_nodes_with_system_pods: bool = _default(CommonSettings, "skip_nodes_with_system_pods")

    @field_validator("drain_groups")
    @classmethod
    def _each_group_once(cls, groups: list[str]) -> list[str]:
        twice = sorted({g for g in groups if groups.count(g) > 1})
        if twice:  # two hooks of one name on one group: CloudFormation would fail at deploy
            raise ValueError(f"listed more than once: {', '.join(twice)}")
        return groups

    @field_validator("allowed_groups")
    @classmethod
    def _a_list_that_allows_something(cls, groups: list[str] | None) -> list[str] | None:
        if groups is not None and not groups:
            raise ValueError("is empty, so no group could be resized; leave it out to allow all")
        twice = sorted({g for g in groups or () if groups and groups.count(g) > 1})
        if twice:
            raise ValueError(f"listed more than once: {', '.join(twice)}")
        return groups

    @property
    def deployment(self) -> str:
        """The stack's name and the prefix of every name the stack sets: `nodescaler`, or
        `nodescaler-<name>` (the cluster's name unless `name` says otherwise)."""
        return deployment_id(
            name_for_cluster(self.cluster_name) if self.name is None else self.name
        )

    @property
    def drain_hook(self) -> str:
        return drain_hook(self.deployment)

    def policies_path(self, base: Path) -> Path:
        """The policy folder, relative paths taken from `base` (the folder of cdk.json)."""
        return (
            self.policies_folder
            if self.policies_folder.is_absolute()
            else base / self.policies_folder
        )


Loaded = tuple[DeploySettings, dict[str, NodeGroupPolicy]]
WHERE = ("context", CONTEXT_KEY)  # the settings' place in cdk.json


def load_settings(
    context: dict[str, Any] | None, base: Path, where: tuple[str | int, ...] = WHERE
) -> Loaded:
    """Validate one deployment's context and every policy document it points to; `where`
    is the context's place in cdk.json, for the messages."""
    try:
        settings = DeploySettings.model_validate(context or {})
    except ValidationError as error:
        raise SettingsError("\n".join(problems_of(error, "cdk.json", under=where))) from None
    policies = policies_in(settings.policies_path(base))
    check_cluster(settings, policies, f"cdk.json: {field_path(where)}")
    return settings, policies


def policies_in(folder: Path) -> dict[str, NodeGroupPolicy]:
    try:
        return load_policies(folder)
    except PolicyError as error:
        raise SettingsError("\n".join(error.problems)) from None


def check_cluster(
    settings: DeploySettings, policies: Mapping[str, NodeGroupPolicy], here: str
) -> None:
    """What needs a cluster has one; `here` names the settings in the message."""
    needs_cluster = sorted(p.name for p in policies.values() if p.reads_kubernetes)
    if needs_cluster and not settings.cluster_name:
        raise SettingsError(
            f"{here}.clusterName: is empty, but policies "
            f"{', '.join(needs_cluster)} read Kubernetes metrics from the cluster; set the EKS "
            "cluster's name"
        )
    if settings.drain_groups and not settings.cluster_name:
        raise SettingsError(
            f"{here}.drainGroups: names groups to drain, but "
            "clusterName is empty; set the EKS cluster's name (draining needs the cluster)"
        )
    check_scope(settings, here)


def check_scope(settings: DeploySettings, here: str) -> None:
    """Which groups a deployment manages is said, never implied: its cluster's, or with
    `allGroups: true` and no cluster, the opted-in groups whose cluster tag names none."""
    if not settings.cluster_name and not settings.all_groups:
        raise SettingsError(
            f"{here}.clusterName: deployment {settings.deployment}: is empty; set the "
            "cluster whose opted-in groups it manages, or allGroups: true for the opted-in "
            "groups that name no cluster"
        )
    if settings.cluster_name and settings.all_groups:
        raise SettingsError(
            f"{here}.allGroups: deployment {settings.deployment}: is true, but clusterName "
            f"is {settings.cluster_name}, whose groups alone it manages; set one or the other"
        )


def construct_settings(
    settings: DeploySettings | None,
    options: Mapping[str, Any],
    policies: Mapping[str, NodeGroupPolicy] | Iterable[NodeGroupPolicy] | None,
    policies_folder: Path | None,
) -> tuple[DeploySettings, dict[str, NodeGroupPolicy], Path | None]:
    """The `Nodescaler` construct's arguments, validated as cdk.json's are: the settings
    (or their fields as keywords), and the policies as objects or from a folder (the
    settings' `policies_folder` from the current folder by default). The folder is None
    when the policies came as objects."""
    if settings is not None and options:
        raise SettingsError(
            f"Nodescaler: settings= and keywords ({', '.join(sorted(options))}) given "
            "together; pass one or the other"
        )
    if settings is None:
        try:
            settings = DeploySettings.model_validate(options)
        except ValidationError as error:
            raise SettingsError("\n".join(problems_of(error, "Nodescaler"))) from None
    folder = policies_folder
    if policies is None:
        folder = folder or settings.policies_path(Path.cwd())
        by_name = policies_in(folder)
    else:
        given = policies.values() if isinstance(policies, Mapping) else policies
        try:
            by_name = index_by_name(("Nodescaler(policies=...)", p) for p in given)
        except PolicyError as error:
            raise SettingsError("\n".join(error.problems)) from None
    check_cluster(settings, by_name, "Nodescaler: settings")
    return settings, by_name, folder


def load_deployments(context: dict[str, Any] | None, base: Path) -> list[Loaded]:
    """Every deployment the context describes: itself, or each of its `deployments` laid
    over the rest. Two deployments of one name would be one stack: refused."""
    shared = dict(context or {})
    entries = shared.pop(DEPLOYMENTS_KEY, None)
    if entries is None:
        return [load_settings(shared, base)]
    if not isinstance(entries, list) or not entries:
        raise SettingsError(
            f"cdk.json: context.{CONTEXT_KEY}.{DEPLOYMENTS_KEY}: should be a non-empty list of "
            "objects, one per deployment"
        )
    loaded: list[Loaded] = []
    seen: dict[str, int] = {}
    clusters: dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = ("context", CONTEXT_KEY, DEPLOYMENTS_KEY, index)
        if not isinstance(entry, dict):
            raise SettingsError(f"cdk.json: {field_path(where)}: should be an object")
        settings, policies = load_settings(merged(shared, entry), base, where)
        if settings.deployment in seen:
            raise SettingsError(
                f"cdk.json: {field_path(where)}: is deployment {settings.deployment} again "
                f"(as {DEPLOYMENTS_KEY}[{seen[settings.deployment]}]); give each a distinct "
                "name or clusterName"
            )
        seen[settings.deployment] = index
        # Two deployments on one cluster (or two of no cluster, allGroups) would both resize
        # the same groups, each with its own state table: neither would see the other.
        cluster = settings.cluster_name
        if cluster in clusters:
            raise SettingsError(
                f"cdk.json: {field_path((*where, 'clusterName'))}: manages "
                f"{f'cluster {cluster}' if cluster else 'the groups of no cluster'} "
                f"again (as {DEPLOYMENTS_KEY}[{clusters[cluster]}]); two deployments would "
                "resize the same groups"
            )
        clusters[cluster] = index
        loaded.append((settings, policies))
    return loaded


def merged(settings: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` laid over `settings`: objects merged key by key, anything else replaced."""
    result = dict(settings)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merged(result[key], value)
        else:
            result[key] = value
    return result


def with_override(settings: dict[str, Any] | None, override: object) -> dict[str, Any]:
    """cdk.json's settings with the app's context laid over them: the CDK CLI passes
    `-c nodescaler='{...}'` as a string of JSON, cdk.json's own object as an object."""
    if isinstance(override, str):
        try:
            override = json.loads(override)
        except json.JSONDecodeError as error:
            raise SettingsError(
                f"-c {CONTEXT_KEY}: is not JSON ({error.msg}, at character {error.pos}); "
                f"""pass an object, e.g. -c {CONTEXT_KEY}='{{"clusterName": "my-cluster"}}'"""
            ) from None
    if override is None:
        return dict(settings or {})
    if not isinstance(override, dict):
        raise SettingsError(
            f"-c {CONTEXT_KEY}: is {json.dumps(override)[:40]}, not a JSON object; pass an "
            f"""object, e.g. -c {CONTEXT_KEY}='{{"clusterName": "my-cluster"}}'"""
        )
    return merged(settings or {}, override)

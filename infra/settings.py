"""Deployment settings: the `nodescaler` object of cdk.json's context, validated before synth.

One object is one deployment; with `deployments`, a list of objects each laid over the rest,
the app builds one stack per entry (one per cluster). `-c nodescaler='{...}'` is laid over
cdk.json's object the same way, then each `-c key=value` (`-c clusterName=prod`,
`-c alarms.email=oncall@example.com`); a bad value is blamed on the one that gave it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, get_args

from nodescaler.adapters.deployed_policies import load_policies
from nodescaler.config import (
    ANY_GROUP,
    AllowedGroup,
    CommonSettings,
    EvaluateSettings,
    EventBusName,
    EventSettings,
    KubernetesTimeout,
    Seconds,
    TaintKey,
)
from nodescaler.deployment import (
    NAME_MAX_LENGTH,
    NAME_PATTERN,
    deployment_id,
    drain_hook,
    name_for_cluster,
)
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.parsing import (
    did_you_mean,
    field_path,
    index_by_name,
    problems_at,
    worded,
)
from nodescaler.errors import PolicyError, SettingsError
from nodescaler.expander_settings import DEFAULT_EXPANDERS, ExpanderChain
from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel, to_snake

from .setting_sections import (
    AlarmSettings,
    BackoffSettings,
    ClusterLimits,
    ContextModel,
    DrainContext,
    GroupName,
    KubernetesAccess,
    TagKey,
    TagKeys,
    VpcSettings,
    ZonalShiftContext,
    runtime_default,
)

__all__ = [  # what a CDK app imports from here (nodescaler_cdk.settings), sections too
    "CONTEXT_KEY",
    "DEPLOYMENTS_KEY",
    "AlarmSettings",
    "BackoffSettings",
    "ClusterLimits",
    "DeploySettings",
    "DrainContext",
    "GroupName",
    "KubernetesAccess",
    "SettingsError",
    "Sources",
    "TagKey",
    "TagKeys",
    "VpcSettings",
    "ZonalShiftContext",
    "check_cluster",
    "check_scope",
    "construct_settings",
    "context_flags",
    "json_flag",
    "load_deployments",
    "load_settings",
    "merged",
    "policies_in",
    "setting_keys",
    "setting_names",
    "unknown_flags",
]

CONTEXT_KEY = "nodescaler"
DEPLOYMENTS_KEY = "deployments"


class _RaisingSettingsError(type(BaseModel)):  # type: ignore[misc]
    """`DeploySettings(...)` in a user's code raises SettingsError naming each bad or
    unknown setting, with the one it may have meant, not pydantic's ValidationError. On the
    call alone: pydantic would run an __init__ inside cdk.json's validation too."""

    def __call__(cls, *args: Any, **settings: Any) -> Any:
        try:
            return super().__call__(*args, **settings)
        except ValidationError as error:
            name = cls.__name__
            problems = problems_at(
                error, lambda loc: f"{name}: {'.'.join(str(p) for p in loc)}", _snake_names
            )
            raise SettingsError("\n".join(problems)) from None


class DeploySettings(ContextModel, metaclass=_RaisingSettingsError):
    """One deployment's settings: cdk.json's `nodescaler` object, its keys in snake case
    (`DeploySettings(cluster_name="prod", dry_run=True)`). A bad or unknown setting raises
    SettingsError naming each problem (docs/deploy.md lists every setting)."""

    name: Annotated[
        str | None,
        Field(
            max_length=NAME_MAX_LENGTH,
            pattern=worded(
                NAME_PATTERN, "a name of letters, digits and '-', starting with a letter or digit"
            ),
        ),
    ] = None
    """The deployment's name, from which its stack and physical names derive
    (`deployment`); by default the cluster's."""
    cluster_name: Annotated[
        str,
        Field(
            max_length=100,
            pattern=worded(
                r"^([0-9A-Za-z][A-Za-z0-9\-_]*)?$",
                "an EKS cluster's name: letters, digits, '-' and '_', starting with a letter "
                "or digit",
            ),
        ),
    ] = ""
    """The cluster whose opted-in groups it manages (EKS's name, or any name with
    `kubernetes`); empty only with `all_groups`."""
    all_groups: bool = False
    """No cluster: said on purpose, for the opted-in groups whose cluster tag names none."""
    allowed_groups: list[AllowedGroup] | None = None
    """The only groups it may resize: names, or prefixes ending in `*`; ["*"], any group
    opted in for the cluster. Required: tag rights are resize rights unless it says so."""
    policies_folder: Path = Path("policies")
    """The folder of policy files, from cdk.json's folder (or the current one)."""
    tick_minutes: Annotated[int, Field(ge=1, le=60)] = 1
    """Minutes between the ticks that evaluate every group."""
    fast_path: bool = True
    """Between ticks, a look every few seconds at unschedulable pods and the policies'
    queues (README, "The fast path"); false: the tick alone."""
    dry_run: bool = False
    """Decide and record, never resize."""
    deletion_protection: bool = True
    """The state table's deletion protection."""
    tags: TagKeys = TagKeys()
    """The tag keys that opt a group in and configure it."""
    evaluate_concurrency: Annotated[int, Field(ge=2, le=1000)] = 10
    """How many evaluate functions may run at once (Lambda's SQS maximum concurrency)."""
    max_receive_count: Annotated[int, Field(ge=1, le=10)] = 3
    """Receives of an evaluation request before it is dead-lettered."""
    audit_ttl_days: Annotated[int, Field(ge=1, le=3650)] = 30
    """Days a decision's audit item is kept."""
    kubernetes_timeout_seconds: KubernetesTimeout = runtime_default(
        EvaluateSettings, "kubernetes_timeout_seconds"
    )
    """How long the Kubernetes API server may take to answer before its metrics count as
    missing."""
    kubernetes: KubernetesAccess | None = None
    """Unset: the cluster is EKS's `cluster_name`. Set: any Kubernetes, through a secret."""
    alarms: AlarmSettings = AlarmSettings()
    """Where alarms go (`AlarmSettings(email=...)` or `topic_arn`), and their thresholds."""
    expanders: ExpanderChain = DEFAULT_EXPANDERS
    """Which group grows when pending pods fit several (see README, "Expanders")."""
    vpc: VpcSettings | None = None
    """Subnets and security groups for the evaluate function (a private API endpoint)."""
    backoff: BackoffSettings = BackoffSettings()
    """How long a group that failed to launch is left alone."""
    cluster_limits: ClusterLimits = ClusterLimits()
    """Ceilings on the whole cluster; none by default."""
    drain_groups: list[GroupName] = []  # noqa: RUF012  (a pydantic field: copied, not shared)
    """The Auto Scaling groups the stack puts the drain's terminate lifecycle hook on;
    README shows the command for any other."""
    drain_opted_in_groups: bool = runtime_default(EvaluateSettings, "drain_opted_in_groups")
    """Each opted-in group given that hook too, by evaluate before its first scale-in, so a
    node with pods is drained before its instance goes; false: only `drainGroups` and
    groups hooked by hand drain (with a cluster: its drain answers the hook)."""
    drain: DrainContext = DrainContext()
    """How the drain function drains a node."""
    zonal_shift: ZonalShiftContext = ZonalShiftContext()
    """ARC zonal shifts obeyed: those of the EKS cluster, and of these resources (docs,
    policies.md "Impaired zones")."""
    event_bus: EventBusName = runtime_default(EventSettings, "event_bus_name")
    """Where each resize, backoff and drain outcome is put (README, "Scaling events")."""
    skip_nodes_with_local_storage: bool = runtime_default(
        CommonSettings, "skip_nodes_with_local_storage"
    )
    """Cluster Autoscaler's flag of the same name and default: a node running a pod with
    local storage stays (scale-in's choice, the terminate function's, and the drain)."""
    skip_nodes_with_system_pods: bool = runtime_default(
        CommonSettings, "skip_nodes_with_system_pods"
    )
    """Cluster Autoscaler's flag of the same name and default: a node running a kube-system
    pod no disruption budget selects stays (for the timeout below)."""
    blocking_system_pod_disruption_timeout_seconds: Seconds = runtime_default(
        CommonSettings, "blocking_system_pod_disruption_timeout_seconds"
    )
    """Cluster Autoscaler's --blocking-system-pod-distruption-timeout and default (an hour):
    such a kube-system pod keeps its node only this long after its creation."""
    startup_taints: list[TaintKey] = []  # noqa: RUF012  (a pydantic field: copied, not shared)
    """Cluster Autoscaler's --startup-taint: keys of taints a node loses once an agent runs
    on it, beside Cilium's, the EBS and EFS CSI drivers' and CA's prefixes (docs,
    policies.md "Startup taints"). A node carrying one counts as still starting."""

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
            raise ValueError(
                f'is empty, so no group could be resized; list the groups, or ["{ANY_GROUP}"] '
                "for any group opted in for the cluster"
            )
        if groups and ANY_GROUP in groups and len(groups) > 1:
            raise ValueError(
                f'lists "{ANY_GROUP}", any group opted in for the cluster, beside names; give '
                f'["{ANY_GROUP}"] alone, or the names alone'
            )
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


Loc = tuple[str | int, ...]
Blame = Callable[[Loc], str]  # a setting's place (its field path) → `source: field` for a message


def load_settings(
    context: dict[str, Any] | None,
    base: Path,
    where: Loc = WHERE,
    blame: Blame | None = None,
) -> Loaded:
    """Validate one deployment's context and every policy document it points to; `where`
    is the context's place in cdk.json, `blame` where each field came from (cdk.json's
    `where`, by default), for the messages."""
    try:
        settings = DeploySettings.model_validate(context or {})
    except ValidationError as error:
        blame = blame or (lambda loc: f"cdk.json: {field_path((*where, *loc))}")
        raise SettingsError("\n".join(problems_at(error, blame, setting_names))) from None
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
    `allGroups: true` and no cluster, the opted-in groups whose cluster tag names none; and
    which of those it may resize (`allowedGroups`: names and prefixes, or `*` for all)."""
    if not settings.cluster_name and not settings.all_groups:
        raise SettingsError(
            f"{here}.clusterName: deployment {settings.deployment}: is empty; set the "
            "cluster whose opted-in groups it manages, or allGroups: true for the opted-in "
            "groups that name no cluster"
        )
    if settings.allowed_groups is None:
        whose = f"cluster {settings.cluster_name}" if settings.cluster_name else "no cluster"
        raise SettingsError(
            f"{here}.allowedGroups: deployment {settings.deployment}: is not set; whoever may "
            "tag an Auto Scaling group could have it resized. List the groups it may resize, "
            f'names or prefixes ending in * (["prod-web-*", "gpu-a"]), or ["{ANY_GROUP}"] to '
            f"let it resize any group opted in for {whose}"
        )
    if settings.cluster_name and settings.all_groups:
        raise SettingsError(
            f"{here}.allGroups: deployment {settings.deployment}: is true, but clusterName "
            f"is {settings.cluster_name}, whose groups alone it manages; set one or the other"
        )


def construct_settings(
    settings: DeploySettings,
    policies: Mapping[str, NodeGroupPolicy] | Iterable[NodeGroupPolicy] | None,
    policies_folder: Path | None,
) -> tuple[DeploySettings, dict[str, NodeGroupPolicy], Path | None]:
    """The `Nodescaler` construct's arguments, checked as cdk.json's are: the settings, and
    the policies as objects or from a folder (the settings' `policies_folder` from the
    current folder by default). The folder is None when the policies came as objects."""
    if not isinstance(settings, DeploySettings):  # a caller without a type checker
        raise SettingsError(
            f"Nodescaler: settings: is {type(settings).__name__}, not DeploySettings; pass "
            "settings=DeploySettings(cluster_name=...)"
        )
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


def load_deployments(context: dict[str, Any] | Sources | None, base: Path) -> list[Loaded]:
    """Every deployment the context describes: itself, or each of its `deployments` laid
    over the rest. Two deployments of one name would be one stack: refused."""
    sources = context if isinstance(context, Sources) else Sources(file=context or {})
    shared = sources.combined()
    entries = shared.pop(DEPLOYMENTS_KEY, None)
    if entries is None:
        return [load_settings(shared, base, blame=sources.blame)]
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
        settings, policies = load_settings(
            merged(shared, entry), base, where, sources.blame_in(index, entry)
        )
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


SHOW_EXAMPLE = f"""pass an object, e.g. -c {CONTEXT_KEY}='{{"clusterName": "my-cluster"}}'"""


def json_flag(given: object, file: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What `-c nodescaler='{...}'` lays over cdk.json's settings: the CDK CLI passes it as a
    string of JSON, and cdk.json's own object (`file`) as an object, which lays nothing
    (passed through jsii, which drops its null values)."""
    if given is None or _without_nulls(given) == _without_nulls(file):
        return {}
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except json.JSONDecodeError as error:
            raise SettingsError(
                f"-c {CONTEXT_KEY}: is not JSON ({error.msg}, at character {error.pos}); "
                + SHOW_EXAMPLE
            ) from None
    if not isinstance(given, dict):
        raise SettingsError(
            f"-c {CONTEXT_KEY}: is {json.dumps(given)[:40]}, not a JSON object; " + SHOW_EXAMPLE
        )
    return given


def _without_nulls(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _snake_names() -> list[str]:
    """Every setting's name as the construct's DeploySettings takes it, at any depth."""
    return sorted({to_snake(name) for name in setting_names()})


def setting_names() -> list[str]:
    """Every setting's name as cdk.json writes it, at any depth (`email`), for a
    did-you-mean."""
    return sorted({key.rsplit(".", 1)[-1] for key in setting_keys()})


# A key `-c key=value` could mean as a setting: a name, or names joined by dots. The CDK's
# own keys (`@aws-cdk/...`, `aws:cdk:...`, lookups, `acknowledged-issue-numbers`) are not.
_SETTING_LIKE = re.compile(r"^[A-Za-z]\w*(\.[A-Za-z]\w*)*$")


def unknown_flags(context: Mapping[str, Any], file_context: Mapping[str, Any]) -> None:
    """Each `-c key=value` in the app's `context` that sets nothing (`-c fastpath=false`,
    `-c alarms.emial=...`) is an error naming it, with the setting it may have meant;
    cdk.json's own context keys (`file_context`) are not flags."""
    known = setting_keys()
    problems = [
        f"-c {key}: is not a setting{did_you_mean(key, known)}; every setting is a key of "
        f"cdk.json's {CONTEXT_KEY} object (docs/deploy.md)"
        for key in context
        if key not in known and key not in file_context and _SETTING_LIKE.match(key)
    ]
    if problems:
        raise SettingsError("\n".join(problems))


def setting_keys() -> list[str]:
    """Each key `-c key=value` sets: every setting by its cdk.json name, and each field of
    an object setting as `object.field` (`alarms.email`)."""
    keys = []
    for name, info in DeploySettings.model_fields.items():
        key = to_camel(name)
        keys.append(key)
        for inner in (info.annotation, *get_args(info.annotation)):  # `VpcSettings | None`
            if isinstance(inner, type) and issubclass(inner, ContextModel):
                keys += [f"{key}.{to_camel(n)}" for n in inner.model_fields]
    return keys


def context_flags(get: Callable[[str], Any]) -> dict[str, Any]:
    """Each `-c key=value` given, by key, from the app's context (`get`). The CDK CLI passes
    every value as a string: pydantic reads `true` or `10` from it, and a list or object
    (`-c drainGroups='["a"]'`) is read here as JSON."""
    flags = {}
    for key in setting_keys():
        value = get(key)
        if isinstance(value, str) and (value.lstrip()[:1] in ("[", "{") or value == "null"):
            try:
                flags[key] = json.loads(value)
            except json.JSONDecodeError as error:
                raise SettingsError(
                    f"-c {key}: is not JSON ({error.msg}, at character {error.pos}); pass a "
                    f"""list or object as JSON, e.g. -c drainGroups='["my-group"]'"""
                ) from None
        elif value is not None:
            flags[key] = value
    return flags


@dataclass(frozen=True)
class Sources:
    """The settings as given, laid over one another in this order: cdk.json's object, the
    object of `-c nodescaler='{...}'`, and each `-c key=value` (by its key, `alarms.email`).
    Each problem is blamed on the one that gave the value."""

    file: Mapping[str, Any] = field(default_factory=dict)
    json_flag: Mapping[str, Any] = field(default_factory=dict)
    flags: Mapping[str, Any] = field(default_factory=dict)

    def combined(self) -> dict[str, Any]:
        result = merged(dict(self.file), dict(self.json_flag))
        for key, value in self.flags.items():
            *parents, last = key.split(".")
            layer: dict[str, Any] = {last: value}
            for parent in reversed(parents):
                layer = {parent: layer}
            result = merged(result, layer)
        return result

    def blame(self, loc: Loc) -> str:
        """`source: field` for a problem at `loc`, a field path in the combined settings."""
        dotted = ".".join(str(part) for part in loc)
        for key, value in self.flags.items():
            if dotted == key or dotted.startswith(f"{key}."):
                return f"-c {key} (given {json.dumps(value)}): {field_path(loc)}"
        if _holds(self.json_flag, loc):
            return f"-c {CONTEXT_KEY}: {field_path(loc)}"
        return f"cdk.json: {field_path((*WHERE, *loc))}"

    def blame_in(self, index: int, entry: Mapping[str, Any]) -> Blame:
        """`blame` for deployment `index`, whose own `entry` says the fields it holds."""
        deployments = (DEPLOYMENTS_KEY, index)
        source = "-c nodescaler: " if DEPLOYMENTS_KEY in self.json_flag else "cdk.json: "

        def blame(loc: Loc) -> str:
            if _holds(entry, loc):
                place = deployments if source.startswith("-c") else (*WHERE, *deployments)
                return source + field_path((*place, *loc))
            return self.blame(loc)

        return blame


def _holds(settings: Mapping[str, Any], loc: Loc) -> bool:
    """Whether `settings` gives the value at `loc` (or the list or value standing there)."""
    for part in loc:
        if not isinstance(settings, Mapping) or not isinstance(part, str) or part not in settings:
            return False
        settings = settings[part]
        if not isinstance(settings, Mapping):
            return True
    return bool(loc)

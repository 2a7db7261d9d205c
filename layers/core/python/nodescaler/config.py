"""One settings model per function, read from the environment once at cold start.

Field aliases are the environment variable names; infra builds each function's
environment from the same model (`environment()`), so a name is written once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Json,
    ValidationError,
)

from nodescaler.deployment import DEFAULT_DRAIN_HOOK
from nodescaler.domain.cluster.startup_taints import StartupTaints
from nodescaler.domain.groups.optin import AllowedGroups, TagNames
from nodescaler.domain.scale_down.pod_rules import DrainRules
from nodescaler.domain.scale_up.backoff import BackoffRules
from nodescaler.domain.scaling.limits import BufferCaps
from nodescaler.domain.token_origins import TokenOrigins, origin
from nodescaler.errors import SettingsError
from nodescaler.expander_settings import DEFAULT_EXPANDERS, ExpanderChain

# A terminate lifecycle hook's name, as Auto Scaling takes it
DrainHookName = Annotated[str, Field(alias="DRAIN_HOOK_NAME", min_length=1, max_length=255)]


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
                inside = "".join(f"[{part}]" for part in e["loc"][1:])
                what = "is not set" if e["type"] == "missing" and not inside else str(e["msg"])
                problems.append(f"setting {name}{inside} {what}")
            raise SettingsError(f"{cls.__name__}: " + "; ".join(problems)) from None

    def environment(self) -> dict[str, str]:
        """The environment variables that reproduce these settings."""
        values: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}


def _group_or_prefix(entry: str) -> str:
    if entry != ANY_GROUP and not re.fullmatch(r"[\w.\-]{1,255}\*?", entry):
        raise ValueError(
            f"{entry!r} is neither a group's name nor a prefix ending in * (letters, digits, "
            "'.', '_' and '-', then at most one * at the end), nor * alone for any group"
        )
    return entry


# A resource ARC may shift away from a zone (an EKS cluster, a load balancer, an Auto
# Scaling group), by its ARN, as GetManagedResource takes it.
ArcResource = Annotated[
    str,
    Field(
        min_length=8, max_length=1024, pattern=r"^arn:aws[a-z-]*:[a-z0-9-]+:[a-z0-9-]*:\d{12}:\S+$"
    ),
]


ANY_GROUP = "*"  # allowedGroups: ["*"]: any group opted in for the cluster, said on purpose
# An allow-list entry: an Auto Scaling group's name, or a prefix of names ending in `*`
# (exactly what an IAM resource ARN's `*` means at its end); `*` alone, any group.
AllowedGroup = Annotated[str, AfterValidator(_group_or_prefix)]


Seconds = Annotated[int, Field(ge=1, le=7 * 24 * 3600)]
_TAINT_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?"  # a DNS subdomain and /, if any
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"  # the name
)


def _taint_key(key: str) -> str:
    if not _TAINT_KEY.fullmatch(key):
        raise ValueError(
            f"{key[:80]!r} is not a taint's key: an optional DNS prefix and '/', then a name "
            "of letters, digits, '-', '_' and '.' (63 at most) that starts and ends with a "
            "letter or digit"
        )
    return key


# A taint's key as Kubernetes takes it: an optional DNS prefix (253) and a name (63)
TaintKey = Annotated[str, AfterValidator(_taint_key)]


class CommonSettings(_Settings):
    policies_path: Annotated[Path, Field(alias="POLICIES_PATH")] = Path("/opt/policies")
    cluster_name: Annotated[str, Field(alias="CLUSTER_NAME")] = ""
    # The groups the deployment may resize (JSON list); unset: every managed group.
    allowed_groups: Annotated[Json[list[AllowedGroup]] | None, Field(alias="ALLOWED_GROUPS")] = None
    tag_enabled: Annotated[str, Field(alias="TAG_ENABLED", min_length=1)] = TagNames.enabled
    tag_policy: Annotated[str, Field(alias="TAG_POLICY", min_length=1)] = TagNames.policy
    tag_cluster: Annotated[str, Field(alias="TAG_CLUSTER", min_length=1)] = TagNames.cluster
    tag_dry_run: Annotated[str, Field(alias="TAG_DRY_RUN", min_length=1)] = TagNames.dry_run
    tag_paused: Annotated[str, Field(alias="TAG_PAUSED", min_length=1)] = TagNames.paused
    # Cluster Autoscaler's --skip-nodes-with-local-storage and --skip-nodes-with-system-pods:
    # which pods keep their node, for scale-in's choice and for the drain alike.
    skip_nodes_with_local_storage: Annotated[bool, Field(alias="SKIP_NODES_WITH_LOCAL_STORAGE")] = (
        DrainRules.skip_nodes_with_local_storage
    )
    skip_nodes_with_system_pods: Annotated[bool, Field(alias="SKIP_NODES_WITH_SYSTEM_PODS")] = (
        DrainRules.skip_nodes_with_system_pods
    )
    # ... and its --blocking-system-pod-distruption-timeout: how long after its creation
    # such a kube-system pod keeps its node (1 s to a week; a pod that must never move has
    # a PodDisruptionBudget allowing no disruption).
    blocking_system_pod_disruption_timeout_seconds: Annotated[
        Seconds, Field(alias="BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS")
    ] = int(DrainRules.system_pod_timeout.total_seconds())
    # ... and its --startup-taint: taints a node loses once an agent runs on it (JSON list
    # of keys), beside the well-known ones (`domain.cluster.startup_taints`)
    startup_taints: Annotated[Json[list[TaintKey]], Field(alias="STARTUP_TAINTS")] = []

    @property
    def tag_names(self) -> TagNames:
        return TagNames(
            self.tag_enabled, self.tag_policy, self.tag_cluster, self.tag_dry_run, self.tag_paused
        )

    @property
    def drain_rules(self) -> DrainRules:
        return DrainRules(
            self.skip_nodes_with_local_storage,
            self.skip_nodes_with_system_pods,
            timedelta(seconds=self.blocking_system_pod_disruption_timeout_seconds),
        )

    @property
    def startup(self) -> StartupTaints:
        return StartupTaints.also(self.startup_taints)

    @property
    def allowed(self) -> AllowedGroups:
        return AllowedGroups(tuple(self.allowed_groups or ()))


# An EventBridge bus: its name, or its ARN (another account's or region's bus).
EventBusName = Annotated[str, Field(min_length=1, max_length=1600, pattern=r"^[\w.\-/:]+$")]


class EventSettings(CommonSettings):
    """The functions that put scaling events on EventBridge: dispatch, evaluate, drain."""

    event_bus_name: Annotated[EventBusName, Field(alias="EVENT_BUS_NAME")] = "default"


KubernetesTimeout = Annotated[float, Field(gt=0, le=20)]  # seconds


class CapacitySettings(EventSettings):
    """Backoff after a failed scale-up (Cluster Autoscaler's defaults), for the functions
    that record one (dispatch, on a launch-failure event) and heed it (evaluate)."""

    state_table: Annotated[str, Field(alias="STATE_TABLE_NAME", min_length=3)]
    backoff_initial_seconds: Annotated[Seconds, Field(alias="BACKOFF_INITIAL_SECONDS")] = 300
    backoff_max_seconds: Annotated[Seconds, Field(alias="BACKOFF_MAX_SECONDS")] = 1800
    backoff_reset_seconds: Annotated[Seconds, Field(alias="BACKOFF_RESET_SECONDS")] = 3 * 3600
    max_provision_seconds: Annotated[Seconds, Field(alias="MAX_PROVISION_SECONDS")] = 900
    # How long the stored policies last read serve while reads of them fail; then the
    # deployed ones, as a cold container would (a rollback must not wait on the table)
    stored_policy_max_staleness_seconds: Annotated[
        Seconds, Field(alias="STORED_POLICY_MAX_STALENESS_SECONDS", ge=60)
    ] = 600

    @property
    def backoff_rules(self) -> BackoffRules:
        return BackoffRules(
            initial=timedelta(seconds=self.backoff_initial_seconds),
            maximum=timedelta(seconds=max(self.backoff_max_seconds, self.backoff_initial_seconds)),
            reset_after=timedelta(seconds=self.backoff_reset_seconds),
            max_provision_time=timedelta(seconds=self.max_provision_seconds),
        )


class DispatchSettings(CapacitySettings):
    """The dispatch function: ticks, alarm state changes and launch failures → the
    evaluation queue (a launch failure backs its group off first)."""

    evaluation_queue_url: Annotated[str, Field(alias="EVALUATION_QUEUE_URL", pattern=r"^https?://")]


def _normalised(address: str) -> str:
    if origin(address) != address:
        raise ValueError(f"{address!r} is not an origin as scheme://host:port writes it")
    return address


SecretName = Annotated[str, Field(min_length=1, max_length=2048)]
Origin = Annotated[str, AfterValidator(_normalised)]


class ClusterConnectionSettings(_Settings):
    """How a function reaches the cluster's API server: a kubeconfig file (the sandbox,
    tests); else a Secrets Manager secret holding a kubeconfig or a token (any Kubernetes,
    `adapters/k8s/secret_access.py`); else the EKS cluster CLUSTER_NAME."""

    kubeconfig_path: Annotated[Path | None, Field(alias="KUBECONFIG_PATH")] = None
    kubernetes_secret: Annotated[
        str | None, Field(alias="KUBERNETES_SECRET", min_length=1, max_length=2048)
    ] = None
    # Where a token may go (a kubeconfig naming another server is refused), and the CA to
    # trust there (base64 PEM) when the secret holds a token alone.
    kubernetes_endpoint: Annotated[
        str | None, Field(alias="KUBERNETES_ENDPOINT", pattern=r"^https://[^\s/]+")
    ] = None
    kubernetes_ca_data: Annotated[str | None, Field(alias="KUBERNETES_CA_DATA")] = None


class PrometheusTokenSettings(_Settings):
    """Where the Prometheus metric's bearer tokens may go (the evaluate and fast path
    functions read its queries)."""

    # The (secret, origin) pairs of the deployed policies' Prometheus bearer tokens: a token
    # goes only to an origin it was deployed with, whatever a stored policy names (JSON).
    token_origins: Annotated[
        Json[list[tuple[SecretName, Origin]]], Field(alias="PROMETHEUS_TOKEN_ORIGINS")
    ] = []

    @property
    def token_origin_pairs(self) -> TokenOrigins:
        return frozenset(self.token_origins)


class EvaluateSettings(CapacitySettings, ClusterConnectionSettings, PrometheusTokenSettings):
    """The evaluate function: one decision per queued request."""

    dry_run: Annotated[bool, Field(alias="DRY_RUN")] = False
    # How long the Kubernetes API server may take to accept a connection, and to answer each
    # request, before the cluster's metrics count as missing for this evaluation.
    kubernetes_timeout_seconds: Annotated[
        KubernetesTimeout, Field(alias="KUBERNETES_TIMEOUT_SECONDS")
    ] = 5
    # Which group grows when pending pods fit several: a chain, first to last (JSON).
    expanders: Annotated[Json[ExpanderChain], Field(alias="EXPANDERS")] = DEFAULT_EXPANDERS
    audit_ttl_days: Annotated[int, Field(alias="AUDIT_TTL_DAYS", ge=1, le=3650)] = 30
    # The resources whose ARC zonal shifts and autoshifts hold a group in a shifted zone
    # (JSON list of ARNs): the EKS cluster's, and cdk.json's `zonalShift.resources` (infra
    # sets it). None: ARC is not read (the sandbox and benchmarks on moto, unless supplied).
    zonal_shift_resources: Annotated[
        Json[list[ArcResource]], Field(alias="ZONAL_SHIFT_RESOURCES", max_length=50)
    ] = []
    # The queue it reads and its dead-letter queue: a failed request is made visible again
    # within seconds, or set aside at once when retrying cannot help. Unset: Lambda's retries.
    evaluation_queue_url: Annotated[
        str | None, Field(alias="EVALUATION_QUEUE_URL", pattern=r"^https?://")
    ] = None
    dead_letter_queue_url: Annotated[
        str | None, Field(alias="DEAD_LETTER_QUEUE_URL", pattern=r"^https?://")
    ] = None
    # Optional limits on the whole cluster (all managed groups), enforced across groups.
    cluster_max_nodes: Annotated[int | None, Field(alias="CLUSTER_MAX_NODES", ge=0)] = None
    cluster_max_vcpus: Annotated[int | None, Field(alias="CLUSTER_MAX_VCPUS", ge=0)] = None
    cluster_max_memory_gib: Annotated[int | None, Field(alias="CLUSTER_MAX_MEMORY_GIB", ge=0)] = (
        None
    )
    # The most pods one namespace's CapacityBuffer, and all of them together, may ask room
    # for: anyone who may create a buffer takes a group no further, and a tick stays short.
    cluster_buffer_max_pods: Annotated[
        int, Field(alias="CLUSTER_BUFFER_MAX_PODS", ge=0, le=100_000)
    ] = BufferCaps.per_buffer
    cluster_buffers_max_pods: Annotated[
        int, Field(alias="CLUSTER_BUFFERS_MAX_PODS", ge=0, le=100_000)
    ] = BufferCaps.total

    # Each opted-in group given the deployment's terminate hook before its scale-in, so the
    # drain function evicts a node's pods before its instance goes (cdk.json's
    # drainOptedInGroups; infra sets it false without a cluster: no drain answers the hook).
    drain_opted_in_groups: Annotated[bool, Field(alias="DRAIN_OPTED_IN_GROUPS")] = True
    drain_hook: DrainHookName = DEFAULT_DRAIN_HOOK

    @property
    def buffer_caps(self) -> BufferCaps:
        return BufferCaps(self.cluster_buffer_max_pods, self.cluster_buffers_max_pods)


class TerminateSettings(CommonSettings, ClusterConnectionSettings):
    """The termination policy function: which instances a scale-in takes, from the cluster."""

    # Where it keeps how long a cause other than a scale-in has been answered none.
    state_table: Annotated[str, Field(alias="STATE_TABLE_NAME", min_length=3)]
    # The deployment's terminate hook: only a group that has it drains a node before its
    # instance goes, so only there may a node with pods to move be chosen.
    drain_hook: DrainHookName = DEFAULT_DRAIN_HOOK

    # Without a way to the cluster the function cannot tell, and gives the choice back.
    # Auto Scaling waits on the answer: a cluster slower than this is left to the group.
    kubernetes_timeout_seconds: Annotated[
        KubernetesTimeout, Field(alias="KUBERNETES_TIMEOUT_SECONDS")
    ] = 5


class DrainSettings(EventSettings, ClusterConnectionSettings):
    """The drain function: terminate lifecycle actions and EC2 Spot warnings → drained nodes."""

    # Where a Spot warning queues the re-evaluation of its instance's node group.
    evaluation_queue_url: Annotated[str, Field(alias="EVALUATION_QUEUE_URL", pattern=r"^https?://")]
    # How long a drain may take before the instance is let go anyway: Cluster Autoscaler's
    # ten minutes. At most 840 s, so a drain ends a minute inside Lambda's 15-minute limit.
    drain_timeout_seconds: Annotated[int, Field(alias="DRAIN_TIMEOUT_SECONDS", ge=10, le=840)] = 600
    # How often the lifecycle action is kept alive while pods leave; the hook's own
    # HeartbeatTimeout (30 s to 2 h, 1 h by default) must be longer.
    heartbeat_seconds: Annotated[int, Field(alias="HEARTBEAT_SECONDS", ge=10, le=3600)] = 60
    # The longest grace period an evicted pod gets, whatever it asks for: Cluster
    # Autoscaler's --max-graceful-termination-sec.
    max_grace_seconds: Annotated[int, Field(alias="MAX_GRACE_SECONDS", ge=0, le=3600)] = 600
    # Groups the stack hooked by name (cdk.json drainGroups): drained though not opted in.
    drain_groups: Annotated[Json[list[str]], Field(alias="DRAIN_GROUPS")] = []
    # The deployment's terminate hook: another deployment's hook on the same group is not ours.
    drain_hook: DrainHookName = DEFAULT_DRAIN_HOOK
    # Sent when a drain times out or fails. Auto Scaling terminates the instance either way;
    # ABANDON also skips the group's other terminate hooks, CONTINUE lets them run.
    drain_timeout_result: Annotated[
        Literal["CONTINUE", "ABANDON"], Field(alias="DRAIN_TIMEOUT_RESULT")
    ] = "CONTINUE"


class FastPathSettings(CapacitySettings, ClusterConnectionSettings, PrometheusTokenSettings):
    """The fast path: a look every few seconds between ticks at unschedulable pods and the
    policies' queues → the evaluation queue (README, "The fast path")."""

    evaluation_queue_url: Annotated[str, Field(alias="EVALUATION_QUEUE_URL", pattern=r"^https?://")]
    # Seconds between looks; a failed one backs off, doubling, to at most the backoff's cap.
    interval_seconds: Annotated[float, Field(alias="FAST_PATH_INTERVAL_SECONDS", ge=1, le=30)] = 5
    backoff_cap_seconds: Annotated[
        float, Field(alias="FAST_PATH_BACKOFF_CAP_SECONDS", ge=1, le=60)
    ] = 30
    # A look must be light: a slow API server is given up on, and the look backed off.
    kubernetes_timeout_seconds: Annotated[
        KubernetesTimeout, Field(alias="KUBERNETES_TIMEOUT_SECONDS")
    ] = 2
    # The same for each Prometheus query (its own timeoutSeconds when shorter): a slow
    # server is given up on, and the look backed off.
    query_timeout_seconds: Annotated[
        float, Field(alias="FAST_PATH_QUERY_TIMEOUT_SECONDS", gt=0, le=10)
    ] = 2

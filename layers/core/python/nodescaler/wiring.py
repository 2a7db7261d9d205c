"""The runtime composition root: real adapters built from a function's settings.

Handlers call these once per cold start. Clients share one botocore Config (adaptive
retries, short timeouts) and are made on first use, so the dispatch function never pays
for the clients only evaluate needs. Tests and the sandbox pass their own `AwsClients`
(moto) and clock.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from nodescaler.adapters.aws.evaluation_queue import SqsEvaluationQueue
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.ports import Clock, MakeProducer, MetricProducer

# Each function imports what it builds, when it builds it (cold starts). That includes
# whatever is made of pydantic models (settings, policies, the state store's items), so
# that importing this module, as the dispatch function does, loads no pydantic.
if TYPE_CHECKING:
    from nodescaler.adapters.aws.evaluation_queue import SqsRedelivery
    from nodescaler.adapters.aws.event_bus import EventBridgeScalingEvents
    from nodescaler.adapters.aws.instance_types import Ec2InstanceTypes
    from nodescaler.adapters.aws.state_table import DynamoStateStore
    from nodescaler.adapters.k8s.connection import (
        EksConnection,
        KubeconfigConnection,
        SecretConnection,
    )
    from nodescaler.config import (
        CapacitySettings,
        CommonSettings,
        DispatchSettings,
        DrainSettings,
        EvaluateSettings,
        EventSettings,
        ExpanderSpec,
        FastPathSettings,
        TerminateSettings,
    )
    from nodescaler.deadline import Deadline
    from nodescaler.domain.policy import MetricBase
    from nodescaler.domain.scale_up.expanders import Expander
    from nodescaler.domain.token_origins import TokenOrigins
    from nodescaler.ports import Sleep, ZonalShiftSource
    from nodescaler.service.cluster_view import KubernetesClusterView
    from nodescaler.service.dispatch import Dispatcher
    from nodescaler.service.drainer import Drainer
    from nodescaler.service.evaluation import Evaluator
    from nodescaler.service.fast_path import FastPath, Look
    from nodescaler.service.limiter import ClusterLimiter
    from nodescaler.service.policy_resolver import PolicyBook
    from nodescaler.service.producers import Producers
    from nodescaler.service.stored_policies import StoredPolicies
    from nodescaler.service.termination_policy import TerminationChooser

BOTO_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": 5},
    connect_timeout=3,
    read_timeout=10,
    user_agent_extra="nodescaler",
)


# The termination policy's state table reads and writes: a small part of Auto Scaling's two
# seconds, which the cluster's read takes most of.
WAITS_TIMEOUT_SECONDS = 0.25


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class AwsClients:
    """One boto3 client per service, made on first use from one session and one Config."""

    def __init__(
        self,
        session: boto3.Session | None = None,
        *,
        config: Config = BOTO_CONFIG,
        endpoint_url: str | None = None,  # the sandbox's moto server
        amp_endpoint_url: str | None = None,  # the sandbox's Prometheus, for every AMP workspace
    ) -> None:
        self._session = session or boto3.Session()
        self._config = config
        self._endpoint_url = endpoint_url
        self.amp_endpoint_url = amp_endpoint_url

    def _client(self, service: str) -> Any:
        return self._session.client(service, config=self._config, endpoint_url=self._endpoint_url)

    @cached_property
    def autoscaling(self) -> Any:
        return self._client("autoscaling")

    @cached_property
    def eks(self) -> Any:
        return self._client("eks")

    @cached_property
    def sqs(self) -> Any:
        return self._client("sqs")

    @cached_property
    def cloudwatch(self) -> Any:
        return self._client("cloudwatch")

    @cached_property
    def dynamodb(self) -> Any:
        return self._client("dynamodb")

    @cached_property
    def events(self) -> Any:
        return self._client("events")

    @cached_property
    def sts(self) -> Any:
        return self._client("sts")

    @cached_property
    def ec2(self) -> Any:
        return self._client("ec2")

    @cached_property
    def arc_zonal_shift(self) -> Any:
        return self._client("arc-zonal-shift")

    @cached_property
    def secretsmanager(self) -> Any:
        return self._client("secretsmanager")

    @property
    def session(self) -> boto3.Session:
        return self._session

    def client(self, service: str, config: Config) -> Any:
        """A client with its own Config (the custom expander's time budget)."""
        return self._session.client(
            service, config=self._config.merge(config), endpoint_url=self._endpoint_url
        )


def node_groups(
    settings: CommonSettings,
    clients: AwsClients,
    clock: Clock | None = None,
    *,
    scaling_config: bool = True,
) -> AsgNodeGroups:
    """The node groups; given a clock, a managed group's scalingConfig is kept a minute
    for `discover` (each evaluation's `get` reads it afresh). Without `scaling_config`
    (a role that may not DescribeNodegroup), a managed group's bounds are its ASG's."""
    return AsgNodeGroups(
        clients.autoscaling,
        clients.eks,
        tag_names=settings.tag_names,
        cluster_name=settings.cluster_name,
        clock=clock,
        scaling_config=scaling_config,
    )


def scaling_events(settings: EventSettings, clients: AwsClients) -> EventBridgeScalingEvents:
    """Scaling events for the settings' bus; its client made on the first put."""
    from nodescaler.adapters.aws.event_bus import EventBridgeScalingEvents

    return EventBridgeScalingEvents(lambda: clients.events, settings.event_bus_name)


def policy_book(settings: CommonSettings, stored: StoredPolicies | None = None) -> PolicyBook:
    """The deployed policies, and the tags that say which one a group uses; the stored
    ones, when given, go before them."""
    from nodescaler.adapters.deployed_policies import read_policies
    from nodescaler.service.policy_resolver import PolicyBook

    folder = read_policies(settings.policies_path)
    return PolicyBook(folder.policies, settings.tag_names, folder.broken, folder.unnamed, stored)


def stored_policies(
    settings: CapacitySettings, clients: AwsClients, clock: Clock
) -> StoredPolicies:
    """The policies applied with `nodescaler apply`, read from the state table at most once
    a minute; a failed read is logged and counted, and the deployed ones serve."""
    from nodescaler.adapters.aws.policy_store import DynamoPolicyStore
    from nodescaler.observability.reports import report_stored_policies_unreadable
    from nodescaler.service.stored_policies import StoredPolicies

    return StoredPolicies(
        DynamoPolicyStore(clients.dynamodb, settings.state_table),
        clock,
        max_staleness=timedelta(seconds=settings.stored_policy_max_staleness_seconds),
        on_failure=report_stored_policies_unreadable,
    )


def dispatcher(
    settings: DispatchSettings, clients: AwsClients | None = None, clock: Clock | None = None
) -> Dispatcher:
    from nodescaler.adapters.aws.state_table import DynamoStateStore
    from nodescaler.service.dispatch import Dispatcher

    clients = clients or AwsClients()
    clock = clock or SystemClock()
    return Dispatcher(
        node_groups=node_groups(settings, clients),
        queue=SqsEvaluationQueue(clients.sqs, settings.evaluation_queue_url),
        policies=policy_book(settings, stored_policies(settings, clients, clock)),
        state=DynamoStateStore(clients.dynamodb, settings.state_table),  # writes no decisions
        clock=clock,
        backoff_rules=settings.backoff_rules,
        cluster_name=settings.cluster_name,
        events=scaling_events(settings, clients),
        allowed=settings.allowed,
    )


def fast_path(
    settings: FastPathSettings,
    clients: AwsClients | None = None,
    clock: Clock | None = None,
    sleep: Sleep | None = None,
    report: Callable[[Look, float], None] | None = None,
) -> FastPath:
    """The fast path's looks: the cluster's unschedulable pods when a policy reads pending
    pods and a connection is set, the policies' queues and Prometheus queries (each given
    at most `query_timeout_seconds`), and the evaluation queue."""
    import time

    from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
    from nodescaler.adapters.prometheus import producer as prometheus_producer
    from nodescaler.domain.scale_up.fast_path_rules import Backoff
    from nodescaler.service.fast_path import FastPath

    clients = clients or AwsClients()
    clock = clock or SystemClock()
    policies = policy_book(settings, stored_policies(settings, clients, clock))
    pods = None
    connection = None
    if any(p.takes_pending_pods for p in policies.policies.values()):
        connection = kubernetes_connection(settings, clients, clock)
    if connection is not None:  # a policy without PendingPods watches its own pods (own_pods)
        from nodescaler.adapters.k8s.core_api import KubernetesCluster

        timeout = settings.kubernetes_timeout_seconds
        pods = KubernetesCluster(connection, timeout_seconds=timeout)
    return FastPath(
        # no clock: scalingConfig bounds are evaluate's (the fast path may not DescribeNodegroup)
        node_groups=node_groups(settings, clients),
        queue=SqsEvaluationQueue(clients.sqs, settings.evaluation_queue_url),
        policies=policies,
        pods=pods,
        backlogs=SqsQueueLength(clients.sqs),
        prometheus=prometheus_producer(
            ProducerContext(clients, settings.token_origin_pairs, None),
            max_seconds=settings.query_timeout_seconds,
        ),
        clock=clock,
        sleep=sleep or time.sleep,
        report=report or (lambda look, wait: None),
        allowed=settings.allowed,
        interval_seconds=settings.interval_seconds,
        backoff=Backoff(maximum=settings.backoff_cap_seconds),
    )


def evaluator(
    settings: EvaluateSettings, clients: AwsClients | None = None, clock: Clock | None = None
) -> Evaluator:
    from nodescaler.adapters.aws.cloudwatch import CloudWatchMetricHistory
    from nodescaler.adapters.aws.instance_types import Ec2InstanceTypes
    from nodescaler.adapters.aws.state_table import DynamoStateStore
    from nodescaler.deadline import Deadline
    from nodescaler.domain.scaling.limits import ClusterLimits
    from nodescaler.service.evaluation import Evaluator
    from nodescaler.service.limiter import ClusterLimiter

    clients = clients or AwsClients()
    clock = clock or SystemClock()
    policies = policy_book(settings, stored_policies(settings, clients, clock))
    groups = node_groups(settings, clients, clock)
    state = DynamoStateStore(
        clients.dynamodb, settings.state_table, audit_ttl=timedelta(days=settings.audit_ttl_days)
    )
    shapes = Ec2InstanceTypes(clients.ec2, clients.autoscaling, clients.eks, clock=clock)
    limits = ClusterLimits(
        settings.cluster_max_nodes, settings.cluster_max_vcpus, settings.cluster_max_memory_gib
    )
    limiter = ClusterLimiter(limits, groups, shapes, state) if limits else None
    shifts = zonal_shifts(settings, clients, clock)
    deadline = Deadline()  # the invocation's, shared by its network reads
    kubernetes = kubernetes_metrics(
        settings,
        policies=policies,
        groups=groups,
        state=state,
        shapes=shapes,
        clients=clients,
        clock=clock,
        limiter=limiter,
        zonal_shifts=shifts,
        deadline=deadline,
    )
    return Evaluator(
        node_groups=groups,
        producers=metric_producers(clients, kubernetes, settings.token_origin_pairs, deadline),
        state=state,
        policies=policies,
        clock=clock,
        cluster_name=settings.cluster_name,
        dry_run=settings.dry_run,
        backoff_rules=settings.backoff_rules,
        cluster=kubernetes,  # scale-in annotations, Ready nodes
        limiter=limiter,
        zonal_shifts=shifts,
        histories=CloudWatchMetricHistory(clients.cloudwatch),  # forecasts from a named metric
        events=scaling_events(settings, clients),
        allowed=settings.allowed,
        deadline=deadline,
    )


def zonal_shifts(
    settings: EvaluateSettings, clients: AwsClients, clock: Clock
) -> ZonalShiftSource | None:
    """ARC's zonal shifts in force on the resources that concern the cluster, read once a
    batch; its client made on the first read. None when no resource concerns it."""
    if not settings.zonal_shift_resources:
        return None
    from nodescaler.adapters.aws.zonal_shifts import ArcZonalShifts

    return ArcZonalShifts(
        lambda: clients.arc_zonal_shift,
        clients.ec2,
        resources=settings.zonal_shift_resources,
        clock=clock,
    )


def redelivery(
    settings: EvaluateSettings, clients: AwsClients | None = None
) -> SqsRedelivery | None:
    """Where failed evaluation requests go: back soon, or to the dead-letter queue."""
    from nodescaler.adapters.aws.evaluation_queue import SqsRedelivery

    if settings.evaluation_queue_url is None or settings.dead_letter_queue_url is None:
        return None  # Lambda's own retries, then the queue's redrive policy
    clients = clients or AwsClients()
    return SqsRedelivery(clients.sqs, settings.evaluation_queue_url, settings.dead_letter_queue_url)


@dataclass(frozen=True)
class ProducerContext:
    """What a metric type's producer may be made of (a `ports.ProducerContext`)."""

    clients: AwsClients
    token_origins: TokenOrigins  # a bearer token goes only to the origins its secret pairs
    deadline: Deadline | None  # the invocation's: no read outlasts it


def metric_producers(
    clients: AwsClients,
    kubernetes: KubernetesClusterView | None,
    token_origins: TokenOrigins = frozenset(),
    deadline: Deadline | None = None,
) -> Producers:
    """Each metric type's producer, made by the function its descriptor names; a type that
    reads the cluster is read by `kubernetes` (without a cluster, it reads as unavailable);
    a forecast has none (it is computed from the group's history)."""
    from nodescaler.domain.policy.descriptors import METRIC_TYPES
    from nodescaler.observability.reports import report_refused_source
    from nodescaler.service.producers import Producers

    context = ProducerContext(clients, token_origins, deadline)
    registry: dict[type[MetricBase], MetricProducer] = {}
    for metric_type in METRIC_TYPES:
        if metric_type.reads_cluster:
            if kubernetes is not None:
                registry[metric_type.model] = kubernetes
        elif metric_type.producer is not None:
            registry[metric_type.model] = _factory(metric_type.producer)(context)
    return Producers(registry, on_refused=report_refused_source)


def _factory(path: str) -> MakeProducer:
    """The producer factory a descriptor names ("module:function"), imported now."""
    module, _, name = path.partition(":")
    factory: MakeProducer = getattr(importlib.import_module(module), name)
    return factory


def kubernetes_metrics(
    settings: EvaluateSettings,
    *,
    policies: PolicyBook,
    groups: AsgNodeGroups,
    state: DynamoStateStore,
    shapes: Ec2InstanceTypes,
    clients: AwsClients,
    clock: Clock,
    limiter: ClusterLimiter | None = None,
    zonal_shifts: ZonalShiftSource | None = None,
    deadline: Deadline | None = None,
) -> KubernetesClusterView | None:
    """The Kubernetes producer, when a policy needs one or counts its own pending pods
    (`domain.scaling.own_pods`, where a connection is set); the client is imported only then."""
    deployed = policies.policies.values()
    if not any(p.reads_kubernetes or p.counts_own_pending_pods for p in deployed):
        return None
    connection = kubernetes_connection(settings, clients, clock)
    if connection is None:
        return None  # its metrics read as unavailable: scale-in held (synth refuses this setup)
    from nodescaler.adapters.k8s.core_api import KubernetesCluster
    from nodescaler.adapters.k8s.events import KubernetesEvents
    from nodescaler.service.cluster_view import KubernetesClusterView
    from nodescaler.service.pending_pods import PendingPodsPlanner
    from nodescaler.service.unplaced_pod_events import UnplacedPodEvents

    planner = PendingPodsPlanner(
        groups,
        policies,
        shapes,
        expander_chain(settings.expanders, clients, groups, clock),
        backoffs=state,
        limiter=limiter,
        allowed=settings.allowed,
        zonal_shifts=zonal_shifts,
    )
    timeout = settings.kubernetes_timeout_seconds  # each answer's, within the invocation's
    cluster = KubernetesCluster(
        connection, timeout_seconds=timeout, deadline=deadline, buffer_caps=settings.buffer_caps
    )
    events = KubernetesEvents(connection, timeout_seconds=timeout, deadline=deadline)
    return KubernetesClusterView(
        cluster,
        pending=planner,
        waiting=UnplacedPodEvents(events),
        marks=cluster,
        rules=settings.drain_rules,
    )


def kubernetes_connection(
    settings: EvaluateSettings | DrainSettings | TerminateSettings | FastPathSettings,
    clients: AwsClients,
    clock: Clock,
) -> EksConnection | KubeconfigConnection | SecretConnection | None:
    """The cluster's API: a kubeconfig (the sandbox, tests), else the cluster a secret
    gives access to (any Kubernetes), else the EKS cluster CLUSTER_NAME; None when none is
    set."""
    from nodescaler.adapters.k8s.connection import (
        EksConnection,
        KubeconfigConnection,
        SecretConnection,
    )
    from nodescaler.adapters.k8s.secret_access import Pinned

    if settings.kubeconfig_path is not None:
        return KubeconfigConnection(settings.kubeconfig_path)
    if settings.kubernetes_secret is not None:
        pinned = Pinned(settings.kubernetes_endpoint, settings.kubernetes_ca_data)
        return SecretConnection(clients.secretsmanager, settings.kubernetes_secret, pinned)
    if settings.cluster_name:
        return EksConnection(clients.eks, clients.sts, settings.cluster_name, clock)
    return None


def expander_chain(
    specs: Sequence[ExpanderSpec],
    clients: AwsClients,
    groups: AsgNodeGroups,
    clock: Clock,
) -> list[Expander]:
    from nodescaler.adapters.aws.custom_expander import LambdaExpander, budget_config
    from nodescaler.config import (
        BalanceExpanderSpec,
        CustomExpanderSpec,
        PriorityExpanderSpec,
        SimpleExpanderSpec,
        WeightedPriorityExpanderSpec,
    )
    from nodescaler.domain.scale_up.balance import IGNORED_LABELS
    from nodescaler.domain.scale_up.expanders import (
        BalanceSimilarGroups,
        CustomExpander,
        LeastWasteExpander,
        MostPodsExpander,
        PriorityExpander,
        RandomExpander,
        WeightedPriorityExpander,
    )

    chain: list[Expander] = []
    for spec in specs:
        match spec:
            case PriorityExpanderSpec():
                chain.append(PriorityExpander(spec.priorities))
            case WeightedPriorityExpanderSpec():
                chain.append(WeightedPriorityExpander(spec.tiers))
            case CustomExpanderSpec():
                client = clients.client("lambda", budget_config(spec.timeout_seconds))
                chain.append(CustomExpander(LambdaExpander(client, spec.function_name)))
            case BalanceExpanderSpec():
                chain.append(BalanceSimilarGroups(IGNORED_LABELS | set(spec.ignored_labels)))
            case SimpleExpanderSpec(name="least-waste"):
                chain.append(LeastWasteExpander())
            case SimpleExpanderSpec(name="most-pods"):
                chain.append(MostPodsExpander())
            case SimpleExpanderSpec(name="reserved-first"):
                chain.append(reserved_first(clients, groups, clock))
            case _:
                chain.append(RandomExpander())
    return chain


def reserved_first(clients: AwsClients, groups: AsgNodeGroups, clock: Clock) -> Expander:
    """The reserved-first expander over EC2's capacity reservations, read once a batch."""
    from nodescaler.adapters.aws.capacity_reservations import Ec2ReservedCapacity
    from nodescaler.domain.scale_up.expanders import ReservedFirstExpander
    from nodescaler.observability.reports import report_reserved_capacity

    rooms = Ec2ReservedCapacity(clients.ec2, groups, clock=clock, on_read=report_reserved_capacity)
    return ReservedFirstExpander(rooms)


def drainer(
    settings: DrainSettings,
    clients: AwsClients | None = None,
    clock: Clock | None = None,
    sleep: Sleep | None = None,
) -> Drainer:
    """The drain function's Drainer: the cluster to drain, Auto Scaling's lifecycle actions,
    and the evaluation queue a Spot warning asks for replacement capacity through."""
    import time

    from nodescaler.adapters.aws.lifecycle import (
        AsgInstanceGroups,
        AsgLifecycleActions,
        Ec2InstanceMarkets,
    )
    from nodescaler.adapters.k8s.evictions import KubernetesDrain
    from nodescaler.domain.scale_down.drain import LifecycleResult
    from nodescaler.errors import SettingsError
    from nodescaler.service.drainer import Drainer, Owners, Replacements

    clients = clients or AwsClients()
    clock = clock or SystemClock()
    connection = kubernetes_connection(settings, clients, clock)
    if connection is None:
        raise SettingsError(
            "DrainSettings: setting CLUSTER_NAME is not set, nor KUBECONFIG_PATH: "
            "the drain needs the cluster whose nodes it drains"
        )
    owners = Owners(
        instances=AsgInstanceGroups(clients.autoscaling),
        markets=Ec2InstanceMarkets(clients.ec2),
        # whose group it is: its tags alone (the role may not DescribeNodegroup)
        node_groups=node_groups(settings, clients, scaling_config=False),
        tag_names=settings.tag_names,
        cluster_name=settings.cluster_name,
        drain_groups=frozenset(settings.drain_groups),
        hook=settings.drain_hook,
    )
    return Drainer(
        cluster=KubernetesDrain(connection),
        lifecycle=AsgLifecycleActions(clients.autoscaling),
        clock=clock,
        sleep=sleep or time.sleep,
        owners=owners,
        replacements=Replacements(
            owners, SqsEvaluationQueue(clients.sqs, settings.evaluation_queue_url)
        ),
        drain_timeout=timedelta(seconds=settings.drain_timeout_seconds),
        heartbeat_interval=timedelta(seconds=settings.heartbeat_seconds),
        max_grace_seconds=settings.max_grace_seconds,
        timeout_result=LifecycleResult(settings.drain_timeout_result),
        events=scaling_events(settings, clients),
        rules=settings.drain_rules,
    )


def terminator(
    settings: TerminateSettings, clients: AwsClients | None = None, clock: Clock | None = None
) -> TerminationChooser:
    """The termination policy function's chooser: the opted-in groups, the cluster, and how
    long a cause has waited (the state table, read within Auto Scaling's two seconds)."""
    from nodescaler.adapters.aws.custom_expander import budget_config
    from nodescaler.adapters.aws.termination_waits import DynamoTerminationWaits
    from nodescaler.service.termination_policy import TerminationChooser

    clients = clients or AwsClients()
    clock = clock or SystemClock()
    connection = kubernetes_connection(settings, clients, clock)
    cluster = None
    if connection is not None:
        from nodescaler.adapters.k8s.core_api import KubernetesCluster

        cluster = KubernetesCluster(connection, timeout_seconds=settings.kubernetes_timeout_seconds)
    dynamodb = clients.client("dynamodb", budget_config(WAITS_TIMEOUT_SECONDS))
    waits = DynamoTerminationWaits(dynamodb, settings.state_table)
    return TerminationChooser(
        node_groups(settings, clients), cluster, clock, waits, settings.drain_rules
    )

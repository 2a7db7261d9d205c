"""The evaluate function's assembly: the evaluator, the cluster it reads, and where a failed
request goes."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from nodescaler.adapters.aws.cloudwatch import CloudWatchMetricHistory
from nodescaler.adapters.aws.drain_hooks import AsgDrainHookKeeper
from nodescaler.adapters.aws.evaluation_queue import SqsRedelivery
from nodescaler.adapters.aws.instance_types import Ec2InstanceTypes
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.adapters.aws.zonal_shifts import ArcZonalShifts
from nodescaler.deadline import Deadline
from nodescaler.domain.scaling.limits import ClusterLimits
from nodescaler.service.evaluation import ClusterSay, Evaluator, Setup
from nodescaler.service.limiter import ClusterLimiter
from nodescaler.wiring.aws import node_groups, scaling_events
from nodescaler.wiring.clients import AwsClients, SystemClock
from nodescaler.wiring.kubernetes import kubernetes_connection
from nodescaler.wiring.policies import capacity_policies
from nodescaler.wiring.producers import metric_producers

if TYPE_CHECKING:
    from nodescaler.adapters.aws.node_groups import AsgNodeGroups
    from nodescaler.config import EvaluateSettings
    from nodescaler.ports import Clock, ZonalShiftSource
    from nodescaler.service.cluster_view import KubernetesClusterView
    from nodescaler.service.policy_resolver import PolicyBook


def evaluator(
    settings: EvaluateSettings, clients: AwsClients | None = None, clock: Clock | None = None
) -> Evaluator:
    clients = clients or AwsClients()
    clock = clock or SystemClock()
    policies = capacity_policies(settings, clients, clock)
    deadline = Deadline()  # the invocation's, shared by its network reads
    groups = node_groups(settings, clients, clock, invocation=deadline)  # read once a batch
    state = DynamoStateStore(
        clients.dynamodb, settings.state_table, audit_ttl=timedelta(days=settings.audit_ttl_days)
    )
    shapes = Ec2InstanceTypes(clients.ec2, clients.autoscaling, clients.eks, clock=clock)
    limits = ClusterLimits(
        settings.cluster_max_nodes, settings.cluster_max_vcpus, settings.cluster_max_memory_gib
    )
    limiter = ClusterLimiter(limits, groups, shapes, state) if limits else None
    shifts = zonal_shifts(settings, clients, clock)
    kubernetes = cluster_view(
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
    setup = Setup(settings.cluster_name, settings.dry_run, settings.backoff_rules, settings.allowed)
    return Evaluator(
        node_groups=groups,
        producers=metric_producers(clients, kubernetes, settings.token_origin_pairs, deadline),
        state=state,
        policies=policies,
        clock=clock,
        setup=setup,
        # scale-in annotations, Ready nodes; the limits; the zones shifted away
        cluster=ClusterSay(kubernetes, limiter, shifts),
        histories=CloudWatchMetricHistory(clients.cloudwatch),  # forecasts from a named metric
        events=scaling_events(settings, clients),
        deadline=deadline,
        drain_hooks=AsgDrainHookKeeper(clients.autoscaling, settings.drain_hook, clock)
        if settings.drain_opted_in_groups
        else None,
    )


def zonal_shifts(
    settings: EvaluateSettings, clients: AwsClients, clock: Clock
) -> ZonalShiftSource | None:
    """ARC's zonal shifts in force on the resources that concern the cluster, read once a
    batch; its client made on the first read. None when no resource concerns it."""
    if not settings.zonal_shift_resources:
        return None
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
    if settings.evaluation_queue_url is None or settings.dead_letter_queue_url is None:
        return None  # Lambda's own retries, then the queue's redrive policy
    clients = clients or AwsClients()
    return SqsRedelivery(clients.sqs, settings.evaluation_queue_url, settings.dead_letter_queue_url)


def cluster_view(
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
    (`domain.scaling.own_pods`, where a connection is set)."""
    deployed = policies.policies.values()
    if not any(p.reads_kubernetes or p.counts_own_pending_pods for p in deployed):
        return None
    connection = kubernetes_connection(settings, clients, clock)
    if connection is None:
        return None  # its metrics read as unavailable: scale-in held (synth refuses this setup)
    # imported only here: an evaluate function whose policies read no cluster never loads
    # the Kubernetes adapters, the pending-pods planner or the expanders (cold starts)
    from nodescaler.adapters.k8s.core_api import KubernetesCluster
    from nodescaler.adapters.k8s.events import KubernetesEvents
    from nodescaler.service.cluster_view import KubernetesClusterView
    from nodescaler.service.pending_pods import PendingPodsPlanner
    from nodescaler.service.unplaced_pod_events import UnplacedPodEvents
    from nodescaler.wiring.expanders import expander_chain

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
        connection,
        timeout_seconds=timeout,
        deadline=deadline,
        buffer_caps=settings.buffer_caps,
        startup=settings.startup,
    )
    events = KubernetesEvents(connection, timeout_seconds=timeout, deadline=deadline)
    return KubernetesClusterView(
        cluster,
        pending=planner,
        waiting=UnplacedPodEvents(events),
        marks=cluster,
        rules=settings.drain_rules,
    )

"""The names nodescaler reports under in CloudWatch: one namespace, the dimensions and every
metric. The functions write them (`observability.reports`); the dashboard and alarms in
`infra` read them, so a name is written once, and synth imports nothing else for it.

Every record's `service` dimension is its deployment's name (infra sets it in each
function's environment), so copies of nodescaler in one account report apart and each
deployment's dashboard and alarms select only its own.
"""

from __future__ import annotations

import os
from enum import StrEnum

NAMESPACE = "Nodescaler"
SERVICE_VARIABLE = "POWERTOOLS_SERVICE_NAME"
SERVICE = "nodescaler"  # the service without a deployment's name (the sandbox, tests)


def service() -> str:
    """The `service` dimension of every record this process writes (Powertools adds it)."""
    return os.environ.get(SERVICE_VARIABLE) or SERVICE


class Dimension(StrEnum):
    POLICY = "Policy"
    NODE_GROUP = "NodeGroup"
    METRIC = "Metric"


class MetricName(StrEnum):
    # per node group
    CURRENT_NODES = "CurrentNodes"
    DESIRED_NODES = "DesiredNodes"
    IN_SERVICE_NODES = "InServiceNodes"
    RECOMMENDED_NODES = "RecommendedNodes"
    FORECAST_NODES = "ForecastNodes"  # a Predictive metric's forecast, acted on or only recorded
    WARM_POOL_NODES = "WarmPoolNodes"  # the warm pool size asked for the forecast's growth
    EVALUATIONS = "Evaluations"
    NODES_ADDED = "NodesAdded"
    NODES_REMOVED = "NodesRemoved"
    DRY_RUN_CHANGES = "DryRunChanges"  # changes a dry-run group would have made
    METRICS_UNAVAILABLE = "MetricsUnavailable"
    REJECTED = "NodeGroupRejected"  # opted in, but a bad tag or an unknown policy
    EVALUATION_ERRORS = "EvaluationErrors"
    DEAD_LETTERED = "DeadLettered"  # requests set aside at once: retrying could not help
    EVALUATION_LATENCY = "EvaluationLatency"  # from the tick or alarm to the decision
    BACKED_OFF = "BackedOff"  # 1 while the group is backed off after a failed scale-up (also
    # service-wide: its maximum says whether any group is)
    LAUNCH_FAILURES = "LaunchFailures"  # launch-failure events for the group
    PROTECTED_NODES = "ProtectedNodes"  # instances protected from scale-in
    PAUSED = "Paused"  # 1 while a pause (`nodescaler pause` or the paused tag) is in force
    # a metric source the deployment does not allow: a bearer token asked for on a server its
    # secret was not deployed for (also service-wide)
    SOURCES_REFUSED = "MetricSourcesRefused"
    PENDING_PODS = "PendingPods"  # pending pods the group's nodes, booting or planned, take
    # 1 when the group was rejected or a metric of its policy unavailable (also service-wide:
    # its maximum says whether any group is)
    UNSERVED = "NodeGroupUnserved"
    # reserved-first: instances the group's capacity reservations hold unused, and 1 when
    # they can't be counted (a reservation that does not exist, can't be read, ...)
    RESERVED_CAPACITY_UNUSED = "ReservedCapacityUnused"
    RESERVATIONS_UNCOUNTED = "ReservationsUncounted"
    # per metric of a node group's policy
    METRIC_USAGE = "MetricUsage"  # the metric against its target, in percent (100 = on target)
    # over all groups (service dimension only), for alarms
    SHORTFALL_NODES = "ShortfallNodes"  # nodes wanted but not in service, the worst group
    EVALUATIONS_QUEUED = "EvaluationsQueued"
    # the cluster's usage as its limits count it (all managed groups), once a batch
    CLUSTER_NODES = "ClusterNodes"
    CLUSTER_VCPUS = "ClusterVcpus"
    CLUSTER_MEMORY_GIB = "ClusterMemoryGiB"
    # the fast path (service-wide): evaluations it brought forward, and what kept it from looking
    FAST_PATH_QUEUED = "FastPathEvaluationsQueued"
    FAST_PATH_FAILURES = "FastPathLookFailures"  # API server or SQS failed: backed off
    FAST_PATH_QUEUES_GONE = "FastPathQueuesGone"  # a policy's queue no longer exists
    MALFORMED_EVENTS = "MalformedEvents"
    STORED_POLICY_READ_FAILURES = "StoredPolicyReadFailures"  # deployed policies served instead
    IGNORED_EVENTS = "IgnoredEvents"  # well-formed, but about a group nodescaler doesn't manage
    UNCONFIRMED_EVENTS = "UnconfirmedEvents"  # refused: AWS's record does not bear them out
    SCALING_EVENTS_NOT_PUT = "ScalingEventsNotPut"  # resizes, backoffs, drains EventBridge missed
    # draining (service-wide, and per node group when the instance's group is known)
    NODES_DRAINED = "NodesDrained"
    PODS_EVICTED = "PodsEvicted"
    DRAIN_TIMEOUTS = "DrainTimeouts"  # pods were still on the node at the deadline
    DRAIN_FAILURES = "DrainFailures"
    DRAIN_SKIPPED = "DrainSkipped"  # the instance had no node in the cluster
    LIFECYCLE_ACTIONS_EXPIRED = "LifecycleActionsExpired"  # too late to heartbeat or complete
    REEVALUATIONS_QUEUED = "ReevaluationsQueued"  # by a Spot warning, for its managed group
    UNMANAGED_INTERRUPTIONS = "UnmanagedInterruptions"  # Spot warnings for no managed group
    # the custom termination policy (service-wide, and per node group)
    INSTANCES_CHOSEN = "InstancesChosen"  # instances nodescaler let go on a scale-in
    INSTANCES_KEPT = "InstancesKept"  # asked for, but their pods would not fit elsewhere
    TERMINATION_LEFT_TO_GROUP = "TerminationLeftToGroup"  # could not tell: the group chose
    # an instance refresh's (or another cause's) least-bad instance, let go past its patience
    TERMINATIONS_FORCED = "TerminationsForced"
    TERMINATION_ERRORS = "TerminationErrors"  # the choice failed: answered none for now
    DRAIN_HOOKS_UNREAD = "DrainHooksUnread"  # whether a group drains unread: its busy node stayed
    # a node with pods to move stayed: its group has no drain hook, so only empty nodes go
    INSTANCES_UNDRAINED = "InstancesUndrained"

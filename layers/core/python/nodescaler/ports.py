"""Every port of the core, once: what the services need from the outside world.

Adapters (`nodescaler.adapters`) implement these with AWS and Kubernetes; the tests' fakes
implement them too. The values that cross them are domain types, named here only for the
type checker, so importing this module loads none of them (the functions' cold starts).
Protocols private to one adapter (a Kubernetes client connection, a page of a list) stay
in that adapter, and the expanders' protocol stays with the expanders in the domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from nodescaler.deadline import Deadline
    from nodescaler.domain.cluster.instance_templates import InstanceShape, NodegroupLabels
    from nodescaler.domain.cluster.snapshot import DisruptionBudget, Node, Pod, Snapshot, Taint
    from nodescaler.domain.groups.node_group import LaunchFailure, NodeGroup, ScalingActivity
    from nodescaler.domain.groups.scaling_events import ScalingEvent
    from nodescaler.domain.groups.zonal_shift import ZonalShifts
    from nodescaler.domain.policy import (
        DemandMetric,
        MetricBase,
        PrometheusSource,
        SqsQueueSource,
    )
    from nodescaler.domain.policy.versions import StoredPolicy
    from nodescaler.domain.scale_down.drain import (
        DrainPod,
        Eviction,
        LifecycleAction,
        LifecycleResult,
        Membership,
    )
    from nodescaler.domain.scale_down.termination_policy import Wait
    from nodescaler.domain.scale_up.backoff import Backoff
    from nodescaler.domain.scaling.decision import Decision
    from nodescaler.domain.scaling.group_state import GroupState
    from nodescaler.domain.scaling.limits import Claims
    from nodescaler.domain.scaling.plan import ChooseLeaving
    from nodescaler.domain.scaling.readings import Reading
    from nodescaler.domain.token_origins import TokenOrigins
    from nodescaler.events.evaluation_request import EvaluationRequest

Sleep = Callable[[float], None]


class Clock(Protocol):
    def now(self) -> datetime: ...


# --- node groups (Auto Scaling, EKS) -----------------------------------------------------


class NodeGroupDiscovery(Protocol):
    def discover(self) -> Sequence[NodeGroup]:
        """Every opted-in group (tag filters applied by the provider where it can)."""
        ...


class NodeGroupLookup(Protocol):
    def get(self, name: str) -> NodeGroup | None: ...


class NodeGroups(NodeGroupDiscovery, NodeGroupLookup, Protocol):
    def set_desired(self, group: NodeGroup, desired: int) -> None: ...

    def failed_launches(self, group: NodeGroup, since: datetime) -> Sequence[LaunchFailure]:
        """Launches that failed since `since` (the provider's record of scaling activities)."""
        ...

    def scaling_activity(self, group: NodeGroup, activity_id: str) -> ScalingActivity | None:
        """The group's scaling activity of that id, or None when it has none."""
        ...

    def protect(self, group: NodeGroup, instance_ids: frozenset[str], protected: bool) -> None:
        """Set or clear these instances' protection from scale-in."""
        ...

    def remove_instances(self, group: NodeGroup, instance_ids: Sequence[str]) -> None:
        """Terminate these instances, each lowering the desired capacity by one."""
        ...

    def size_warm_pool(self, group: NodeGroup, size: int) -> None:
        """Keep exactly `size` pre-initialised instances in the group's warm pool."""
        ...


class InstanceGroups(Protocol):
    def membership(self, instance_id: str) -> Membership | None:
        """The Auto Scaling group the instance is in and its lifecycle state ("InService",
        "Terminating:Wait"), or None when no group has it (any more)."""
        ...


class InstanceMarkets(Protocol):
    def market_of(self, instance_id: str) -> str | None:
        """How EC2 launched the instance ("spot", "on-demand", ...), or None when EC2 has
        no such instance."""
        ...


class InstanceTypes(Protocol):
    """What a group launches, and that instance type's size."""

    def instance_type(self, group: NodeGroup) -> str:
        """Raises `InstanceTypeUnknownError` when nothing says."""
        ...

    def shape(self, instance_type: str) -> InstanceShape: ...

    def nodegroup_labels(self, group: NodeGroup) -> NodegroupLabels | None:
        """An EKS managed node group's labels and taints; None for another group, or when
        EKS can't be read (the node-template tags then stand alone)."""
        ...


class LifecycleActions(Protocol):
    """Auto Scaling's side of a drain: both raise `LifecycleActionExpiredError` for an
    action it no longer holds."""

    def heartbeat(self, action: LifecycleAction) -> None: ...

    def complete(self, action: LifecycleAction, result: LifecycleResult) -> None: ...


class DrainHooks(Protocol):
    def drains(self, group: str) -> bool:
        """Whether the group carries the deployment's terminate hook, so that its nodes are
        drained before their instances go. Raises `DrainHookUnreadError` when Auto Scaling
        could not say."""
        ...


class DrainHookKeeper(Protocol):
    def keep(self, group: NodeGroup) -> bool:
        """The deployment's terminate hook on the group, put there when it is missing;
        whether it was put now. Raises what Auto Scaling raised when it could not say or
        refused the put."""
        ...


# --- metrics ---------------------------------------------------------------------------


class MetricProducer(Protocol):
    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        """A value with its timestamp, or `MetricUnavailable` with the reason."""
        ...


class ProducerContext(Protocol):
    """What a metric type's producer is made of (the wiring's `ProducerContext`): the
    function's AWS clients, made on first use (`wiring.AwsClients`), the origins a bearer
    token may go to, and the invocation's deadline, which no read outlasts."""

    @property
    def clients(self) -> Any: ...
    @property
    def token_origins(self) -> TokenOrigins: ...
    @property
    def deadline(self) -> Deadline | None: ...


# A metric type's producer factory, which its descriptor names by a lazy dotted path.
MakeProducer = Callable[[ProducerContext], MetricProducer]


class MetricHistory(Protocol):
    def datapoints(
        self, metrics: Sequence[DemandMetric], since: datetime, until: datetime
    ) -> Sequence[Sequence[tuple[datetime, float]]]:
        """Each metric's datapoints from `since` up to `until`, one a period, in the order
        asked; raises `MetricHistoryError` naming the metrics and the cause."""
        ...


class QueueBacklogs(Protocol):  # SqsQueueLength; the fast path's look at a queue
    def backlog(self, source: SqsQueueSource) -> int: ...


class PrometheusValues(Protocol):  # PrometheusQueries; the fast path's look at a query
    def query(self, source: PrometheusSource) -> tuple[float, str]: ...


# --- the evaluation queue and the state table --------------------------------------------


class EvaluationQueue(Protocol):
    def send(self, requests: Sequence[EvaluationRequest]) -> None:
        """Queue every request, or raise `QueueSendError` naming the groups left unqueued."""
        ...


class StateStore(Protocol):
    def load(self, group: str) -> GroupState: ...

    def save(
        self,
        state: GroupState,
        *,
        audit: Decision | None = None,
        event_id: str = "",
        backoff_changed: bool = False,
    ) -> GroupState:
        """Write if unchanged since loaded (else `StateConflictError`); returns the new version.
        `backoff_changed` publishes the group's new backoff to the planners too."""
        ...


class TerminationWaits(Protocol):
    """How long a group's termination policy has answered a cause with none (the state
    table); each raises `StateUnavailableError` or `StateCorruptError`."""

    def load(self, group: str, cause: str) -> Wait | None: ...

    def save(self, group: str, cause: str, wait: Wait) -> None: ...

    def clear(self, group: str, cause: str) -> None:
        """The wait is over: an instance went."""
        ...


class ScalingEvents(Protocol):
    """Where the services tell what they did (EventBridge): each event kept until the
    invocation's end, then all put together."""

    def publish(self, event: ScalingEvent) -> None: ...

    def flush(self) -> Sequence[str]:
        """Put every event published since the last flush; returns each one that could not
        be put, and why. Never raises: the scaling the events tell of is done."""
        ...


class PolicyStore(Protocol):
    def heads(self) -> Sequence[StoredPolicy]:
        """Every policy applied with `nodescaler apply`, at its current version."""
        ...


class Backoffs(Protocol):
    def backoffs(self, groups: Sequence[str]) -> Mapping[str, Backoff]:
        """The latest backoff of each of these groups that has one."""
        ...


class ZonalShiftSource(Protocol):
    def in_force(self) -> ZonalShifts:
        """The zonal shifts and autoshifts in force, or why they can't be read."""
        ...


class ClaimLedger(Protocol):
    def load_claims(self) -> Claims: ...

    def save_claims(self, claims: Claims) -> bool:
        """Write if unchanged since `claims.version` was read; False when someone wrote first."""
        ...


# --- the Kubernetes cluster --------------------------------------------------------------


class SnapshotSource(Protocol):
    def snapshot(self) -> Snapshot:
        """Every node and non-terminal pod; raises `KubernetesUnavailableError`."""
        ...


class PodEvents(Protocol):
    def not_trigger_scale_up(self, namespace: str, pod: str, message: str, at: datetime) -> None:
        """A `NotTriggerScaleUp` Event on the pod; raises `KubernetesUnavailableError`."""
        ...


class ClusterView(Protocol):
    """What the cluster says about a group's nodes; None when it can't say now."""

    def protected(self, group: NodeGroup, now: datetime) -> frozenset[str] | None:
        """The group's instances that must not be scaled in."""
        ...

    def ready_nodes(self, group: NodeGroup, now: datetime) -> Sequence[datetime | None] | None:
        """The group's nodes that are Ready: when each turned Ready (its Ready condition's
        lastTransitionTime; None where the API server gave none)."""
        ...

    def leaving(self, group: NodeGroup, now: datetime) -> ChooseLeaving:
        """Its scale-in choice, from the cluster as read now: up to n of its instances a
        scale-in may take, in order (None: the cluster can't say)."""
        ...

    def mark_candidates(
        self,
        group: NodeGroup,
        candidates: frozenset[str],
        now: datetime,
        excess: int = 0,
        rooms: frozenset[str] | None = None,
    ) -> None:
        """Soft-taint the group's nodes in `candidates`, and the `excess` it lets go next
        while more are in service than it desires, and only those; and mark its `rooms`
        (None: leave those marks as they are) as its buffer's room (best effort)."""
        ...

    def shed(self, group: str, count: int) -> None:
        """The group's decision sheds `count` of the unneeded nodes its reading found."""
        ...

    def own_pending_pods(self, group: NodeGroup, now: datetime) -> Reading:
        """The nodes the pending-pods plan gives the group for the pods its nodes would
        take, where its policy has no PendingPods metric (`domain.scaling.own_pods`)."""
        ...

    def listed_since(self, at: datetime) -> None:
        """What it says next is read at `at` or later (a request made at `at` asks about
        what was there then: a listing older than that cannot answer it)."""
        ...


class UnschedulablePods(Protocol):  # KubernetesCluster; the fast path's light read
    def unschedulable_pods(self) -> Mapping[str, Pod]: ...  # by uid

    def nodes(self) -> list[Node]: ...


class Rechecks(Protocol):  # RecheckTimes; the fast path's read of the groups' state
    def rechecks(self, groups: Sequence[str]) -> Mapping[str, datetime]:
        """When each group whose buffer runs short before its next tick asked to be looked
        at again (`domain.ahead.recheck`); `StateUnavailableError` when it can't be read."""
        ...


class NodeMarks(Protocol):
    def mark(self, node: str, taint: Taint, marked: bool) -> None:
        """Add or remove one of nodescaler's soft taints (the deletion candidate's, the
        buffer room's); `KubernetesUnavailableError`."""
        ...


class DrainCluster(Protocol):
    """The Kubernetes side of a drain."""

    def find_node(self, instance_id: str) -> str | None:
        """The name of the node whose spec.providerID ends in /<instance_id>, or None."""
        ...

    def cordon(self, node: str) -> bool:
        """Mark it unschedulable; True if this did (it was schedulable before)."""
        ...

    def uncordon(self, node: str) -> None: ...

    def pods_on(self, node: str) -> Sequence[DrainPod]: ...

    def budgets(self) -> tuple[DisruptionBudget, ...] | None:
        """Every PodDisruptionBudget; None when they cannot be read."""
        ...

    def evict(self, pod: DrainPod, grace_seconds: int) -> Eviction:
        """An eviction through the Eviction API; raises only when the API can't be reached."""
        ...

"""The cluster as nodescaler sees it: compact, immutable views of nodes and pods.

Adapters build these from the API server's JSON, keeping only what decisions need, so a
150,000-pod cluster fits in a Lambda. Quantities are parsed here, in integers: CPU in
millicores, memory in bytes, as the scheduler counts them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol

from nodescaler.domain.cluster.quantity import millicores, parse_quantity, whole_units

# Resources the scheduler counts that are not extended resources a pod must find on a node.
STANDARD_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def is_extended(resource: str) -> bool:
    """nvidia.com/gpu and the like; hugepages are left to the kubelet."""
    return resource not in STANDARD_RESOURCES and not resource.startswith("hugepages-")


def extended_resources(values: Mapping[str, str | int | float]) -> dict[str, int]:
    """The extended resources of a requests/allocatable map, in whole units."""
    return {name: whole_units(amount) for name, amount in values.items() if is_extended(name)}


Quantities = Mapping[str, str | int | float]


def _amounts(requests: Quantities) -> dict[str, int]:
    """CPU in millicores, memory and extended resources in whole units; nothing else."""
    amounts = {}
    for name, amount in requests.items():
        if name == "cpu":
            amounts[name] = millicores(amount)
        elif name == "memory" or is_extended(name):
            amounts[name] = whole_units(amount)
    return amounts


def _add(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, 0) + amount


def pod_requests(
    containers: Iterable[Quantities],
    init_containers: Iterable[tuple[Quantities, bool]],
    overhead: Quantities,
) -> dict[str, int]:
    """What the scheduler reserves for a pod, per resource (cpu in millicores, memory and
    extended resources in units), as Kubernetes counts it: the larger of the app
    containers with the native sidecars (init containers whose restartPolicy is Always,
    given as `(requests, True)`), and each regular init container with the sidecars started
    before it; plus the pod's overhead. Raises `QuantityError` on an unreadable quantity."""
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for requests, sidecar in init_containers:  # in the order the kubelet starts them
        amounts = _amounts(requests)
        if sidecar:
            _add(sidecars, amounts)
            continue
        for name in amounts.keys() | sidecars.keys():
            running = amounts.get(name, 0) + sidecars.get(name, 0)
            init_peak[name] = max(init_peak.get(name, 0), running)
    total = dict(sidecars)
    for requests in containers:
        _add(total, _amounts(requests))
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, 0), amount)
    _add(total, _amounts(overhead))
    return total


# A resource a node's requests are counted in: what a reservation target names (no
# docstring: a policy's JSON schema would carry it)
class ReservationResource(StrEnum):
    CPU = "cpu"
    MEMORY = "memory"
    PODS = "pods"


@dataclass(frozen=True, slots=True)
class Resources:
    """Amounts the scheduler adds up: millicores, bytes, pod slots."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    pods: int = 0

    @classmethod
    def parse(cls, values: Mapping[str, str | int | float], *, pods: int = 0) -> Resources:
        """From a requests/allocatable map; `pods` when the map has no pods entry."""
        cpu = values.get("cpu")
        memory = values.get("memory")
        count = values.get("pods")
        return cls(
            cpu_millis=millicores(cpu) if cpu is not None else 0,
            memory_bytes=whole_units(memory) if memory is not None else 0,
            pods=int(parse_quantity(count)) if count is not None else pods,
        )

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millis + other.cpu_millis,
            self.memory_bytes + other.memory_bytes,
            self.pods + other.pods,
        )

    def __sub__(self, other: Resources) -> Resources:
        """What is left; never below zero."""
        return Resources(
            max(self.cpu_millis - other.cpu_millis, 0),
            max(self.memory_bytes - other.memory_bytes, 0),
            max(self.pods - other.pods, 0),
        )

    def covers(self, other: Resources) -> bool:
        return (
            other.cpu_millis <= self.cpu_millis
            and other.memory_bytes <= self.memory_bytes
            and other.pods <= self.pods
        )

    def max(self, other: Resources) -> Resources:
        return Resources(
            max(self.cpu_millis, other.cpu_millis),
            max(self.memory_bytes, other.memory_bytes),
            max(self.pods, other.pods),
        )

    def of(self, resource: ReservationResource) -> int:
        return {
            ReservationResource.CPU: self.cpu_millis,
            ReservationResource.MEMORY: self.memory_bytes,
            ReservationResource.PODS: self.pods,
        }[resource]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule, PreferNoSchedule, NoExecute


# Cluster Autoscaler's MaxNodeStartupTime (15 minutes): a node with a startup taint counts
# as upcoming that long after its creation, and as a node in trouble after it
MAX_NODE_STARTUP = timedelta(minutes=15)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    group: str | None  # the ASG it belongs to, when known
    ready: bool
    schedulable: bool  # not cordoned
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    provider_id: str = ""  # aws:///<zone>/<instance id> on EC2
    extended: Mapping[str, int] = field(default_factory=dict)  # e.g. nvidia.com/gpu: 4
    scale_down_disabled: bool = False  # annotated so: its instance is protected from scale-in
    ready_since: datetime | None = None  # its Ready condition's lastTransitionTime, when Ready
    # Ready, but a startup taint keeps pods off while an agent starts on it
    # (`domain.cluster.startup_taints`): a node on its way, no room yet
    starting: bool = False
    created: datetime | None = None  # its creationTimestamp: how long it may be starting

    def young(self, now: datetime) -> bool:
        """Created less than `MAX_NODE_STARTUP` ago: a startup taint past it is a node's
        trouble (an agent restarted, or never running), not its start."""
        return self.created is not None and now - self.created < MAX_NODE_STARTUP

    @property
    def usable(self) -> bool:
        """Ready and not still starting: room pods can be placed on now."""
        return self.ready and not self.starting

    @property
    def instance_id(self) -> str:
        return self.provider_id.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node selector requirement of a required node affinity term."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        match self.operator:
            case "In":
                return value in self.values
            case "NotIn":
                return value not in self.values
            case "Exists":
                return value is not None
            case "DoesNotExist":
                return value is None
            case "Gt" | "Lt":
                try:
                    have, bound = int(value or ""), int(self.values[0])
                except (ValueError, IndexError):
                    return False
                return have > bound if self.operator == "Gt" else have < bound
        return False


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty with Exists: tolerates every taint
    operator: str = "Equal"  # Equal, Exists
    value: str = ""
    effect: str = ""  # empty: every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pod may run: what the scheduler checks besides resources."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    # required node affinity: any term may match; all requirements of a term must
    required_terms: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # extended resources it requests (nvidia.com/gpu...): only some nodes have them
    extended_resources: Mapping[str, int] = field(default_factory=dict)
    # what it may share no node with: its own workload's pods under a required pod
    # anti-affinity on the node, or pods asking the same host port (a pod holding one of
    # these keys keeps every other pod holding it off its node)
    apart: frozenset[str] = frozenset()


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    node_name: str | None
    requests: Resources
    phase: str = "Running"
    daemon_set: bool = False
    mirror: bool = False  # a static pod's mirror (kubelet-managed)
    priority: int = 0
    unschedulable: bool = False  # PodScheduled=False, reason Unschedulable
    problem: str | None = None  # why its requests could not be read, if they could not
    placement: Placement | None = None  # what it may run on (shared by a workload's pods)
    not_safe_to_evict: bool = False  # annotated safe-to-evict=false: its node must stay
    labels: Mapping[str, str] = field(default_factory=dict)  # what disruption budgets select
    # What Cluster Autoscaler's drainability rules read (`domain.scale_down.pod_rules`)
    controlled: bool = True  # an ownerReference names its controller
    job: bool = False  # a Job made it: moved, it starts its work again
    local_storage: bool = False  # an emptyDir or hostPath volume
    safe_to_evict: bool = False  # annotated safe-to-evict=true
    gone_after: datetime | None = None  # deleted: taken as gone after this (`deletion_deadline`)
    created: datetime | None = None  # its creationTimestamp (None: unknown, so never "old")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def gone(self, now: datetime) -> bool:
        """Deleted, and past its grace period: neither a request nor a pod to move."""
        return self.gone_after is not None and self.gone_after < now


@dataclass(frozen=True)
class ClusterBuffer:
    """A CapacityBuffer object of the cluster, as read: the virtual pods it asks room for,
    or why it is ignored (`problem`: malformed, never a reason to scale in; `note`: valid,
    but not one nodescaler provisions); `capped`: why it holds fewer pods than it asks."""

    namespace: str
    name: str
    pods: tuple[Pod, ...] = ()
    problem: str | None = None
    note: str | None = None
    capped: str | None = None

    @property
    def label(self) -> str:
        return f"CapacityBuffer {self.namespace}/{self.name}"


class Labelled(Protocol):
    """A pod as a budget selects it: a `Pod`, or the drain's `DrainPod`."""

    @property
    def namespace(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget: the pods it selects, and how many may go now."""

    namespace: str
    name: str
    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()
    disruptions_allowed: int = 0

    def selects(self, pod: Labelled) -> bool:
        """A budget with an empty selector selects every pod of its namespace (policy/v1)."""
        return (
            pod.namespace == self.namespace
            and all(pod.labels.get(k) == v for k, v in self.match_labels.items())
            and all(r.matches(pod.labels) for r in self.match_expressions)
        )


@dataclass(frozen=True)
class Snapshot:
    """The cluster's nodes and non-terminal pods, as listed at one moment, its disruption
    budgets (None: they could not be read, so no eviction can be counted on), its
    CapacityBuffers (`domain.ahead.capacity_buffers`), and a pod of each DaemonSet, as its
    template asks (None: they could not be read)."""

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    budgets: tuple[DisruptionBudget, ...] | None = ()
    buffers: tuple[ClusterBuffer, ...] = ()
    daemon_sets: tuple[Pod, ...] | None = ()

    def at(self, now: datetime) -> Snapshot:
        """Without the pods deleted long enough ago to count as gone at `now`, and with no
        node starting longer than a node may (`MAX_NODE_STARTUP`)."""
        snapshot = self
        if any(n.starting and not n.young(now) for n in self.nodes):
            nodes = tuple(n if n.young(now) else replace(n, starting=False) for n in self.nodes)
            snapshot = replace(snapshot, nodes=nodes)
        if any(p.gone(now) for p in self.pods):
            snapshot = replace(snapshot, pods=tuple(p for p in self.pods if not p.gone(now)))
        return snapshot

    @functools.cached_property
    def pods_by_node(self) -> dict[str, list[Pod]]:
        """Built once, so each group's reading looks at its own nodes' pods only."""
        index: dict[str, list[Pod]] = {}
        for pod in self.pods:
            if pod.node_name is not None:
                index.setdefault(pod.node_name, []).append(pod)
        return index

    @functools.cached_property
    def virtual(self) -> frozenset[str]:
        """The keys of its CapacityBuffers' virtual pods, bound to nodes or pending
        (`with_buffers`): room they hold, not pods that exist."""
        return frozenset(p.key for b in self.buffers for p in b.pods)

    def real(self, pods: Iterable[Pod]) -> list[Pod]:
        """The pods that exist: not its CapacityBuffers' virtual ones, which a scale-in
        moves without an eviction (room held, found again on the nodes that stay)."""
        return [p for p in pods if p.key not in self.virtual]

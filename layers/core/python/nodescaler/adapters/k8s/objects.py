"""The API server's nodes and pods → the core's compact `Node` and `Pod`.

No `kubernetes` model objects: building them for 150,000 pods costs more than the whole
decision. A pod whose requests can't be parsed is kept, with the problem named, so only
the group it runs on loses its reservation reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from nodescaler.adapters.k8s.wire import (
    BudgetWire,
    Condition,
    Container,
    NodeWire,
    PodSpec,
    PodWire,
)
from nodescaler.domain.cluster import (
    DisruptionBudget,
    Node,
    Placement,
    Pod,
    Requirement,
    Resources,
    Taint,
    Toleration,
    extended_resources,
)
from nodescaler.domain.quantity import millicores, whole_units
from nodescaler.errors import QuantityError

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# Cluster Autoscaler's annotations, honoured as it does.
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"


def _condition(conditions: Sequence[Condition], kind: str) -> Condition | None:
    return next((c for c in conditions if c.type == kind), None)


def node_from_wire(wire: NodeWire) -> Node:
    ready = _condition(wire.status.conditions, "Ready")
    try:
        allocatable = Resources.parse(wire.status.allocatable)
        extended = extended_resources(wire.status.allocatable)
    except QuantityError:
        allocatable, extended = Resources(), {}  # counts as no capacity: never as free space
    return Node(
        name=wire.metadata.name,
        group=None,
        ready=ready is not None and ready.status == "True",
        schedulable=not wire.spec.unschedulable,
        allocatable=allocatable,
        labels=wire.metadata.labels,
        taints=tuple(Taint(t.key, t.value, t.effect) for t in wire.spec.taints),
        provider_id=wire.spec.providerID,
        extended=extended,
        scale_down_disabled=wire.metadata.annotations.get(SCALE_DOWN_DISABLED) == "true",
    )


def _requests(container: Container) -> tuple[int, int]:
    requests = container.resources.requests
    cpu, memory = requests.get("cpu"), requests.get("memory")
    return (
        millicores(cpu) if cpu is not None else 0,
        whole_units(memory) if memory is not None else 0,
    )


def pod_requests(spec: PodSpec) -> Resources:
    """What the scheduler reserves: the containers' sum, or the largest init container if
    more, plus the pod overhead; always one pod slot."""
    cpu = memory = init_cpu = init_memory = 0
    for container in spec.containers:
        c, m = _requests(container)
        cpu, memory = cpu + c, memory + m
    for container in spec.initContainers:
        c, m = _requests(container)
        init_cpu, init_memory = max(init_cpu, c), max(init_memory, m)
    overhead = Resources.parse(spec.overhead) if spec.overhead else Resources()
    cpu, memory = max(cpu, init_cpu), max(memory, init_memory)
    return Resources(cpu + overhead.cpu_millis, memory + overhead.memory_bytes, pods=1)


# Pods of one workload share one Placement: a bound pod keeps its own (scale-down asks
# where it could go), at the cost of a reference, not a copy.
_PLACEMENTS: dict[tuple[Any, ...], Placement] = {}
_MAX_PLACEMENTS = 10_000


def shared_placement(spec: PodSpec) -> Placement:
    """`placement_of(spec)`, the same object for the same nodeSelector, affinity,
    tolerations and extended requests."""
    key = (
        tuple(sorted(spec.nodeSelector.items())),
        bytes(spec.affinity),
        bytes(spec.tolerations),
        tuple(sorted(extended_requests(spec).items())),
    )
    found = _PLACEMENTS.get(key)
    if found is None:
        if len(_PLACEMENTS) >= _MAX_PLACEMENTS:  # a bound on a warm container's memory
            _PLACEMENTS.clear()
        found = _PLACEMENTS[key] = placement_of(spec)
    return found


def placement_of(spec: PodSpec) -> Placement:
    """nodeSelector, required node affinity (matchExpressions) and tolerations."""
    affinity: dict[str, Any] = msgspec.json.decode(spec.affinity) or {}
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = tuple(
        tuple(
            Requirement(e["key"], e["operator"], tuple(e.get("values") or ()))
            for e in term.get("matchExpressions") or ()
        )
        for term in required.get("nodeSelectorTerms") or ()
    )
    tolerations = tuple(
        Toleration(
            t.get("key") or "",
            t.get("operator") or "Equal",
            t.get("value") or "",
            t.get("effect") or "",
        )
        for t in msgspec.json.decode(spec.tolerations) or ()
    )
    return Placement(spec.nodeSelector, terms, tolerations, extended_requests(spec))


def extended_requests(spec: PodSpec) -> dict[str, int]:
    """GPUs and other extended resources: the containers' sum, or the largest init one."""
    total: dict[str, int] = {}
    for container in spec.containers:
        for name, amount in extended_resources(container.resources.requests).items():
            total[name] = total.get(name, 0) + amount
    for container in spec.initContainers:
        for name, amount in extended_resources(container.resources.requests).items():
            total[name] = max(total.get(name, 0), amount)
    return total


def pod_from_wire(wire: PodWire) -> Pod:
    metadata, spec, status = wire.metadata, wire.spec, wire.status
    scheduled = _condition(status.conditions, "PodScheduled")
    unschedulable = (
        scheduled is not None
        and scheduled.status == "False"
        and scheduled.reason == "Unschedulable"
    )
    problem, placement = None, None
    try:
        requests = pod_requests(spec)
        placement = shared_placement(spec)
    except QuantityError as error:
        requests, problem = Resources(pods=1), f"resources.requests: {error}"
    return Pod(
        namespace=metadata.namespace,
        name=metadata.name,
        node_name=spec.nodeName or None,
        requests=requests,
        phase=status.phase,
        daemon_set=any(o.kind == "DaemonSet" for o in metadata.ownerReferences),
        mirror=MIRROR_ANNOTATION in metadata.annotations,
        not_safe_to_evict=metadata.annotations.get(SAFE_TO_EVICT) == "false",
        labels=metadata.labels,
        priority=spec.priority,
        unschedulable=unschedulable,
        problem=problem,
        placement=placement,
    )


def node_from_json(obj: Mapping[str, Any]) -> Node:
    """From an already-decoded object (tests, and clients that built one)."""
    return node_from_wire(msgspec.json.decode(msgspec.json.encode(obj), type=NodeWire))


def pod_from_json(obj: Mapping[str, Any]) -> Pod:
    return pod_from_wire(msgspec.json.decode(msgspec.json.encode(obj), type=PodWire))


def budget_from_wire(wire: BudgetWire) -> DisruptionBudget:
    selector = wire.spec.selector
    return DisruptionBudget(
        wire.metadata.namespace,
        wire.metadata.name,
        selector.matchLabels,
        tuple(Requirement(e.key, e.operator, tuple(e.values)) for e in selector.matchExpressions),
        wire.status.disruptionsAllowed,
    )

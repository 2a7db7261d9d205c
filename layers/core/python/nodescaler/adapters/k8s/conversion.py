"""The API server's nodes and pods → the core's compact `Node` and `Pod`.

No `kubernetes` model objects: building them for 150,000 pods costs more than the whole
decision. A pod whose requests can't be parsed is kept, with the problem named, so only
the group it runs on loses its reservation reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import msgspec

from nodescaler.adapters.k8s.json_fields import (
    BudgetWire,
    Condition,
    ContainerPort,
    NodeWire,
    ObjectMeta,
    PodSpec,
    PodStatus,
    PodWire,
    Volume,
)
from nodescaler.domain.cluster.snapshot import (
    DisruptionBudget,
    Node,
    Placement,
    Pod,
    Requirement,
    Resources,
    Taint,
    Toleration,
    extended_resources,
    is_extended,
)
from nodescaler.domain.cluster.snapshot import pod_requests as effective_requests
from nodescaler.domain.cluster.startup_taints import KNOWN, StartupTaints
from nodescaler.domain.outside_text import outside
from nodescaler.domain.scale_down.pod_rules import deletion_deadline
from nodescaler.errors import QuantityError

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# Cluster Autoscaler's annotations, honoured as it does.
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DAEMON_SET_POD = "cluster-autoscaler.kubernetes.io/daemonset-pod"  # "true": one, as CA reads it


_C = TypeVar("_C", bound=Condition)


def _condition(conditions: Sequence[_C], kind: str) -> _C | None:
    return next((c for c in conditions if c.type == kind), None)


def node_from_wire(wire: NodeWire, startup: StartupTaints = KNOWN) -> Node:
    """The node as the autoscaler counts it: one a startup taint keeps pods off is still
    starting (`startup`)."""
    ready = _condition(wire.status.conditions, "Ready")
    is_ready = ready is not None and ready.status == "True"
    try:
        allocatable = Resources.parse(wire.status.allocatable)
        extended = extended_resources(wire.status.allocatable)
    except QuantityError:
        allocatable, extended = Resources(), {}  # counts as no capacity: never as free space
    node = Node(
        name=wire.metadata.name,
        group=None,
        ready=is_ready,
        schedulable=not wire.spec.unschedulable,
        allocatable=allocatable,
        labels=wire.metadata.labels,
        taints=tuple(Taint(t.key, t.value, t.effect) for t in wire.spec.taints),
        provider_id=wire.spec.providerID,
        extended=extended,
        scale_down_disabled=wire.metadata.annotations.get(SCALE_DOWN_DISABLED) == "true",
        ready_since=ready.lastTransitionTime if is_ready and ready is not None else None,
        created=wire.metadata.creationTimestamp,
    )
    return startup.as_counted(node)


def spec_requests(spec: PodSpec) -> dict[str, int]:
    """Every resource the pod's spec requests, as Kubernetes counts it
    (`cluster.pod_requests`: native sidecars, init containers, overhead)."""
    return effective_requests(
        (c.resources.requests for c in spec.containers),
        ((c.resources.requests, c.restartPolicy == "Always") for c in spec.initContainers),
        spec.overhead,
    )


def pod_requests(spec: PodSpec) -> Resources:
    """What the scheduler reserves of CPU and memory; always one pod slot."""
    return _resources(spec_requests(spec))


def _resources(amounts: dict[str, int]) -> Resources:
    return Resources(amounts.get("cpu", 0), amounts.get("memory", 0), pods=1)


# Pods of one workload share one Placement: a bound pod keeps its own (scale-down asks
# where it could go), at the cost of a reference, not a copy.
_PLACEMENTS: dict[tuple[Any, ...], Placement] = {}
_MAX_PLACEMENTS = 10_000


def shared_placement(
    spec: PodSpec, extended: dict[str, int] | None = None, metadata: ObjectMeta | None = None
) -> Placement:
    """`placement_of(spec, metadata)`, the same object for the same nodeSelector,
    affinity, tolerations, extended requests (`extended`, when already counted) and keys
    it may share no node with (`apart_keys`)."""
    extended = extended_requests(spec) if extended is None else extended
    apart = apart_keys(spec, metadata) if metadata is not None else frozenset()
    key = (
        tuple(sorted(spec.nodeSelector.items())),
        bytes(spec.affinity),
        bytes(spec.tolerations),
        tuple(sorted(extended.items())),
        apart,
    )
    found = _PLACEMENTS.get(key)
    if found is None:
        if len(_PLACEMENTS) >= _MAX_PLACEMENTS:  # a bound on a warm container's memory
            _PLACEMENTS.clear()
        found = _PLACEMENTS[key] = replace(placement_of(spec, extended), apart=apart)
    return found


HOSTNAME = "kubernetes.io/hostname"
NONE_APART: frozenset[str] = frozenset()


def apart_keys(spec: PodSpec, metadata: ObjectMeta) -> frozenset[str]:
    """What the pod may share no node with (`Placement.apart`): each host port it asks, and
    each required pod anti-affinity term on the node (`kubernetes.io/hostname`) that
    selects the pod itself, as a workload spread one a node writes it. A term selecting
    other pods only is not read: a new node holds none of them."""
    ports = [bytes(c.ports) for c in spec.containers if b"hostPort" in bytes(c.ports)]
    if not ports and b"podAntiAffinity" not in bytes(spec.affinity):
        return NONE_APART  # most pods: nothing parsed
    keys = {
        f"host port {port.protocol}/{port.hostPort}"
        for listed in ports
        for port in msgspec.json.decode(listed, type=list[ContainerPort])
        if port.hostPort
    }
    for selector, namespaces in _on_the_node(bytes(spec.affinity)):
        if metadata.namespace in (namespaces or (metadata.namespace,)) and _selects(
            selector, metadata.labels
        ):
            keys.add(f"anti-affinity {metadata.namespace}/{msgspec.json.encode(selector)!r}")
    return frozenset(keys)


_ANTI_TERMS: dict[bytes, tuple[tuple[Mapping[str, Any], tuple[str, ...]], ...]] = {}


def _on_the_node(affinity: bytes) -> tuple[tuple[Mapping[str, Any], tuple[str, ...]], ...]:
    """The required pod anti-affinity terms on the node (`kubernetes.io/hostname`) of an
    affinity as sent, each (labelSelector, namespaces): parsed once for a workload's pods."""
    if b"podAntiAffinity" not in affinity:
        return ()
    found = _ANTI_TERMS.get(affinity)
    if found is None:
        if len(_ANTI_TERMS) >= _MAX_PLACEMENTS:  # a bound on a warm container's memory
            _ANTI_TERMS.clear()
        anti = (msgspec.json.decode(affinity).get("podAntiAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or ()
        found = _ANTI_TERMS[affinity] = tuple(
            (term["labelSelector"], tuple(term.get("namespaces") or ()))
            for term in anti
            if term.get("topologyKey") == HOSTNAME and term.get("labelSelector") is not None
        )
    return found


def _selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector's answer for `labels`."""
    expressions = (
        Requirement(e["key"], e["operator"], tuple(e.get("values") or ()))
        for e in selector.get("matchExpressions") or ()
    )
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and all(
        r.matches(labels) for r in expressions
    )


def placement_of(spec: PodSpec, extended: dict[str, int] | None = None) -> Placement:
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
    extended = extended_requests(spec) if extended is None else extended
    return Placement(spec.nodeSelector, terms, tolerations, extended)


def extended_requests(spec: PodSpec) -> dict[str, int]:
    """GPUs and other extended resources, counted as CPU and memory are."""
    return {k: v for k, v in spec_requests(spec).items() if is_extended(k)}


def is_daemon_set_pod(metadata: ObjectMeta) -> bool:
    """Owned by a DaemonSet, or annotated as one (Cluster Autoscaler's daemonset-pod)."""
    return (
        any(o.kind == "DaemonSet" for o in metadata.ownerReferences)
        or metadata.annotations.get(DAEMON_SET_POD) == "true"
    )


# The controllers Cluster Autoscaler counts a pod replicated by, with its default
# --skip-nodes-with-custom-controller-pods (simulator/drainability/rules/replicated/rule.go):
# a pod another controller owns (an operator's custom resource) keeps its node there too.
REPLICATED_KINDS = frozenset({"ReplicationController", "Job", "ReplicaSet", "StatefulSet"})


def is_controlled(metadata: ObjectMeta) -> bool:
    """A controller Cluster Autoscaler knows (`REPLICATED_KINDS`) made it, and will remake it:
    what a scale-in may move."""
    return any(o.controller and o.kind in REPLICATED_KINDS for o in metadata.ownerReferences)


def is_job(metadata: ObjectMeta) -> bool:
    """A Job controls it (a KEDA ScaledJob's worker, a batch task): evicted, it starts its
    work again."""
    return any(o.controller and o.kind == "Job" for o in metadata.ownerReferences)


def has_controller(metadata: ObjectMeta) -> bool:
    """Any controller made it, and will remake it: what a drain evicts from a node that is
    going anyway (a Spot interruption, a rebalance), rather than let it die with the node.
    A scale-in never chose that node for an unknown controller's pod (`is_controlled`)."""
    return any(o.controller for o in metadata.ownerReferences)


def has_local_storage(volumes: list[Volume]) -> bool:
    """An emptyDir or hostPath volume: data that goes with the node (Cluster Autoscaler's
    HasLocalStorage)."""
    return any(v.emptyDir is not None or v.hostPath is not None for v in volumes)


def unschedulable(status: PodStatus) -> bool:
    """PodScheduled=False, reason Unschedulable: the scheduler found no node for the pod."""
    scheduled = _condition(status.conditions, "PodScheduled")
    if scheduled is None:
        return False
    return scheduled.status == "False" and scheduled.reason == "Unschedulable"


def pod_from_wire(wire: PodWire) -> Pod:
    metadata, spec, status = wire.metadata, wire.spec, wire.status
    problem, placement = None, None
    try:
        amounts = spec_requests(spec)
        requests = _resources(amounts)
        extended = {k: v for k, v in amounts.items() if is_extended(k)}
        placement = shared_placement(spec, extended, metadata)
    except QuantityError as error:
        requests, problem = Resources(pods=1), f"resources.requests: {error}"
    except (KeyError, TypeError, AttributeError, msgspec.MsgspecError) as error:
        # where it may run is unknown: left to its owner, as a pod that can't be sized
        problem = f"spec.affinity or a container's ports: not as the API sends them ({error!r})"
        problem = outside(problem, 300)
    return Pod(
        namespace=metadata.namespace,
        name=metadata.name,
        node_name=spec.nodeName or None,
        requests=requests,
        phase=status.phase,
        daemon_set=is_daemon_set_pod(metadata),
        mirror=MIRROR_ANNOTATION in metadata.annotations,
        not_safe_to_evict=metadata.annotations.get(SAFE_TO_EVICT) == "false",
        safe_to_evict=metadata.annotations.get(SAFE_TO_EVICT) == "true",
        controlled=is_controlled(metadata),
        job=is_job(metadata),
        local_storage=has_local_storage(spec.volumes),
        gone_after=deletion_deadline(
            metadata.deletionTimestamp, spec.terminationGracePeriodSeconds
        ),
        created=metadata.creationTimestamp,
        labels=metadata.labels,
        priority=spec.priority,
        unschedulable=unschedulable(status),
        problem=problem,
        placement=placement,
    )


def node_from_json(obj: Mapping[str, Any], startup: StartupTaints = KNOWN) -> Node:
    """From an already-decoded object (tests, and clients that built one)."""
    return node_from_wire(msgspec.json.decode(msgspec.json.encode(obj), type=NodeWire), startup)


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

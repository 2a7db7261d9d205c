"""The cluster's own capacity buffers: Kubernetes' CapacityBuffer objects (autoscaling.x-k8s.io).

An application team asks for room in its namespace: N pods of a PodTemplate's shape,
capped by `limits`. As Cluster Autoscaler does, each becomes that many virtual pods: those
that fit the free room of a Ready node are bound to it (its room is taken, and a scale-in
must find them another), the rest are pending, placed by the same expander chain as real
pending pods. A buffer nodescaler cannot read is named and ignored, and is doubt: no
reading that holds one sheds a node.

Anyone who may create a CapacityBuffer in one namespace writes these objects, so every
field is outside text: a quantity or count nodescaler cannot use is that buffer's named
problem (its namespace/name and field), never an error that fails the evaluation; and
the pods a buffer, and all buffers together, may ask room for are capped
(`limits.BufferCaps`), the cap named in the decision when it binds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from nodescaler.domain.cluster.predicates import NodeTemplate, place, room_of
from nodescaler.domain.cluster.quantity import parse_quantity
from nodescaler.domain.cluster.snapshot import ClusterBuffer, Pod, Snapshot
from nodescaler.domain.outside_text import outside
from nodescaler.domain.scaling.limits import BufferCaps
from nodescaler.errors import QuantityError

GROUP = "autoscaling.x-k8s.io"
VERSION = "v1alpha1"  # what Cluster Autoscaler 1.34 and Karpenter 1.14 read
API_VERSION = f"{GROUP}/{VERSION}"
MAX_PROBLEM = 300  # of a buffer's problem: room for the names and values it quotes
ACTIVE = "buffer.x-k8s.io/active-capacity"  # the one strategy that provisions nodes
INT32 = 2**31 - 1  # the CRD's replicas and percentage are int32s


class _MalformedError(ValueError):
    pass


@dataclass(frozen=True)
class Workload:
    """A Deployment a buffer's scalableRef names: its replicas, and its pods' shape."""

    replicas: int
    template: Pod


def read_buffer(
    obj: Mapping[str, Any],
    templates: Mapping[tuple[str, str], Pod],
    workloads: Mapping[tuple[str, str], Workload] | None = None,
    most: int = BufferCaps.per_buffer,
) -> ClusterBuffer:
    """A CapacityBuffer object, with the PodTemplates and Deployments of the cluster by
    (namespace, name); at most `most` of the pods it asks for."""
    if not isinstance(obj, Mapping):
        return ClusterBuffer("?", "?", problem=f"not an object: {outside(repr(obj), 60)}")
    metadata, spec = _mapping(obj.get("metadata")), _mapping(obj.get("spec"))
    namespace = outside(metadata.get("namespace", "default"), 63)
    name = outside(metadata.get("name", "?"), 253)
    strategy = spec.get("provisioningStrategy") or ACTIVE
    try:
        template, scaled = _template(obj, spec, namespace, templates, workloads or {})
        count = _count(spec, template, scaled)
    except _MalformedError as error:  # it may quote the buffer's own text: bounded, inert
        return ClusterBuffer(namespace, name, problem=outside(error, MAX_PROBLEM))
    except Exception as error:  # outside text no rule above foresaw: this buffer's, named
        return ClusterBuffer(namespace, name, problem=f"unreadable: {outside(error)}")
    if strategy != ACTIVE:
        return ClusterBuffer(
            namespace, name, note=f"provisioningStrategy {outside(strategy)} is not {ACTIVE}"
        )
    return _with_pods(ClusterBuffer(namespace, name), template, count, most)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _with_pods(buffer: ClusterBuffer, template: Pod, count: int, most: int) -> ClusterBuffer:
    """The buffer with `count` pods of the template's shape, or `most` (the cap, named)."""
    held = min(count, most)
    pods = tuple(
        # controlled: a workload's pod, which a scale-in may move like any other
        replace(
            template, namespace=buffer.namespace, name=f"{buffer.name}-buffer-{n}", controlled=True
        )
        for n in range(held)
    )
    capped = f"{count:,} asked, at most {most:,} a buffer" if held < count else None
    return replace(buffer, pods=pods, capped=capped)


def _template(
    obj: Mapping[str, Any],
    spec: Mapping[str, Any],
    namespace: str,
    templates: Mapping[tuple[str, str], Pod],
    workloads: Mapping[tuple[str, str], Workload],
) -> tuple[Pod, int | None]:
    """The buffer's pod, and the replicas of the workload it scales (if it scales one)."""
    version = obj.get("apiVersion", API_VERSION)
    if version != API_VERSION:
        raise _MalformedError(f"apiVersion {version} is not one nodescaler reads ({API_VERSION})")
    if spec.get("replicas") is not None and spec.get("percentage") is not None:
        raise _MalformedError("spec.replicas and spec.percentage are both set: give one")
    template_ref, scalable_ref = spec.get("podTemplateRef"), spec.get("scalableRef")
    if template_ref and scalable_ref:
        raise _MalformedError("spec.podTemplateRef and spec.scalableRef are both set: give one")
    if scalable_ref:
        workload = _workload(scalable_ref, namespace, workloads)
        return workload.template, workload.replicas
    if not isinstance(template_ref, Mapping) or not template_ref.get("name"):
        raise _MalformedError("spec.podTemplateRef.name is not set")
    if spec.get("percentage") is not None:
        raise _MalformedError("spec.percentage applies to a scalableRef only")
    found = templates.get((namespace, str(template_ref["name"])))
    if found is None:
        raise _MalformedError(f"PodTemplate {namespace}/{template_ref['name']} does not exist")
    if found.problem:
        raise _MalformedError(f"PodTemplate {namespace}/{template_ref['name']}: {found.problem}")
    return found, None


def _workload(ref: Any, namespace: str, workloads: Mapping[tuple[str, str], Workload]) -> Workload:
    if not isinstance(ref, Mapping) or (ref.get("apiGroup"), ref.get("kind")) != (
        "apps",
        "Deployment",
    ):
        kind = ref.get("kind") if isinstance(ref, Mapping) else ref
        raise _MalformedError(
            f"spec.scalableRef: {kind!r}: nodescaler reads an apps Deployment only"
        )
    found = workloads.get((namespace, str(ref.get("name"))))
    if found is None:
        raise _MalformedError(f"Deployment {namespace}/{ref.get('name')} does not exist")
    if found.template.problem:
        raise _MalformedError(f"Deployment {namespace}/{ref.get('name')}: {found.template.problem}")
    return found


def _count(spec: Mapping[str, Any], template: Pod, scaled: int | None) -> int:
    """The pods asked for: `replicas` (or `percentage` of the `scaled` workload's, rounded
    up, at least 1), capped by what `limits` hold (or as many as they hold, when neither
    is given)."""
    replicas = _whole(spec, "replicas")
    if (percentage := _whole(spec, "percentage")) is not None:
        replicas = max(1, -(-(scaled or 0) * percentage // 100))
    limits = spec.get("limits")
    if replicas is None and not limits:
        raise _MalformedError("neither spec.replicas nor spec.percentage nor spec.limits is set")
    held = _held(limits, template) if limits else None
    if replicas is None and held is None:
        raise _MalformedError(
            "spec.limits limit nothing the pod template requests, and neither spec.replicas "
            "nor spec.percentage is set"
        )
    return min(c for c in (replicas, held) if c is not None)


def _whole(spec: Mapping[str, Any], field: str) -> int | None:
    """`spec.<field>`, a whole number of 0 to 2^31-1 (the CRD's int32), or unset."""
    value = spec.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32:
        shown = outside(repr(value), 60) if not isinstance(value, int) else _digits(value)
        raise _MalformedError(f"spec.{field}: {shown} is not a whole number from 0 to {INT32}")
    return value


def _digits(value: int) -> str:
    """An int as an error quotes it: a million digits are slow to print, and no use."""
    bits = abs(value).bit_length()
    return str(value) if bits <= 64 else f"a number of {bits} bits"


def _held(limits: Any, template: Pod) -> int | None:
    """How many of the template's pods the limits hold, by cpu, memory and the extended
    resources it requests, counted exactly (in millicores, bytes and units, as the
    template's requests are); None when they limit nothing it requests (a limit on a
    resource the pod does not use holds any number of them)."""
    if not isinstance(limits, Mapping):
        raise _MalformedError("spec.limits is not a map of resources")
    extended = template.placement.extended_resources if template.placement else {}
    asked = {
        "cpu": template.requests.cpu_millis,
        "memory": template.requests.memory_bytes,
        **extended,
    }
    counts = []
    for resource, amount in limits.items():
        try:
            limit = Fraction(parse_quantity(amount))
        except QuantityError as error:
            raise _MalformedError(f"spec.limits.{outside(resource, 63)}: {error}") from None
        if asked.get(resource):
            scale = 1000 if resource == "cpu" else 1
            counts.append(int(limit * scale // asked[resource]))
    return min(counts, default=None)


def within(buffers: Sequence[ClusterBuffer], total: int) -> tuple[ClusterBuffer, ...]:
    """The buffers with at most `total` pods among them, shared max-min fairly (a buffer
    asking less than an equal share keeps all it asks; the rest share what is left), so
    neither a large buffer nor many small ones crowd out the others; each cut is named."""
    asked = {id(b): len(b.pods) for b in buffers}
    if sum(asked.values()) <= total:
        return tuple(buffers)
    share: dict[int, int] = {}
    left, waiting = total, sorted(buffers, key=lambda b: (asked[id(b)], b.namespace, b.name))
    for index, buffer in enumerate(waiting):
        share[id(buffer)] = min(asked[id(buffer)], left // (len(waiting) - index))
        left -= share[id(buffer)]
    said = f"all buffers together hold at most {total:,}"
    return tuple(
        b
        if share[id(b)] == asked[id(b)]
        else replace(
            b,
            pods=b.pods[: share[id(b)]],
            capped=f"{b.capped}; {said}" if b.capped else f"{asked[id(b)]:,} asked, {said}",
        )
        for b in buffers
    )


def with_buffers(snapshot: Snapshot) -> Snapshot:
    """The snapshot with its buffers' virtual pods: bound to the Ready nodes whose free
    room holds them, pending (unschedulable) for the rest."""
    if not any(b.pods for b in snapshot.buffers):
        return snapshot
    by_node = snapshot.pods_by_node
    rooms = {
        n.name: room_of(n, by_node.get(n.name, ()))
        for n in snapshot.nodes
        if n.usable and n.schedulable
    }
    settled = tuple(
        replace(b, pods=tuple(_bound(pod, rooms) for pod in b.pods)) for b in snapshot.buffers
    )
    virtual = [p for b in settled for p in b.pods]
    return replace(snapshot, pods=(*snapshot.pods, *virtual), buffers=settled)


def _bound(pod: Pod, rooms: dict[str, NodeTemplate]) -> Pod:
    """The pod on the first node with room for it (that room taken), else pending."""
    taken, stranded = place([pod], rooms)
    if stranded:
        return replace(pod, node_name=None, phase="Pending", unschedulable=True)
    node, room = next(iter(taken.items()))
    rooms[node] = room
    return replace(pod, node_name=node, phase="Running", unschedulable=False)


def is_buffer_pod(pod: Pod, buffer: ClusterBuffer) -> bool:
    return pod.namespace == buffer.namespace and pod.name.startswith(f"{buffer.name}-buffer-")


def describe(buffer: ClusterBuffer, taken: Mapping[str, Sequence[Pod]]) -> str:
    """One clause: what the buffer asks, and where its pods went (or why it is ignored),
    for a buffer `with_buffers` settled; `taken`: the plan's pending pods by group."""
    if buffer.problem:
        return f"{buffer.label} ignored: {buffer.problem}"
    if buffer.note:
        return f"{buffer.label} ignored: {buffer.note}"
    fit = sum(1 for p in buffer.pods if p.node_name is not None)
    where = [
        f"{group} {n}"
        for group, pods in sorted(taken.items())
        if (n := sum(1 for p in pods if is_buffer_pod(p, buffer)))
    ]
    pending = len(buffer.pods) - fit
    went = f" ({', '.join(where)})" if where else ""
    capped = f" (capped: {buffer.capped})" if buffer.capped else ""
    return (
        f"{buffer.label}: {len(buffer.pods)} pods{capped}, {fit} in free room, "
        f"{pending} pending{went}"
    )


def describe_all(
    buffers: Sequence[ClusterBuffer], taken: Mapping[str, Sequence[Pod]], shown: int = 5
) -> str:
    """`describe` for the buffers a decision names: its problems first (they hold scale-in),
    then the capped, then the rest; at most `shown`, and how many more."""
    ordered = sorted(buffers, key=lambda b: (b.problem is None, b.capped is None))
    clauses = [describe(b, taken) for b in ordered[:shown]]
    if (more := len(ordered) - shown) > 0:
        clauses.append(f"and {more:,} more CapacityBuffers")
    return "; ".join(clauses)

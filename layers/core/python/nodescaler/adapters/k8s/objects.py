"""The API server's JSON → the core's compact `Node` and `Pod`, keeping only what we use.

No `kubernetes` model objects: building them for 150,000 pods costs more than the whole
decision. A pod whose requests can't be parsed is kept, with the problem named, so only
the group it runs on loses its reservation reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodescaler.domain.cluster import (
    Node,
    Placement,
    Pod,
    QuantityError,
    Requirement,
    Resources,
    Taint,
    Toleration,
)
from nodescaler.ports import NodeGroup

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


def belongs(node: Node, group: NodeGroup) -> bool:
    """By the EKS node group label, else by the node's instance being one of the ASG's."""
    label = node.labels.get(EKS_NODEGROUP_LABEL)
    if label is not None and group.eks_nodegroup is not None:
        return label == group.eks_nodegroup
    return node.instance_id in group.instance_ids


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for condition in obj.get("status", {}).get("conditions") or ():
        if condition.get("type") == kind:
            return condition  # type: ignore[no-any-return]
    return None


def node_from_json(obj: Mapping[str, Any]) -> Node:
    metadata, spec, status = obj["metadata"], obj.get("spec", {}), obj.get("status", {})
    ready = _condition(obj, "Ready")
    try:
        allocatable = Resources.parse(status.get("allocatable") or {})
    except QuantityError:
        allocatable = Resources()  # counts as no capacity: never as free space
    return Node(
        name=metadata["name"],
        group=None,
        ready=bool(ready and ready.get("status") == "True"),
        schedulable=not spec.get("unschedulable", False),
        allocatable=allocatable,
        labels=metadata.get("labels") or {},
        taints=tuple(
            Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
            for t in spec.get("taints") or ()
        ),
        provider_id=spec.get("providerID", ""),
    )


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """What the scheduler reserves: the containers' sum, or the largest init container if
    more, plus the pod overhead; always one pod slot."""
    containers = Resources(pods=1)
    for container in spec.get("containers") or ():
        requests = (container.get("resources") or {}).get("requests") or {}
        containers = containers + Resources.parse(requests)
    init = Resources()
    for container in spec.get("initContainers") or ():
        requests = (container.get("resources") or {}).get("requests") or {}
        init = init.max(Resources.parse(requests))
    return containers.max(init) + Resources.parse(spec.get("overhead") or {})


def placement_from_json(spec: Mapping[str, Any]) -> Placement:
    """nodeSelector, required node affinity (matchExpressions) and tolerations."""
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = tuple(
        tuple(
            Requirement(e["key"], e["operator"], tuple(e.get("values") or ()))
            for e in term.get("matchExpressions") or ()
        )
        for term in affinity.get("nodeSelectorTerms") or ()
    )
    tolerations = tuple(
        Toleration(
            t.get("key") or "",
            t.get("operator") or "Equal",
            t.get("value") or "",
            t.get("effect") or "",
        )
        for t in spec.get("tolerations") or ()
    )
    return Placement(spec.get("nodeSelector") or {}, terms, tolerations)


def pod_from_json(obj: Mapping[str, Any]) -> Pod:
    metadata, spec, status = obj["metadata"], obj.get("spec", {}), obj.get("status", {})
    scheduled = _condition(obj, "PodScheduled")
    unschedulable = bool(
        scheduled
        and scheduled.get("status") == "False"
        and scheduled.get("reason") == "Unschedulable"
    )
    problem = None
    try:
        requests = pod_requests(spec)
    except QuantityError as error:
        requests, problem = Resources(pods=1), f"resources.requests: {error}"
    return Pod(
        namespace=metadata.get("namespace", "default"),
        name=metadata["name"],
        node_name=spec.get("nodeName") or None,
        requests=requests,
        phase=status.get("phase", "Pending"),
        daemon_set=any(o.get("kind") == "DaemonSet" for o in metadata.get("ownerReferences") or ()),
        mirror=MIRROR_ANNOTATION in (metadata.get("annotations") or {}),
        priority=int(spec.get("priority") or 0),
        unschedulable=unschedulable,
        problem=problem,
        # only pending pods need it; bound ones would cost memory for nothing
        placement=placement_from_json(spec) if unschedulable else None,
    )

"""The parts of the API server's Node and Pod JSON that nodescaler reads, and nothing else.

msgspec decodes a page straight into these, skipping every other field without building
it; at 150,000 pods, building whole dicts was most of the time and memory. Affinity and
tolerations stay raw until a pod turns out to be pending. The structs hold no cycles, so
the garbage collector need not track them (`gc=False`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec

Quantities = dict[str, str | int | float]
NULL = msgspec.Raw(b"null")


class Condition(msgspec.Struct, frozen=True, gc=False):
    type: str
    status: str = ""
    reason: str = ""


class NodeCondition(Condition, frozen=True, gc=False):
    """A node's condition, with when it last changed (its Ready: when it turned Ready).
    Pods' conditions skip the time: parsing it for 150,000 pods costs what it tells none."""

    lastTransitionTime: datetime | None = None  # noqa: N815  (the API's name)


class OwnerReference(msgspec.Struct, frozen=True, gc=False):
    kind: str = ""
    controller: bool = False  # the owner that manages it: a pod's workload


class ObjectMeta(msgspec.Struct, frozen=True, gc=False):
    name: str
    namespace: str = "default"
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    ownerReferences: list[OwnerReference] = []  # noqa: N815  (the API's name)
    deletionTimestamp: datetime | None = None  # noqa: N815
    # What a kube-system pod's drain timeout counts from; the API server always writes it,
    # with its zone (a time without one is refused, as any field of the wrong type).
    creationTimestamp: Annotated[datetime, msgspec.Meta(tz=True)] | None = None  # noqa: N815


class ListMeta(msgspec.Struct, frozen=True, gc=False):
    next: str = msgspec.field(default="", name="continue")


class TaintWire(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: str = ""
    effect: str = "NoSchedule"


class NodeSpec(msgspec.Struct, frozen=True, gc=False):
    unschedulable: bool = False
    taints: list[TaintWire] = []
    providerID: str = ""  # noqa: N815


class NodeStatus(msgspec.Struct, frozen=True, gc=False):
    allocatable: Quantities = {}
    conditions: list[NodeCondition] = []


class NodeWire(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


class ResourceRequirements(msgspec.Struct, frozen=True, gc=False):
    requests: Quantities = {}


class ContainerPort(msgspec.Struct, frozen=True, gc=False):
    hostPort: int = 0  # noqa: N815  (0: none; one pod a node may hold it)
    protocol: str = "TCP"


class Container(msgspec.Struct, frozen=True, gc=False):
    resources: ResourceRequirements = ResourceRequirements()
    restartPolicy: str = ""  # noqa: N815  (Always on an init container: a native sidecar)
    ports: msgspec.Raw = NULL  # decoded only where it names a hostPort (`list[ContainerPort]`)


class Volume(msgspec.Struct, frozen=True, gc=False):
    """Only whether it is node-local storage, as Cluster Autoscaler asks."""

    emptyDir: dict[str, Any] | None = None  # noqa: N815
    hostPath: dict[str, Any] | None = None  # noqa: N815


class PodSpec(msgspec.Struct, frozen=True, gc=False):
    nodeName: str = ""  # noqa: N815
    volumes: list[Volume] = []
    terminationGracePeriodSeconds: int | None = None  # noqa: N815
    containers: list[Container] = []
    initContainers: list[Container] = []  # noqa: N815
    overhead: Quantities = {}
    priority: int = 0
    nodeSelector: dict[str, str] = {}  # noqa: N815
    affinity: msgspec.Raw = NULL
    tolerations: msgspec.Raw = NULL


class PodStatus(msgspec.Struct, frozen=True, gc=False):
    phase: str = "Pending"
    conditions: list[Condition] = []


class PodWire(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


# The drain reads a little more of a pod than the metrics do, for the few pods of one node.


class EvictedObjectMeta(ObjectMeta, frozen=True, gc=False):
    uid: str = ""  # a pod recreated under the same name is another pod


class EvictedPodSpec(msgspec.Struct, frozen=True, gc=False):
    terminationGracePeriodSeconds: int | None = None  # noqa: N815
    volumes: list[Volume] = []


class EvictedPod(msgspec.Struct, frozen=True, gc=False):
    metadata: EvictedObjectMeta
    spec: EvictedPodSpec = EvictedPodSpec()
    status: PodStatus = PodStatus()


class NodeList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[NodeWire] = []


class PodList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[PodWire] = []


class UnboundPod(msgspec.Struct, frozen=True, gc=False):
    """The fast path's pod: who it is, what it asks of a node (which groups could take
    it), and whether the scheduler found it no node."""

    metadata: EvictedObjectMeta
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class UnboundPodList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[UnboundPod] = []


class EvictedPodList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[EvictedPod] = []


class LabelSelectorRequirement(msgspec.Struct, frozen=True, gc=False):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(msgspec.Struct, frozen=True, gc=False):
    matchLabels: dict[str, str] = {}  # noqa: N815
    matchExpressions: list[LabelSelectorRequirement] = []  # noqa: N815


class BudgetSpec(msgspec.Struct, frozen=True, gc=False):
    selector: LabelSelector = LabelSelector()


class BudgetStatus(msgspec.Struct, frozen=True, gc=False):
    disruptionsAllowed: int = 0  # noqa: N815


class BudgetWire(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta
    spec: BudgetSpec = BudgetSpec()
    status: BudgetStatus = BudgetStatus()


class BudgetList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[BudgetWire] = []


# The cluster's CapacityBuffers, kept whole (few, small, read by `domain.ahead.capacity_buffers`),
# and the PodTemplates they refer to.


class CapacityBufferList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[dict[str, Any]] = []


class TemplateMeta(msgspec.Struct, frozen=True, gc=False):
    labels: dict[str, str] = {}


class PodTemplateSpec(msgspec.Struct, frozen=True, gc=False):
    metadata: TemplateMeta = TemplateMeta()
    spec: PodSpec = PodSpec()


class PodTemplateWire(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta
    template: PodTemplateSpec = PodTemplateSpec()


class PodTemplateList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[PodTemplateWire] = []


class DeploymentSpec(msgspec.Struct, frozen=True, gc=False):
    replicas: int = 1  # the API's default
    template: PodTemplateSpec = PodTemplateSpec()


class DeploymentWire(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta
    spec: DeploymentSpec = DeploymentSpec()


class DeploymentList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[DeploymentWire] = []


class DaemonSetSpec(msgspec.Struct, frozen=True, gc=False):
    template: PodTemplateSpec = PodTemplateSpec()


class DaemonSetWire(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta
    spec: DaemonSetSpec = DaemonSetSpec()


class DaemonSetList(msgspec.Struct, frozen=True, gc=False):
    metadata: ListMeta = ListMeta()
    items: list[DaemonSetWire] = []

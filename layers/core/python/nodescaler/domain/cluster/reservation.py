"""Capacity reservation: how much of a group's schedulable capacity its pods have requested.

The reference design's signal: the sum of the requests of the non-terminal pods bound to
the group's Ready, schedulable nodes, over those nodes' allocatable. Cordoned and
NotReady nodes count on neither side, so draining a node does not look like free space.
The pending pods the group's room is to take (the pending-pods plan's, on its nodes on
their way or planned) count as requested too: a ramp fills each node as it comes, and
full nodes alone read about 89 %, so the reservation would ask one node at a time while
pods wait (the reference design's "pod fails to schedule" edge case, from the other side).
Two departures, both for room a new pod can use: a node's last sliver, too small for the
group's average pod, counts as taken; and room held by pods below the group's expendable
cutoff counts as free (the group's pods take it by preemption).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from nodescaler.domain.cluster.snapshot import Node, Pod, Snapshot
from nodescaler.domain.cluster.snapshot import ReservationResource as Resource
from nodescaler.domain.groups.node_group import NodeGroup, belongs
from nodescaler.domain.policy import CapacityReservationMetric, TargetType
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading
from nodescaler.errors import ReservationError

_UNITS = {
    Resource.CPU: (1000, "cores"),
    Resource.MEMORY: (2**30, "GiB"),
    Resource.PODS: (1, "pods"),
}


@dataclass(frozen=True)
class Reservation:
    resource: Resource
    requested: int  # millicores, bytes or pod slots
    allocatable: int
    nodes: int
    pods: int
    waiting: int = 0  # of `pods`, those pending for the group's room (counted in `requested`)
    per_pod: float | None = None  # its average pod's request, DaemonSets' and mirror pods aside
    stranded: int = 0  # the room of nodes with none for another of its pods, counted taken
    full: int = 0  # those nodes
    smallest: int | None = None  # its smallest pod's request, the measure of that room

    @property
    def percent(self) -> float | None:
        taken = self.requested + self.stranded
        return 100 * taken / self.allocatable if self.allocatable else None

    @property
    def amount(self) -> float:
        """The requests, and the room no pod fits, in natural units: cores, GiB, pods."""
        return (self.requested + self.stranded) / _UNITS[self.resource][0]

    @property
    def detail(self) -> str:
        scale, unit = _UNITS[self.resource]
        share = f" ({self.percent:.1f}%)" if self.percent is not None else ""
        waiting = f" ({self.waiting} waiting for its room)" if self.waiting else ""
        full = ""
        if self.full and self.smallest is not None:
            size = float(f"{self.smallest / scale:.3g}")
            pod = f"{size:g} {'core' if unit == 'cores' and size == 1 else unit}"
            least = f"(the least asks {pod})"
            full = f", {self.full} with no room for another of its pods {least}, counted full"
        return (
            f"{self.pods} pods{waiting} request {self.requested / scale:g} of "
            f"{self.allocatable / scale:g} {unit} on {self.nodes} nodes{full}{share}"
        )


def reservation(
    group: str,
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    resource: Resource,
    *,
    include_daemon_sets: bool = True,
    include_mirror_pods: bool = True,
    waiting: Iterable[Pod] = (),
    expendable: int | None = None,
) -> Reservation:
    """`waiting`: pending pods the group's room is to take, requested as if bound.
    `expendable`: the priority below which a pod's room counts as free (a pod of the
    group's takes it by preemption, and a reservation that counted it taken would buy
    nodes for pods that may wait, which then fill them too), where the group runs a pod
    at or above it to take it: a cutoff above all its pods leaves none out."""
    counted = {n.name: n for n in nodes if n.group == group and n.usable and n.schedulable}
    pods = list(pods)
    if expendable is not None and any(_takes(p, expendable) for p in pods):
        pods = [p for p in pods if p.priority >= expendable]
    bound = [
        pod
        for pod in pods
        if pod.node_name in counted
        and not pod.terminal
        and not (pod.daemon_set and not include_daemon_sets)
        and not (pod.mirror and not include_mirror_pods)
    ]
    waited = list(waiting)
    requested = workload = workload_pods = 0
    for pod in (*bound, *waited):
        if pod.problem is not None:
            raise ReservationError(f"node group {group}: pod {pod.key}: {pod.problem}")
        requested += pod.requests.of(resource)
        if not (pod.daemon_set or pod.mirror):  # one a node: no new pod is shaped so
            workload, workload_pods = workload + pod.requests.of(resource), workload_pods + 1
    allocatable = sum(n.allocatable.of(resource) for n in counted.values())
    pods_counted = len(bound) + len(waited)
    per_pod = workload / workload_pods if workload_pods else None
    made = Reservation(
        resource, requested, allocatable, len(counted), pods_counted, len(waited), per_pod
    )
    return _with_stranded(made, counted.values(), pods)


def _takes(pod: Pod, expendable: int) -> bool:
    """A pod of the group's workload at or above the cutoff: one that preempts below it."""
    return not (pod.daemon_set or pod.mirror or pod.terminal) and pod.priority >= expendable


def _with_stranded(made: Reservation, nodes: Iterable[Node], pods: Sequence[Pod]) -> Reservation:
    """Room no pod of the group's fits on, the last sliver of a node its pods run on, counted
    as taken: a target's room is room a new pod can use (three 4 GiB pods fill a 16 GiB
    node at 77 %, and a 70 % target would read a group of full nodes as within its
    tolerance). Its smallest pod is the measure, so room any of them fits is room; a node
    without one of its pods (empty, or just Ready) has no sliver."""
    running = [p for p in pods if p.node_name is not None and not p.terminal]
    workload = [p for p in running if not (p.daemon_set or p.mirror)]
    if not workload:
        return made
    smallest = min(p.requests.of(made.resource) for p in workload)
    taken: dict[str, int] = {}
    for pod in running:  # every pod on the node takes its room, whatever the reading counts
        taken[pod.node_name or ""] = taken.get(pod.node_name or "", 0) + pod.requests.of(
            made.resource
        )
    hosts = {p.node_name for p in workload}
    slivers = [
        free
        for node in nodes
        if node.name in hosts
        and 0 < (free := node.allocatable.of(made.resource) - taken.get(node.name, 0)) < smallest
    ]
    return replace(made, stranded=sum(slivers), full=len(slivers), smallest=smallest)


def read_reservation(
    metric: CapacityReservationMetric,
    group: NodeGroup,
    snapshot: Snapshot,
    now: datetime,
    waiting: Iterable[Pod] = (),
    *,
    expendable: int | None = None,
) -> Reading:
    """The CapacityReservation metric's reading for the group, from the snapshot: its pods'
    requests (and those of the pending pods `waiting` for its room) over its Ready,
    schedulable nodes' allocatable, as a share (`Utilization`) or an amount; unavailable
    when no such node is registered while it runs nodes."""
    nodes = [replace(n, group=group.name) for n in snapshot.nodes if belongs(n, group)]
    pods = [p for n in nodes for p in snapshot.pods_by_node.get(n.name, ())]
    source = metric.capacity_reservation
    try:
        reserved = reservation(
            group.name,
            nodes,
            pods,
            source.resource,
            include_daemon_sets=source.include_daemon_sets,
            include_mirror_pods=source.include_mirror_pods,
            waiting=waiting,
            expendable=expendable,
        )
    except ReservationError as error:
        return MetricUnavailable(reason=str(error))
    percent = reserved.percent
    if percent is None:  # no node measured: at zero none runs, nothing is asked
        if group.desired == 0:
            return MetricReading(value=0, at=now, detail=f"{group.name} is at zero nodes")
        return MetricUnavailable(
            reason=f"node group {group.name}: no Ready, schedulable node is registered"
        )
    if metric.target.type is not TargetType.UTILIZATION:
        return MetricReading(value=reserved.amount, at=now, detail=reserved.detail)
    share = None if reserved.per_pod is None else 100 * reserved.per_pod / reserved.allocatable
    return MetricReading(
        value=percent,
        at=now,
        detail=reserved.detail,
        measured_nodes=reserved.nodes,
        pod_share=share,
    )

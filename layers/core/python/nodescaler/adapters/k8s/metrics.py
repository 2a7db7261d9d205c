"""The Kubernetes metric producer: capacity reservation per node group, from one snapshot.

One snapshot of nodes and pods serves every group evaluated within `max_age` (a batch of
evaluations, in a warm container), so a tick over many groups lists the cluster once per
batch, not once per group. Failures become `MetricUnavailable` naming the cause, which
holds that group's scale-in and nothing else.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from nodescaler.adapters.k8s.cluster import KubernetesCluster, KubernetesUnavailableError, Snapshot
from nodescaler.domain.cluster import Node
from nodescaler.domain.policy import CapacityReservationMetric, MetricBase, TargetType
from nodescaler.domain.readings import MetricReading, MetricUnavailable, Reading
from nodescaler.domain.reservation import ReservationError, reservation
from nodescaler.ports import NodeGroup

EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


def belongs(node: Node, group: NodeGroup) -> bool:
    """By the EKS node group label, else by the node's instance being one of the ASG's."""
    label = node.labels.get(EKS_NODEGROUP_LABEL)
    if label is not None and group.eks_nodegroup is not None:
        return label == group.eks_nodegroup
    return node.instance_id in group.instance_ids


class KubernetesMetrics:
    def __init__(self, cluster: KubernetesCluster, *, max_age: timedelta = timedelta(seconds=15)):
        self._cluster = cluster
        self._max_age = max_age
        self._snapshot: tuple[datetime, Snapshot] | None = None

    def snapshot(self, now: datetime) -> Snapshot:
        if self._snapshot is None or now - self._snapshot[0] > self._max_age:
            self._snapshot = (now, self._cluster.snapshot())
        return self._snapshot[1]

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        if not isinstance(metric, CapacityReservationMetric):
            return MetricUnavailable(reason=f"no {metric.type_name} producer is configured")
        try:
            snapshot = self.snapshot(now)
        except KubernetesUnavailableError as error:
            return MetricUnavailable(reason=str(error))
        nodes = [replace(n, group=group.name) if belongs(n, group) else n for n in snapshot.nodes]
        source = metric.capacity_reservation
        try:
            reserved = reservation(
                group.name,
                nodes,
                snapshot.pods,
                source.resource,
                include_daemon_sets=source.include_daemon_sets,
                include_mirror_pods=source.include_mirror_pods,
            )
        except ReservationError as error:
            return MetricUnavailable(reason=str(error))
        if reserved.percent is None:
            return MetricUnavailable(
                reason=f"node group {group.name}: no Ready, schedulable node is registered"
            )
        utilization = metric.target.type is TargetType.UTILIZATION
        value = reserved.percent if utilization else reserved.amount
        return MetricReading(value=value, at=now, detail=reserved.detail)

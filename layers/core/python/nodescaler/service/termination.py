"""Which instances leave on a scale-in: the group's custom termination policy asks, and
nodescaler answers from the cluster, as Cluster Autoscaler chooses its nodes.

The group stays in charge of when and how much to remove (the desired capacity nodescaler
set); this says which. In order: instances that never became Ready nodes, then empty nodes
(only DaemonSet and mirror pods), then one node whose pods fit on the nodes that stay and
whose disruption budgets allow their eviction (`scale_down.unneeded_nodes`: cheapest to
move first; one at a time, as Cluster Autoscaler drains them). Never a node kept by
annotation, one holding a pod that may not move (`domain.drainability`), one whose pods
would not fit elsewhere or whose budget allows no more disruptions: the answer then holds fewer
instances than asked (possibly none), the reason names the pods, and the group asks again
later. When nodescaler cannot tell (a group it does not manage,
no cluster, the cluster unreadable) it does not guess: it offers back every instance the
group offered, and the group chooses by its next termination policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from nodescaler.domain.cluster import Snapshot
from nodescaler.domain.drainability import CA_DEFAULTS, DrainRules
from nodescaler.domain.node_group import NodeGroup
from nodescaler.domain.scale_down import removable
from nodescaler.errors import KubernetesUnavailableError
from nodescaler.events.termination import TerminationRequest
from nodescaler.ports import Clock, NodeGroupDiscovery, SnapshotSource


@dataclass(frozen=True)
class TerminationChoice:
    group: str
    instance_ids: tuple[str, ...]
    chosen: bool  # False: every offered instance given back, the group decides
    reason: str  # for the log: why these, or why the group decides
    not_nodes: tuple[str, ...] = ()  # offered instances no node stands for


class TerminationChooser:
    def __init__(
        self,
        node_groups: NodeGroupDiscovery,
        cluster: SnapshotSource | None,
        clock: Clock,
        rules: DrainRules = CA_DEFAULTS,
    ) -> None:
        self._node_groups = node_groups
        self._cluster = cluster
        self._clock = clock
        self._rules = rules  # which pods keep their node

    def choose(self, request: TerminationRequest) -> TerminationChoice:
        group = next((g for g in self._node_groups.discover() if g.name == request.group), None)
        if group is None:
            return self._group_decides(request, "not an opted-in node group")
        if self._cluster is None:
            return self._group_decides(request, "no cluster to read")
        try:
            snapshot = self._cluster.snapshot().at(self._clock.now())
        except KubernetesUnavailableError as error:
            return self._group_decides(request, f"the cluster cannot be read ({error})")
        return self._from_the_cluster(request, group, snapshot)

    @staticmethod
    def _group_decides(request: TerminationRequest, why: str) -> TerminationChoice:
        return TerminationChoice(request.group, request.offered, False, f"{why}: the group decides")

    def _from_the_cluster(
        self, request: TerminationRequest, group: NodeGroup, snapshot: Snapshot
    ) -> TerminationChoice:
        found = removable(group, request.offered, request.wanted, snapshot, self._rules)
        return TerminationChoice(
            request.group, found.instance_ids, True, found.reason, found.not_nodes
        )

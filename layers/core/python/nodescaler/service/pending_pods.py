"""Pending pods → new nodes per group: the groups that answer pending pods, a template of
each one's nodes, and the expander chain's plan over all of them.

Every group's evaluation computes the same plan from the same snapshot (the expanders'
random choices are seeded by the pending pods), so each reads its own share of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodescaler.domain.ahead.group_buffers import buffer_pods
from nodescaler.domain.cluster.daemon_sets import less_daemon_sets
from nodescaler.domain.cluster.instance_templates import template_from_instance_type, zone_labels
from nodescaler.domain.cluster.predicates import (
    NodeTemplate,
    live_template,
    pack,
    pending,
    place,
    room_of,
    why_not,
)
from nodescaler.domain.cluster.snapshot import Node, Pod, Snapshot
from nodescaler.domain.groups.node_group import EKS_NODEGROUP_LABEL, NodeGroup, belongs
from nodescaler.domain.groups.optin import AllowedGroups
from nodescaler.domain.groups.zonal_shift import confined
from nodescaler.domain.policy import PendingPodsMetric
from nodescaler.domain.scale_down.pod_rules import movable
from nodescaler.domain.scale_down.spoken_for import Taken
from nodescaler.domain.scale_up.expanders import Expander
from nodescaler.domain.scale_up.pending_pods_plan import Plan, plan
from nodescaler.domain.scaling.own_pods import OWN_PENDING_PODS
from nodescaler.ports import Backoffs, InstanceTypes, NodeGroupDiscovery, ZonalShiftSource
from nodescaler.service.limiter import ClusterLimiter
from nodescaler.service.policy_resolver import PolicyBook

# A node Ready for less than this has its pending pods still to be bound by the scheduler
# (a node's startup taints lifted, its pods retried): they are counted onto its room, as
# onto a node on its way, not asked a new node for.
JUST_READY = timedelta(seconds=30)


@dataclass(frozen=True)
class Planned:
    plan: Plan
    pending: int  # pending pods considered
    problems: Mapping[str, str]  # group → why it has no template (it is left out)
    participants: tuple[str, ...] = ()
    backed_off: frozenset[str] = frozenset()  # left out after a failed scale-up
    # the pods each group's booting nodes take
    arriving: Mapping[str, tuple[Pod, ...]] = field(default_factory=dict)
    booting: Mapping[str, int] = field(default_factory=dict)  # nodes on their way, by group
    # each group's desired size as planned: a group resized since needs a new plan
    desired: Mapping[str, int] = field(default_factory=dict)
    # the room of the nodes a group's capacity buffer fills (as its own check places it):
    # a pod another group moves there would take that buffer's room, to be bought back
    reserved: Mapping[str, Taken] = field(default_factory=dict)

    def coming(self, group: str) -> tuple[int, list[Pod]]:
        """The group's nodes on their way and planned, and the pending pods they take."""
        nodes = self.booting.get(group, 0) + self.plan.nodes.get(group, 0)
        return nodes, [*self.arriving.get(group, ()), *self.plan.pods.get(group, ())]

    def describe(self, group: str, nodes: int) -> str:
        """What the plan gives the group, the others, and the pods no group fits, in words."""
        others = sum(self.plan.nodes.values()) - nodes
        detail = f"{self.pending} pending pods: +{nodes} nodes here"
        if arriving := len(self.arriving.get(group, ())):
            detail += f" ({arriving} pods on nodes already on their way)"
        detail += f", +{others} in other groups"
        detail += "".join(f" ({said})" for said in self.plan.remarks(group))
        if unplaced := self.plan.unplaced:
            first = unplaced[0]
            detail += (
                f", {len(unplaced)} fit no group ({first.key}: {self.plan.why_waiting(first)}"
                f"{'; ...' if len(unplaced) > 1 else ''})"
            )
        if self.backed_off:
            detail += f" (backed off: {', '.join(sorted(self.backed_off))})"
        return detail


class PendingPodsPlanner:
    def __init__(
        self,
        node_groups: NodeGroupDiscovery,
        policies: PolicyBook,
        instance_types: InstanceTypes,
        chain: Sequence[Expander],
        *,
        backoffs: Backoffs | None = None,
        limiter: ClusterLimiter | None = None,
        allowed: AllowedGroups | None = None,
        zonal_shifts: ZonalShiftSource | None = None,
    ) -> None:
        self._node_groups = node_groups
        self._policies = policies
        self._instance_types = instance_types
        self._chain = chain
        self._backoffs = backoffs
        self._limiter = limiter
        self._allowed = allowed or AllowedGroups()
        self._zonal_shifts = zonal_shifts

    def participants(self, groups: Sequence[NodeGroup]) -> list[NodeGroup]:
        """Managed groups whose policy reads pending pods, or counts its own (a policy without
        a PendingPods metric, `domain.scaling.own_pods`), and that may be resized: a group
        allowedGroups leaves out would take pods it never grows for."""
        return [
            g
            for g in groups
            if self._policies.takes_pending_pods(g) and self._allowed.allows(g.name)
        ]

    def cutoff(self, group: NodeGroup) -> int:
        """The priority below which the group's policy lets pending pods wait: its PendingPods
        metric's, else the one its own pods are read with (`domain.scaling.own_pods`)."""
        policy = self._policies.policy_of(group)
        for metric in policy.spec.metrics if policy is not None else ():
            if isinstance(metric, PendingPodsMetric):
                return metric.pending_pods.expendable_priority_cutoff
        return OWN_PENDING_PODS.pending_pods.expendable_priority_cutoff

    def template(self, group: NodeGroup, snapshot: Snapshot) -> NodeTemplate:
        live = live_template(group, snapshot.nodes, snapshot.pods_by_node)
        if live is not None:
            return live
        shape = self._instance_types.shape(self._instance_types.instance_type(group))
        labels = zone_labels(group.zones)  # a pod pinned to its zone can grow it from zero
        labels |= {EKS_NODEGROUP_LABEL: group.eks_nodegroup} if group.eks_nodegroup else {}
        managed = self._instance_types.nodegroup_labels(group)
        whole = template_from_instance_type(group.name, shape, group.tags, labels, managed)
        return less_daemon_sets(whole, snapshot.daemon_sets)

    def _highest(self, group: NodeGroup) -> tuple[int, str]:
        """The most nodes the group may have, and which maximum that is."""
        policy = self._policies.policy_of(group)
        if policy is not None and policy.spec.max_replicas < group.max_size:
            return policy.spec.max_replicas, "its policy's maxReplicas"
        return group.max_size, group.bounds_from or "its Auto Scaling group's MaxSize"

    def backed_off(self, groups: Sequence[str], now: datetime) -> frozenset[str]:
        if self._backoffs is None:
            return frozenset()
        return frozenset(g for g, b in self._backoffs.backoffs(groups).items() if b.active(now))

    def plan(self, snapshot: Snapshot, expendable_priority_cutoff: int, now: datetime) -> Planned:
        templates: dict[str, NodeTemplate] = {}
        problems: dict[str, str] = {}
        groups = self._node_groups.discover()  # once a plan: each discovery is AWS calls
        participants = self.participants(groups)
        for group in participants:
            try:
                templates[group.name] = self.template(group, snapshot)
            except Exception as error:  # one group's bad tags must not hide the others
                problems[group.name] = f"no template of its nodes: {error}"
        pods = pending(snapshot.pods, expendable_priority_cutoff)
        considered = len(pods)
        names = tuple(g.name for g in participants)
        backed_off = self.backed_off(names, now)
        # 1. Pods the nodes already on their way will take (Cluster Autoscaler's upcoming
        #    nodes): without this, a pod pending while its node boots would add another. A
        #    backed-off group's nodes are not coming: it gives up its scale-up.
        arriving: dict[str, tuple[Pod, ...]] = {}
        on_their_way: dict[str, int] = {}
        for group in participants:
            # a node Ready for seconds: the scheduler has yet to bind what fits its room
            rooms = [(room, 1) for room in self._just_ready(group, snapshot, now)]
            template = None if group.name in backed_off else templates.get(group.name)
            booting = group.desired - sum(
                1 for n in snapshot.nodes if n.usable and belongs(n, group)
            )
            if template is not None and booting > 0:
                on_their_way[group.name] = booting
                rooms.append((template, booting))
            pods, placed = _onto(pods, rooms)
            if placed:
                arriving[group.name] = tuple(placed)
        # 2. The rest, among the groups with room to grow.
        room, full = self.room(groups, now)
        result = plan(
            pods,
            templates,
            self._chain,
            backed_off=backed_off,
            room=room,
            full=full,
            sizes={g.name: g.desired for g in participants},  # upcoming nodes included
            left_out=self.left_out(participants, now),
        )
        desired = {g.name: g.desired for g in participants}
        reserved = self._reserved(participants, snapshot)
        return Planned(
            result,
            considered,
            problems,
            names,
            backed_off,
            arriving,
            on_their_way,
            desired,
            reserved,
        )

    @staticmethod
    def _just_ready(group: NodeGroup, snapshot: Snapshot, now: datetime) -> list[NodeTemplate]:
        """The free room of the group's nodes Ready for less than `JUST_READY`."""
        return [
            room_of(n, snapshot.pods_by_node.get(n.name, ()))
            for n in snapshot.nodes
            if n.usable
            and n.schedulable
            and n.ready_since is not None
            and now - n.ready_since < JUST_READY
            and belongs(n, group)
        ]

    def _reserved(self, groups: Sequence[NodeGroup], snapshot: Snapshot) -> dict[str, Taken]:
        """Each group's capacity buffer placed on the free room of its Ready nodes, as its
        own evaluation places it: what it takes of each node. A buffer sized from arrivals
        counts its `minPods` here (its rate is in its group's state)."""
        buffered = [
            (g, pods)
            for g in groups
            if (policy := self._policies.policy_of(g)) is not None
            and (pods := buffer_pods(policy.buffers))
        ]
        if not buffered:
            return {}
        by_node = snapshot.pods_by_node
        by_instance: dict[str, list[Node]] = {}
        for node in snapshot.nodes:  # once, not once a group
            if node.usable and node.schedulable:
                by_instance.setdefault(node.instance_id, []).append(node)
                label = node.labels.get(EKS_NODEGROUP_LABEL)
                if label is not None:
                    by_instance.setdefault(f"{EKS_NODEGROUP_LABEL}={label}", []).append(node)
        reserved: dict[str, Taken] = {}
        for group, pods in buffered:
            keys = [*group.instance_ids, f"{EKS_NODEGROUP_LABEL}={group.eks_nodegroup}"]
            mine = {n.name: n for k in keys for n in by_instance.get(k, ()) if belongs(n, group)}
            rooms = {name: room_of(n, by_node.get(name, ())) for name, n in mine.items()}
            for name, after in place(pods, rooms)[0].items():
                reserved[name] = Taken.between(rooms[name], after)
        return reserved

    def left_out(self, groups: Sequence[NodeGroup], now: datetime) -> dict[str, str]:
        """The groups confined to zones shifted away, and why: no scale-up goes there."""
        if self._zonal_shifts is None:
            return {}
        return confined([(g.name, g.zones) for g in groups], self._zonal_shifts.in_force(), now)

    def room(
        self, groups: Sequence[NodeGroup], now: datetime
    ) -> tuple[dict[str, int], dict[str, str]]:
        """How many nodes each managed group may still add: up to its maximum (the policy's
        maxReplicas within the group's MaxSize), and within the cluster's limits when
        there are any; and, for when that is spent, which limit it is (a pod left waiting
        names it). A group at its maximum is no option: its pods go to the next."""
        room: dict[str, int] = {}
        full: dict[str, str] = {}
        for group in groups:
            highest, which = self._highest(group)
            room[group.name] = max(highest - group.desired, 0)
            full[group.name] = f"at its maximum size, {highest} nodes ({which})"
        if self._limiter is not None:
            for name, (left, limit) in self._limiter.room(groups, now).items():
                if left < room.get(name, left + 1):
                    room[name] = left
                    full[name] = f"at the cluster's {limit}"
        return room, full


def group_pods(group: NodeGroup, snapshot: Snapshot, planned: Planned) -> list[Pod]:
    """The group's pods: those on its Ready nodes (DaemonSets and mirrors aside) and the
    pending ones its nodes take, on their way or planned (a CapacityBuffer's among them)."""
    by_node = snapshot.pods_by_node
    pods = [
        p
        for n in snapshot.nodes
        if n.ready and belongs(n, group)
        for p in movable(by_node.get(n.name, ()))
    ]
    return pods + planned.coming(group.name)[1]


def _onto(
    pods: list[Pod], rooms: Sequence[tuple[NodeTemplate, int]]
) -> tuple[list[Pod], list[Pod]]:
    """The pods left, and those the `rooms` take: each that many nodes of its shape (a
    node's free room, or the group's template), packed in turn."""
    placed: list[Pod] = []
    for room, nodes in rooms:
        _, took = pack([p for p in pods if why_not(p, room) is None], room, nodes)
        placed += took
        taken = {p.key for p in took}
        pods = [p for p in pods if p.key not in taken]
    return pods, placed

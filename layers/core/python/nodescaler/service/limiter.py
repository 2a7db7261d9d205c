"""Cluster-wide limits, enforced across groups evaluated at the same time.

Each group's evaluation sums the other managed groups (their desired capacity, or a
scale-up another evaluation has just claimed and the ASG may not show yet) and caps its
own scale-up to what is left. Claims go through one conditional write, so two groups
scaling up together can't both spend the same headroom; a claim matters only until the
ASGs show it, so it is forgotten after `CLAIM_LIFETIME`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.scaling.limits import (
    Ceiling,
    Claims,
    ClusterLimits,
    ClusterUsage,
    GroupUsage,
    ceiling,
    total_usage,
)
from nodescaler.ports import ClaimLedger, InstanceTypes, NodeGroupDiscovery

CLAIM_LIFETIME = timedelta(minutes=2)


class ClusterLimiter:
    def __init__(
        self,
        limits: ClusterLimits,
        node_groups: NodeGroupDiscovery,
        shapes: InstanceTypes,
        ledger: ClaimLedger,
    ) -> None:
        self.limits = limits
        self._node_groups = node_groups
        self._shapes = shapes
        self._ledger = ledger

    def ceiling(self, group: NodeGroup, now: datetime) -> tuple[Ceiling | None, Claims]:
        """The most nodes `group` may have now, and the claims that was read from."""
        claims = self._ledger.load_claims()
        others = [
            self._usage(other, self._counted(other, claims, now))
            for other in self._node_groups.discover()
            if other.name != group.name
        ]
        return ceiling(self.limits, self._usage(group, group.desired), others), claims

    def room(self, groups: Sequence[NodeGroup], now: datetime) -> dict[str, tuple[int, str]]:
        """How many nodes each of `groups` (every managed group) may add while the others
        keep theirs, and the limit that says so ("maximum of 200 vCPUs"), read from one
        look at the claims: for planning, not for claiming."""
        claims = self._ledger.load_claims()
        usage = {g.name: self._usage(g, self._counted(g, claims, now)) for g in groups}
        room = {}
        for group in groups:
            others = [u for name, u in usage.items() if name != group.name]
            limit = ceiling(self.limits, usage[group.name], others)
            if limit is not None:
                left = max(limit.nodes - usage[group.name].nodes, 0)
                room[group.name] = (left, limit.limit)
        return room

    def usage(self, now: datetime) -> ClusterUsage:
        """Every managed group's nodes (a fresh claim counted, as a ceiling counts it), their
        vCPUs and memory: what the limits are measured against, read once for a report."""
        claims = self._ledger.load_claims()
        groups = self._node_groups.discover()
        return total_usage(self._shaped(g, self._counted(g, claims, now)) for g in groups)

    @staticmethod
    def _counted(group: NodeGroup, claims: Claims, now: datetime) -> int:
        """Its size, or a scale-up claimed for it that its ASG may not show yet."""
        claimed = claims.desired.get(group.name)
        if claimed is not None and now - claimed[1] < CLAIM_LIFETIME:
            return max(group.desired, claimed[0])
        return group.desired

    def claim(self, group: NodeGroup, desired: int, claims: Claims, now: datetime) -> bool:
        """Claim a scale-up to `desired`; False when another group claimed since `claims`."""
        fresh = {g: c for g, c in claims.desired.items() if now - c[1] < CLAIM_LIFETIME}
        changed = Claims(claims.version, fresh | {group.name: (desired, now)})
        return self._ledger.save_claims(changed)

    def _usage(self, group: NodeGroup, nodes: int) -> GroupUsage:
        if self.limits.max_vcpus is None and self.limits.max_memory_gib is None:
            return GroupUsage(nodes)  # no limit counts their size: not looked up
        return self._shaped(group, nodes)

    def _shaped(self, group: NodeGroup, nodes: int) -> GroupUsage:
        try:
            shape = self._shapes.shape(self._shapes.instance_type(group))
        except LookupError:  # no instance type to tell: its nodes count, their size can't
            return GroupUsage(nodes)
        return GroupUsage(nodes, shape.vcpus, shape.memory_mib)

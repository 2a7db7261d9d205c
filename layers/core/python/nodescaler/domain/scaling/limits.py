"""Cluster-wide limits: the most nodes, vCPUs and memory all managed groups may add up to,
and the most pods the cluster's CapacityBuffers may ask room for.

Cluster Autoscaler's --max-nodes-total and --cores-total/--memory-total, per cluster. A
limit only ever caps a scale-up: a cluster over its limit is not shrunk for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class BufferCaps:
    """The most virtual pods one CapacityBuffer may ask room for, and all of them together
    (the evaluate function's CLUSTER_BUFFER_MAX_PODS and CLUSTER_BUFFERS_MAX_PODS): anyone
    who may create a buffer in one namespace takes a group no further, and one tick places
    no more (five buffers of 10,000 pods made a 7-second tick). Cluster Autoscaler has no
    such cap: its buffers are trusted as its operator's own."""

    per_buffer: int = 1_000
    total: int = 2_000


@dataclass(frozen=True)
class ClusterLimits:
    max_nodes: int | None = None
    max_vcpus: int | None = None
    max_memory_gib: int | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.max_nodes, self.max_vcpus, self.max_memory_gib))


@dataclass(frozen=True)
class Claims:
    """Scale-ups just claimed under the limits, which the groups' sizes may not show yet."""

    version: int = 0
    desired: Mapping[str, tuple[int, datetime]] = field(default_factory=dict)  # group → (n, at)


@dataclass(frozen=True)
class GroupUsage:
    """A group's size and each node's shape (0 when its instance type can't be told)."""

    nodes: int
    vcpus_per_node: int = 0
    memory_mib_per_node: int = 0


@dataclass(frozen=True)
class ClusterUsage:
    """All managed groups together, as the limits count them: the dashboard's figures."""

    nodes: int
    vcpus: int
    memory_gib: float


def total_usage(groups: Iterable[GroupUsage]) -> ClusterUsage:
    """The groups' nodes, vCPUs and memory added up (a node of unknown shape adds none)."""
    groups = list(groups)
    return ClusterUsage(
        nodes=sum(g.nodes for g in groups),
        vcpus=sum(g.nodes * g.vcpus_per_node for g in groups),
        memory_gib=sum(g.nodes * g.memory_mib_per_node for g in groups) / 1024,
    )


@dataclass(frozen=True)
class Ceiling:
    nodes: int  # the most nodes the group may have
    limit: str  # which limit, in words: "maximum of 200 vCPUs"


def ceiling(
    limits: ClusterLimits, group: GroupUsage, others: Iterable[GroupUsage]
) -> Ceiling | None:
    """The most nodes `group` may have while the others keep theirs; None: no limit applies."""
    others = list(others)
    candidates: list[Ceiling] = []
    if limits.max_nodes is not None:
        used = sum(o.nodes for o in others)
        candidates.append(Ceiling(limits.max_nodes - used, f"maximum of {limits.max_nodes} nodes"))
    if limits.max_vcpus is not None and group.vcpus_per_node:
        used = sum(o.nodes * o.vcpus_per_node for o in others)
        room = (limits.max_vcpus - used) // group.vcpus_per_node
        candidates.append(Ceiling(room, f"maximum of {limits.max_vcpus} vCPUs"))
    if limits.max_memory_gib is not None and group.memory_mib_per_node:
        used = sum(o.nodes * o.memory_mib_per_node for o in others)
        room = (limits.max_memory_gib * 1024 - used) // group.memory_mib_per_node
        candidates.append(Ceiling(room, f"maximum of {limits.max_memory_gib} GiB of memory"))
    lowest = min(candidates, key=lambda c: c.nodes, default=None)
    return None if lowest is None else Ceiling(max(lowest.nodes, 0), lowest.limit)

"""The small interfaces the core's callers need; adapters implement them, fakes too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pydantic models, named here only as types: no cold start pays for them
    from nodescaler.domain.policy import MetricBase
    from nodescaler.domain.readings import Reading
    from nodescaler.messages import EvaluationRequest


@dataclass(frozen=True)
class NodeGroup:
    """A node group as its provider reports it."""

    name: str  # the Auto Scaling Group name: nodescaler's id for the group
    desired: int
    min_size: int
    max_size: int
    in_service: int
    tags: Mapping[str, str] = field(default_factory=dict)
    eks_cluster: str | None = None  # set for EKS managed node groups
    eks_nodegroup: str | None = None
    instance_ids: frozenset[str] = frozenset()  # its instances, to find their nodes
    launched: int | None = None  # instances launching or running (not terminating); None: unknown
    protected_ids: frozenset[str] = frozenset()  # instances protected from scale-in
    # What it launches, for a template of its nodes when it has none: an instance type if
    # the group says (instances, mixed-instances overrides), else where to look it up.
    instance_type: str | None = None
    launch_template: tuple[str, str] | None = None  # (id, version)
    launch_configuration: str | None = None

    @property
    def is_eks_managed(self) -> bool:
        return self.eks_cluster is not None and self.eks_nodegroup is not None


class NodeGroupDiscovery(Protocol):
    def discover(self) -> Sequence[NodeGroup]:
        """Every opted-in group (tag filters applied by the provider where it can)."""
        ...


class NodeGroups(NodeGroupDiscovery, Protocol):
    def get(self, name: str) -> NodeGroup | None: ...

    def set_desired(self, group: NodeGroup, desired: int) -> None: ...

    def failed_launches(self, group: NodeGroup, since: datetime) -> Sequence[LaunchFailure]:
        """Launches that failed since `since` (the provider's record of scaling activities)."""
        ...

    def protect(self, group: NodeGroup, instance_ids: frozenset[str], protected: bool) -> None:
        """Set or clear these instances' protection from scale-in."""
        ...


@dataclass(frozen=True)
class LaunchFailure:
    activity_id: str  # the same id the launch-failure event carries: one failure, counted once
    at: datetime
    reason: str


class MetricSource(Protocol):
    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        """A value with its timestamp, or `MetricUnavailable` with the reason; never raises."""
        ...


class Clock(Protocol):
    def now(self) -> datetime: ...


class EvaluationQueue(Protocol):
    def send(self, requests: Sequence[EvaluationRequest]) -> None:
        """Queue every request, or raise `QueueSendError` naming the groups left unqueued."""
        ...


class QueueSendError(RuntimeError):
    """Some evaluation requests could not be queued; the message names their groups."""

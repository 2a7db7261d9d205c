"""The policy document: its spec, metadata, and which groups name it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
)

from nodescaler.domain.groups.optin import NAME_PATTERN
from nodescaler.domain.policy.behavior_model import MOST_NODES, Behavior, ScaleInWindow
from nodescaler.domain.policy.descriptors import NOTHING, MetricReads, metric_reads, reads_cluster
from nodescaler.domain.policy.metrics import (
    CapacityReservationMetric,
    MetricBase,
    MetricSpec,
    PendingPodsMetric,
    TargetType,
)
from nodescaler.domain.policy.pending_pods_source import CapacityBuffer
from nodescaler.domain.policy.spec import Spec
from nodescaler.domain.token_origins import TokenOrigins

# --- the document ------------------------------------------------------------------------


class PolicySpec(Spec):
    min_replicas: Annotated[int, Field(strict=True, ge=0, le=100_000)]
    max_replicas: Annotated[int, Field(strict=True, ge=1, le=MOST_NODES)]
    metrics: Annotated[list[MetricSpec], Field(min_length=1, max_length=20)]
    behavior: Behavior = Behavior()
    # Hours in which scale-in is capped or forbidden (`ScaleInWindow`).
    scale_in_windows: Annotated[list[ScaleInWindow], Field(max_length=20)] = []  # noqa: RUF012 (pydantic copies it)
    # CloudWatch alarms whose state changes trigger an evaluation at once (the fast path).
    alarms: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=255)]], Field(max_length=20)
    ] = []  # noqa: RUF012 (pydantic copies it)
    # Where nodescaler reads the cluster, a group without a PendingPods metric still grows
    # for its own unschedulable pods (its queue's workers waiting for room); false: never.
    own_pending_pods: Annotated[bool, Field(strict=True)] = True

    @field_validator("max_replicas")
    @classmethod
    def _max_not_below_min(cls, max_replicas: int, info: ValidationInfo) -> int:
        min_replicas = info.data.get("min_replicas")
        if min_replicas is not None and max_replicas < min_replicas:
            raise ValueError(f"maxReplicas ({max_replicas}) is below minReplicas ({min_replicas})")
        return max_replicas

    @field_validator("metrics")
    @classmethod
    def _unique_metric_names(cls, metrics: list[MetricBase]) -> list[MetricBase]:
        first_seen: dict[str, int] = {}
        for index, metric in enumerate(metrics):
            if metric.key in first_seen:
                raise ValueError(
                    f"duplicate metric name {metric.key!r} (metrics[{first_seen[metric.key]}] and "
                    f"metrics[{index}]); give each metric a unique name"
                )
            first_seen[metric.key] = index
        return metrics

    @field_validator("metrics")
    @classmethod
    def _arrivals_counted(cls, metrics: list[MetricBase]) -> list[MetricBase]:
        """A headroom from arrivals needs the group's pods counted: its PendingPods metric
        counts them (`domain.ahead.arrivals`)."""
        if any(isinstance(m, PendingPodsMetric) for m in metrics):
            return metrics
        for index, metric in enumerate(metrics):
            if isinstance(metric, CapacityReservationMetric) and metric.headroom_from_arrivals:
                raise ValueError(
                    f"metrics[{index}]: capacityReservation.headroom fromArrivals needs a "
                    "PendingPods metric in the policy: it counts the group's pods, whose "
                    "arrivals size the room"
                )
        return metrics


class Metadata(Spec):
    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    description: str | None = None


class NodeGroupPolicy(Spec):
    """One policy document; node groups name it with the `nodescaler/policy` tag."""

    api_version: Literal["nodescaler.io/v1alpha1"] = "nodescaler.io/v1alpha1"
    kind: Literal["NodeGroupPolicy"] = "NodeGroupPolicy"
    metadata: Metadata
    spec: PolicySpec

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def reads_kubernetes(self) -> bool:
        """Whether any of its metrics reads the cluster."""
        return any(reads_cluster(m) for m in self.spec.metrics)

    @property
    def reads_pending_pods(self) -> bool:
        """Whether it takes part in the pending-pods plan across groups."""
        return any(isinstance(m, PendingPodsMetric) for m in self.spec.metrics)

    @property
    def buffers(self) -> tuple[CapacityBuffer, ...]:
        """Its PendingPods metrics' capacity buffers: room its group keeps free."""
        return tuple(
            b
            for m in self.spec.metrics
            if isinstance(m, PendingPodsMetric)
            for b in m.pending_pods.buffer
        )

    @property
    def reserved_shares(self) -> tuple[CapacityReservationMetric, ...]:
        """Its CapacityReservation metrics with a `Utilization` target: room its group
        keeps free as a share of its nodes."""
        return tuple(
            m
            for m in self.spec.metrics
            if isinstance(m, CapacityReservationMetric) and m.target.type is TargetType.UTILIZATION
        )

    @property
    def room_watched(self) -> bool:
        """Whether its evaluations may ask for a look before the tick as its room runs short
        (`domain.ahead.recheck`): it keeps a buffer, or a `Utilization` reservation whose
        group's arrivals its PendingPods metric counts."""
        return bool(self.buffers) or (self.reads_pending_pods and bool(self.reserved_shares))

    @property
    def counts_own_pending_pods(self) -> bool:
        """Whether, without a PendingPods metric, its group still grows for the pending pods
        its nodes would take, where the cluster is read (`domain.scaling.own_pods`)."""
        return self.spec.own_pending_pods and not self.reads_pending_pods

    @property
    def takes_pending_pods(self) -> bool:
        """Whether its group is one the pending-pods plan may give pods to (and grow)."""
        return self.reads_pending_pods or self.counts_own_pending_pods


def reads_of(policies: Iterable[NodeGroupPolicy]) -> MetricReads:
    """Everything the policies' metrics read, together."""
    reads = NOTHING
    for policy in policies:
        for metric in policy.spec.metrics:
            reads |= metric_reads(metric)
    return reads


def token_origins(policies: Iterable[NodeGroupPolicy]) -> TokenOrigins:
    """Every (secret, origin) pair the policies send a bearer token on."""
    return reads_of(policies).token_origins

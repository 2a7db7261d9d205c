"""What nodescaler tells the world on EventBridge: one event per resize, per backoff and per
drain outcome, each detail type a model here (their JSON Schemas are `events/schemas/`).

Users route them with a rule on `source: nodescaler`; the events say what happened and
why, in the words of the decision, backoff or drain that made them. Loaded with the
first event a function puts, never at import (the functions' cold starts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from nodescaler.domain.backoff import Backoff
from nodescaler.domain.decision import Decision
from nodescaler.domain.draining import DrainOutcome, DrainResult

SOURCE = "nodescaler"
# How an eviction refused by a budget is worded (adapters.k8s.evictions): its budget's name.
_BUDGET = re.compile(r"blocked by PodDisruptionBudget (\S+)")


class _Detail(BaseModel):
    """What every event's detail says: which cluster and node group it is about."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )
    detail_type: ClassVar[str]

    cluster: str  # the deployment's clusterName; empty when it has none
    node_group: str

    @classmethod
    def schema_name(cls) -> str:
        """Its schema's and sample's file name: "Node Group Resized" → node-group-resized."""
        return cls.detail_type.lower().replace(" ", "-")


class NodeGroupResized(_Detail):
    """nodescaler changed a node group's desired capacity (not in dry-run: nothing changes)."""

    detail_type: ClassVar[str] = "Node Group Resized"

    policy: str
    direction: Literal["up", "down"]
    previous: int  # the desired capacity before
    desired: int  # the desired capacity asked for
    in_service: int | None  # instances in service when decided
    min_replicas: int
    max_replicas: int
    recommendation: int  # every metric combined, before behavior and limits
    limited_by: list[str]  # what held it back from the recommendation
    reason: str
    decided_at: AwareDatetime


class NodeGroupBackedOff(_Detail):
    """A scale-up failed (a launch failed, or instances not in service in time): the group
    gets no new instances until `until`, and the expanders look elsewhere."""

    detail_type: ClassVar[str] = "Node Group Backed Off"

    until: AwareDatetime
    seconds: int  # this backoff's length; the next failure doubles it
    reason: str  # what failed, in AWS's words where it gave some
    failed_at: AwareDatetime
    # the launch-failure event (dispatch), or an evaluation watching its scale-up
    noticed_by: Literal["launch-failure-event", "evaluation"]


class PodLeft(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    pod: str  # namespace/name
    reason: str


class _DrainDetail(_Detail):
    """A drain's end: the node, what left it and what stayed, and what Auto Scaling was told."""

    instance_id: str
    node: str | None  # the Kubernetes node; None when the instance has none
    cause: Literal["lifecycle-action", "spot-interruption", "rebalance-recommendation"]
    # sent with CompleteLifecycleAction (lifecycle actions only; a Spot warning has none)
    lifecycle_result: Literal["CONTINUE", "ABANDON"] | None
    evicted: list[str]
    remaining: list[PodLeft]  # still on the node at the end, and why
    disruption_budgets: list[str]  # the PodDisruptionBudgets that refused those evictions
    seconds: float
    problem: str | None


class NodeDrained(_DrainDetail):
    """Every pod that had to move has left the node."""

    detail_type: ClassVar[str] = "Node Drained"
    outcome: Literal["drained"] = "drained"


class NodeDrainTimedOut(_DrainDetail):
    """Pods were still on the node at the deadline (often a PodDisruptionBudget):
    the instance goes all the same, with `lifecycleResult`."""

    detail_type: ClassVar[str] = "Node Drain Timed Out"
    outcome: Literal["timed-out"] = "timed-out"


class NodeDrainFailed(_DrainDetail):
    """The drain failed part-way (`problem` says how); the instance goes all the same."""

    detail_type: ClassVar[str] = "Node Drain Failed"
    outcome: Literal["failed"] = "failed"


class NodeDrainSkipped(_DrainDetail):
    """The instance had no node in the cluster: nothing to drain, the instance goes."""

    detail_type: ClassVar[str] = "Node Drain Skipped"
    outcome: Literal["not-in-cluster"] = "not-in-cluster"


DETAILS: tuple[type[_Detail], ...] = (
    NodeGroupResized,
    NodeGroupBackedOff,
    NodeDrained,
    NodeDrainTimedOut,
    NodeDrainFailed,
    NodeDrainSkipped,
)
_DRAIN_DETAILS: dict[DrainOutcome, type[_DrainDetail]] = {
    DrainOutcome.DRAINED: NodeDrained,
    DrainOutcome.TIMED_OUT: NodeDrainTimedOut,
    DrainOutcome.FAILED: NodeDrainFailed,
    DrainOutcome.NOT_IN_CLUSTER: NodeDrainSkipped,
}


@dataclass(frozen=True)
class ScalingEvent:
    """One event to put on the bus: its detail, and when it happened."""

    detail: _Detail
    at: datetime

    @property
    def detail_type(self) -> str:
        return self.detail.detail_type

    def detail_json(self) -> str:
        return self.detail.model_dump_json(by_alias=True)


def resized(decision: Decision, cluster: str) -> ScalingEvent:
    detail = NodeGroupResized(
        cluster=cluster,
        node_group=decision.node_group,
        policy=decision.policy,
        direction="up" if decision.change > 0 else "down",
        previous=decision.current,
        desired=decision.desired,
        in_service=decision.in_service,
        min_replicas=decision.min_replicas,
        max_replicas=decision.max_replicas,
        recommendation=decision.recommendation,
        limited_by=[str(limit) for limit in decision.limited_by],
        reason=decision.reason,
        decided_at=decision.at,
    )
    return ScalingEvent(detail, decision.at)


def backed_off(
    group: str,
    backoff: Backoff,
    cluster: str,
    noticed_by: Literal["launch-failure-event", "evaluation"],
) -> ScalingEvent:
    detail = NodeGroupBackedOff(
        cluster=cluster,
        node_group=group,
        until=backoff.until,
        seconds=backoff.seconds,
        reason=backoff.reason,
        failed_at=backoff.last_failure,
        noticed_by=noticed_by,
    )
    return ScalingEvent(detail, backoff.last_failure)


def new_backoff(before: Backoff | None, after: Backoff | None) -> Backoff | None:
    """`after` if it is a new backoff, not one running already (a failure within a running
    backoff is the same incident: it moves no deadline, and tells no one again)."""
    if after is None or (before is not None and before.until == after.until):
        return None
    return after


def drain_finished(result: DrainResult, cluster: str, at: datetime) -> ScalingEvent | None:
    """The event a drain's outcome puts; None for a node that was not nodescaler's to drain."""
    kind = _DRAIN_DETAILS.get(result.outcome)
    if kind is None or result.node_group is None:
        return None
    budgets = {m[1] for note in result.remaining if (m := _BUDGET.search(note.reason))}
    lifecycle: Any = None if result.lifecycle_result is None else str(result.lifecycle_result)
    detail = kind(
        cluster=cluster,
        node_group=result.node_group,
        instance_id=result.instance_id,
        node=result.node,
        cause=result.cause,  # DrainCause's values, as text
        lifecycle_result=lifecycle,
        evicted=list(result.evicted),
        remaining=[PodLeft(pod=n.pod, reason=n.reason) for n in result.remaining],
        disruption_budgets=sorted(budgets),
        seconds=round(result.seconds, 3),
        problem=result.problem,
    )
    return ScalingEvent(detail, at)


def event_schema(detail: type[_Detail]) -> dict[str, Any]:
    """The JSON Schema of a whole event of this detail type, as a rule's target receives it."""
    schema = detail.model_json_schema(by_alias=True)
    definitions = schema.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://nodescaler/events/schemas/{detail.schema_name()}.json",
        "title": f"nodescaler: {detail.detail_type}",
        "description": (detail.__doc__ or "").strip(),
        "type": "object",
        "required": ["version", "id", "detail-type", "source", "time", "region", "detail"],
        "properties": {
            "version": {"type": "string"},
            "id": {"type": "string"},
            "detail-type": {"const": detail.detail_type},
            "source": {"const": SOURCE},
            "account": {"type": "string"},
            "time": {"type": "string", "format": "date-time"},
            "region": {"type": "string"},
            "resources": {"type": "array", "items": {"type": "string"}},
            "detail": schema,
        },
        "$defs": definitions,
    }

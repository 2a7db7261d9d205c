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
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema

from nodescaler.domain.scale_down.drain import DrainOutcome, DrainResult
from nodescaler.domain.scale_up.backoff import Backoff
from nodescaler.domain.scaling.decision import Decision

SOURCE = "nodescaler"
# How an eviction refused by a budget is worded (adapters.k8s.evictions): its budget's name.
_BUDGET = re.compile(r"blocked by PodDisruptionBudget (\S+)")


def _said(text: str) -> Any:
    """A field's description: what its schema tells whoever routes the events."""
    return Field(description=text)


class _Detail(BaseModel):
    """What every event's detail says: which cluster and node group it is about."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        json_schema_serialization_defaults_required=True,  # always sent, so required
    )
    detail_type: ClassVar[str]

    cluster: Annotated[str, _said("the deployment's clusterName; empty when it names none")]
    node_group: Annotated[str, _said("the Auto Scaling group's name")]

    @classmethod
    def schema_name(cls) -> str:
        """Its schema's and sample's file name: "Node Group Resized" → node-group-resized."""
        return cls.detail_type.lower().replace(" ", "-")


class NodeGroupResized(_Detail):
    """nodescaler changed a node group's desired capacity (never in dry-run, which changes
    nothing)."""

    detail_type: ClassVar[str] = "Node Group Resized"

    policy: Annotated[str, _said("the scaling policy that decided")]
    direction: Literal["up", "down"]
    previous: Annotated[int, _said("the desired capacity before")]
    desired: Annotated[int, _said("the desired capacity asked for")]
    in_service: Annotated[int | None, _said("instances in service when decided")]
    min_replicas: Annotated[int, _said("the policy's bounds within the group's own")]
    max_replicas: int
    recommendation: Annotated[int, _said("every metric combined, before behavior and limits")]
    limited_by: Annotated[list[str], _said("what held it back from the recommendation")]
    reason: Annotated[str, _said("the decision's reason, as its log line and audit item say it")]
    decided_at: AwareDatetime


class NodeGroupBackedOff(_Detail):
    """A scale-up failed (a launch failed, or instances were not in service in time): the
    group gets no new instances until `until`, and the expanders look elsewhere."""

    detail_type: ClassVar[str] = "Node Group Backed Off"

    until: AwareDatetime
    seconds: Annotated[int, _said("this backoff's length; the next failure doubles it")]
    reason: Annotated[str, _said("what failed, in AWS's words where it gave some")]
    failed_at: AwareDatetime
    noticed_by: Annotated[
        Literal["launch-failure-event", "evaluation"],
        _said("Auto Scaling's launch-failure event, or an evaluation watching its scale-up"),
    ]


class PodLeft(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    pod: Annotated[str, _said("namespace/name")]
    reason: str


class _DrainDetail(_Detail):
    """A drain's end: the node, what left it and what stayed, and what Auto Scaling was told."""

    instance_id: str
    node: Annotated[str | None, _said("the Kubernetes node; null when the instance has none")]
    cause: Literal["lifecycle-action", "spot-interruption", "rebalance-recommendation"]
    lifecycle_result: Annotated[
        Literal["CONTINUE", "ABANDON"] | None,
        _said("sent with CompleteLifecycleAction; null for a Spot warning, which has none"),
    ]
    evicted: Annotated[list[str], _said("the pods evicted, namespace/name")]
    remaining: Annotated[list[PodLeft], _said("still on the node at the end, and why")]
    disruption_budgets: Annotated[
        list[str], _said("the PodDisruptionBudgets that refused those pods' evictions")
    ]
    seconds: Annotated[float, _said("how long the drain took")]
    problem: Annotated[str | None, _said("what failed, when something did")]


class NodeDrained(_DrainDetail):
    """Every pod that had to move has left the node."""

    detail_type: ClassVar[str] = "Node Drained"
    outcome: Literal["drained"] = "drained"


class NodeDrainTimedOut(_DrainDetail):
    """Pods were still on the node at the deadline (a PodDisruptionBudget, or pods slow to
    stop): the instance goes all the same, with `lifecycleResult`."""

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
    schema = detail.model_json_schema(
        by_alias=True, mode="serialization", schema_generator=_UntitledFields
    )
    definitions = schema.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"nodescaler: {detail.detail_type}",
        "description": schema["description"],
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


class _UntitledFields(GenerateJsonSchema):
    """No generated title on each field ("Nodegroup"): the field's name says it better."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

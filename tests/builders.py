"""Small builders shared by the tests: policies from plain dicts, readings, a fixed instant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from nodescaler.domain.policy import MetricBase, NodeGroupPolicy
from nodescaler.domain.scale_up.backoff import Backoff
from nodescaler.domain.scaling.acted import record_scale
from nodescaler.domain.scaling.autoscaler import Evaluation, decide
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.readings import MetricReading, Reading
from nodescaler.ports import StateStore

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@dataclass
class VirtualClock:
    """The Clock port for tests: stands still until told to move."""

    at: datetime = T0

    def now(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def queue_metric(name: str = "jobs", per_node: float = 4) -> dict[str, Any]:
    return {
        "type": "SQSQueue",
        "name": name,
        "sqsQueue": {"queue": name},
        "target": {"type": "AverageValue", "averageValue": per_node},
    }


def reservation_metric(resource: str = "cpu", percent: float = 60) -> dict[str, Any]:
    return {
        "type": "CapacityReservation",
        "capacityReservation": {"resource": resource},
        "target": {"type": "Utilization", "averageUtilization": percent},
    }


def value_metric(name: str, value: float) -> dict[str, Any]:
    return {
        "type": "CloudWatch",
        "name": name,
        "cloudWatch": {"metric": {"namespace": "App", "metricName": name}},
        "target": {"type": "Value", "value": value},
    }


def policy(
    *metrics: dict[str, Any],
    min_replicas: int = 0,
    max_replicas: int = 1000,
    behavior: dict[str, Any] | None = None,
    name: str = "test-policy",
) -> NodeGroupPolicy:
    spec = _spec(metrics, min_replicas, max_replicas, behavior)
    return NodeGroupPolicy.model_validate({"metadata": {"name": name}, "spec": spec})


def policy_document(
    name: str,
    *metrics: dict[str, Any],
    min_replicas: int = 0,
    max_replicas: int = 1000,
    behavior: dict[str, Any] | None = None,
) -> str:
    """The same policy as a file in the functions' policies folder."""
    document = {
        "apiVersion": "nodescaler.io/v1alpha1",
        "kind": "NodeGroupPolicy",
        "metadata": {"name": name},
        "spec": _spec(metrics, min_replicas, max_replicas, behavior),
    }
    return yaml.safe_dump(document, sort_keys=False)


def _spec(
    metrics: tuple[dict[str, Any], ...],
    min_replicas: int,
    max_replicas: int,
    behavior: dict[str, Any] | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "metrics": list(metrics) or [queue_metric()],
    }
    if behavior is not None:
        spec["behavior"] = behavior
    return spec


def metric(spec: dict[str, Any]) -> MetricBase:
    """A validated metric spec: the only metric of a throwaway policy."""
    return policy(spec).spec.metrics[0]


# Behavior that leaves only the proportional function: no window, no rate limit.
UNLIMITED = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 100000, "periodSeconds": 1}],
    },
    "scaleDown": {
        "stabilizationWindowSeconds": 0,
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}],
    },
}
# No window, no tolerance, no rate limit, from zero too: the group follows its metrics
# exactly and at once.
EXACT = {
    "scaleUp": {
        "stabilizationWindowSeconds": 0,
        "tolerance": 0,
        "policies": [{"type": "Replicas", "value": 100000, "periodSeconds": 1}],
    },
    "scaleDown": {
        "stabilizationWindowSeconds": 0,
        "tolerance": 0,
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}],
    },
}


def readings(at: datetime = T0, **values: float) -> dict[str, Reading]:
    return {name.replace("_", "-"): MetricReading(value=v, at=at) for name, v in values.items()}


def run(
    the_policy: NodeGroupPolicy,
    current: int,
    values: dict[str, Reading],
    history: History | None = None,
    now: datetime = T0,
    size: GroupSize | None = None,
    backoff: Backoff | None = None,
    ceiling: Ceiling | None = None,
) -> Evaluation:
    return decide(
        node_group="ng-test",
        policy=the_policy,
        size=size or GroupSize(current=current),
        readings=values,
        history=history or History(),
        now=now,
        backoff=backoff,
        ceiling=ceiling,
    )


def act(the_policy: NodeGroupPolicy, evaluation: Evaluation) -> History:
    """The history after the decision was carried out, as the evaluator will record it."""
    return record_scale(evaluation.history, the_policy, evaluation.decision)


class StaleReads:
    """A store whose loads return the state as it was before the other evaluator wrote."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._snapshot: GroupState | None = None

    def load(self, group: str) -> GroupState:
        if self._snapshot is None:
            self._snapshot = self._store.load(group)
        return self._snapshot

    def save(self, state: GroupState, **kwargs: Any) -> GroupState:
        return self._store.save(state, **kwargs)

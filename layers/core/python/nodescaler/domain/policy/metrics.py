"""A policy's metrics: targets, fallbacks, and one model per metric type (`MetricSpec`)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from nodescaler.domain.groups.optin import NAME_PATTERN
from nodescaler.domain.policy.pending_pods_source import PendingPodsSource
from nodescaler.domain.policy.sources import (
    CapacityReservationSource,
    CloudWatchSource,
    PredictiveSource,
    PrometheusSource,
    ReservationHeadroom,
    ScheduleSource,
    SqsQueueSource,
)
from nodescaler.domain.policy.spec import PositiveAmount, Spec

# --- targets -----------------------------------------------------------------------------


class TargetType(StrEnum):
    VALUE = "Value"
    AVERAGE_VALUE = "AverageValue"
    UTILIZATION = "Utilization"


_TARGET_FIELD = {
    TargetType.VALUE: "value",
    TargetType.AVERAGE_VALUE: "averageValue",
    TargetType.UTILIZATION: "averageUtilization",
}


class MetricTarget(Spec):
    """What the metric should read: a total (`Value`), a per-replica amount or a percentage."""

    type: TargetType
    value: PositiveAmount | None = None
    average_value: PositiveAmount | None = None
    average_utilization: (
        Annotated[float, Field(strict=True, gt=0, le=100, allow_inf_nan=False)] | None
    ) = None

    @model_validator(mode="after")
    def _exactly_the_field_of_its_type(self) -> Self:
        wanted = _TARGET_FIELD[self.type]
        given = {alias for alias in _TARGET_FIELD.values() if self._by_alias(alias) is not None}
        if wanted not in given:
            raise ValueError(f"target type {self.type} needs {wanted}")
        if extra := sorted(given - {wanted}):
            raise ValueError(f"target type {self.type} takes {wanted}, not {', '.join(extra)}")
        return self

    def _by_alias(self, alias: str) -> float | None:
        return {
            "value": self.value,
            "averageValue": self.average_value,
            "averageUtilization": self.average_utilization,
        }[alias]

    @property
    def amount(self) -> float:
        """The target number, whichever field holds it."""
        amount = self._by_alias(_TARGET_FIELD[self.type])
        assert amount is not None  # guaranteed by the validator
        return amount

    def describe(self) -> str:
        if self.type is TargetType.VALUE:
            return f"{self.amount:g} total"
        if self.type is TargetType.AVERAGE_VALUE:
            return f"{self.amount:g}/replica"
        return f"{self.amount:g}%"


PER_REPLICA_ONE = MetricTarget(type=TargetType.AVERAGE_VALUE, average_value=1)


# --- metrics -----------------------------------------------------------------------------


class FallbackAction(StrEnum):
    """What a metric votes once it has failed `failureThreshold` evaluations in a row."""

    HOLD = "hold"  # today's rule, named: no scale-in while it fails, nothing else changes
    CURRENT_REPLICAS = "currentReplicas"  # the group's current size (KEDA's currentReplicas)
    IF_HIGHER = "ifHigher"  # the current size or `replicas`, the higher (currentReplicasIfHigher)


# KEDA's fallback `behavior` values, as nodescaler spells them (its field is `action`).
KEDA_BEHAVIORS = {
    "static": "replicas alone",
    "currentReplicas": "action: currentReplicas",
    "currentReplicasIfHigher": "action: ifHigher (with replicas)",
    "currentReplicasIfLower": "not offered",
}


class Fallback(Spec):
    """KEDA's fallback, per metric: after more than `failureThreshold` failed evaluations in a
    row (missing, stale or invalid; 0: from the first) the metric votes `replicas` (KEDA's
    static), or what `action` says. A vote below the current size is the operator's leave
    to scale in on a failed metric."""

    failure_threshold: Annotated[int, Field(strict=True, ge=0, le=10_000)]
    replicas: Annotated[int, Field(strict=True, ge=0, le=100_000)] | None = None
    action: FallbackAction | None = None

    @model_validator(mode="before")
    @classmethod
    def _not_kedas_behavior(cls, data: Any) -> Any:
        """KEDA's `behavior` is spelled `action` here, with other values: say which."""
        if isinstance(data, dict) and "behavior" in data:
            spelled = "; ".join(f"{k} is {v}" for k, v in KEDA_BEHAVIORS.items())
            raise ValueError(f"KEDA's behavior is nodescaler's action ({spelled})")
        return data

    @model_validator(mode="after")
    def _replicas_or_action(self) -> Self:
        if self.action is FallbackAction.IF_HIGHER:
            if self.replicas is None:
                raise ValueError("action ifHigher needs replicas: the size to keep at least")
        elif self.action is not None and self.replicas is not None:
            raise ValueError(
                f"give replicas or action, not both: action {self.action} takes no replicas "
                "(only ifHigher does)"
            )
        elif self.action is None and self.replicas is None:
            raise ValueError("give replicas (a fixed size) or action (hold, currentReplicas)")
        return self

    def describe(self) -> str:
        if self.action is None:
            return f"replicas {self.replicas}"
        if self.action is FallbackAction.IF_HIGHER:
            return f"ifHigher {self.replicas}"
        return str(self.action)


class MetricBase(Spec):
    """A metric of a policy. Each metric type is one subclass, which says what a document
    writes: its `type` tag, its source's model and its allowed targets; what it reads and
    whether it reads the cluster is its descriptor's (`descriptors`)."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    target: MetricTarget
    # A reading older than this is treated as missing: it can never cause a scale-in.
    stale_after_seconds: Annotated[int, Field(strict=True, ge=10, le=86_400)] = 300
    # What it votes once it has failed this often in a row; without one it holds scale-in.
    fallback: Fallback | None = None

    allowed_targets: ClassVar[frozenset[TargetType]] = frozenset(TargetType)
    # Computed from the group's own recorded demand rather than read from a source.
    reads_history: ClassVar[bool] = False

    @field_validator("target")
    @classmethod
    def _target_fits_metric(cls, target: MetricTarget) -> MetricTarget:
        if target.type not in cls.allowed_targets:
            allowed = " or ".join(sorted(cls.allowed_targets))
            raise ValueError(
                f"{target.type} is not valid for a {cls.type_tag()} metric (use {allowed})"
            )
        return target

    @model_validator(mode="after")
    def _fresh_within_its_period(self) -> Self:
        period = self.reading_period()
        if period is not None and self.stale_after_seconds < period[1]:
            field, seconds = period
            raise ValueError(
                f"metric {self.key!r}: staleAfterSeconds ({self.stale_after_seconds}) is shorter "
                f"than its {field} ({seconds}): a reading is dated at the start of its period, "
                f"so it would always be stale; give staleAfterSeconds {seconds} or more"
            )
        if self.fallback is not None and self.reads_history:
            raise ValueError(
                f"metric {self.key!r}: a forecast never fails (it abstains), so it takes no "
                "fallback"
            )
        return self

    @property
    def headroom_from_arrivals(self) -> bool:
        """Whether its target's room is sized by the group's arrivals (a reservation's
        `headroom: fromArrivals`, `domain.ahead.arrivals.sized_reservations`)."""
        return False

    def reading_period(self) -> tuple[str, int] | None:
        """The field and seconds of the period a reading sums up, for a metric whose source
        dates it at the period's start; None for one read as it is at evaluation time."""
        return None

    @classmethod
    def type_tag(cls) -> str:
        """The `type` a document gives this metric type ("SQSQueue")."""
        return str(cls.model_fields["type"].annotation.__args__[0])  # type: ignore[union-attr]

    @property
    def type_name(self) -> str:
        return str(getattr(self, "type", type(self).__name__))

    @property
    def key(self) -> str:
        """The metric's unique name within its policy."""
        return self.name or self.default_name()

    def default_name(self) -> str:
        return re.sub(r"(?<!^)(?=[A-Z][a-z])", "-", self.type_name).lower()


class SqsQueueMetric(MetricBase):
    type: Literal["SQSQueue"]
    sqs_queue: SqsQueueSource
    allowed_targets: ClassVar = frozenset({TargetType.VALUE, TargetType.AVERAGE_VALUE})


class CloudWatchMetric(MetricBase):
    type: Literal["CloudWatch"]
    cloud_watch: CloudWatchSource

    def reading_period(self) -> tuple[str, int] | None:
        return "cloudWatch.periodSeconds", self.cloud_watch.period_seconds


class PrometheusMetric(MetricBase):
    type: Literal["Prometheus"]
    prometheus: PrometheusSource


class ScheduleMetric(MetricBase):
    """Its reading is the scheduled replica count, so the natural target is 1 per replica."""

    type: Literal["Schedule"]
    schedule: ScheduleSource
    target: MetricTarget = PER_REPLICA_ONE
    allowed_targets: ClassVar = frozenset({TargetType.VALUE, TargetType.AVERAGE_VALUE})


class CapacityReservationMetric(MetricBase):
    type: Literal["CapacityReservation"]
    capacity_reservation: CapacityReservationSource

    @model_validator(mode="after")
    def _headroom_of_a_utilization(self) -> Self:
        headroom = self.capacity_reservation.headroom
        if headroom is ReservationHeadroom.FROM_ARRIVALS and (
            self.target.type is not TargetType.UTILIZATION
        ):
            raise ValueError(
                f"metric {self.key!r}: headroom fromArrivals sizes the room of a Utilization "
                f"target (the share of allocatable kept free), not of {self.target.type}"
            )
        return self

    @property
    def headroom_from_arrivals(self) -> bool:
        return self.capacity_reservation.headroom is ReservationHeadroom.FROM_ARRIVALS

    def default_name(self) -> str:
        return f"reservation-{self.capacity_reservation.resource}"


class PendingPodsMetric(MetricBase):
    """Its reading is the number of new nodes of this group the pending pods need.

    It only ever asks for more: with nothing pending it abstains rather than vote
    to keep the current size, so it never blocks another metric's scale-in.
    """

    type: Literal["PendingPods"]
    pending_pods: PendingPodsSource = PendingPodsSource()
    target: MetricTarget = PER_REPLICA_ONE
    allowed_targets: ClassVar = frozenset({TargetType.AVERAGE_VALUE})


class PredictiveMetric(MetricBase):
    """Its reading is the forecast replica count one lead time ahead. It can start a
    scale-up early, never cause a scale-in: it is a floor under the live metrics."""

    type: Literal["Predictive"]
    predictive: PredictiveSource = PredictiveSource()
    target: MetricTarget = PER_REPLICA_ONE
    allowed_targets: ClassVar = frozenset({TargetType.AVERAGE_VALUE})

    @field_validator("target")
    @classmethod
    def _one_a_replica(cls, target: MetricTarget) -> MetricTarget:
        if target != PER_REPLICA_ONE:
            raise ValueError("a forecast is in replicas: its target is AverageValue 1, or none")
        return target

    # Computed from the group's recorded history (`domain.ahead.forecast`), not read by a producer.
    reads_history: ClassVar[bool] = True


MetricSpec = Annotated[
    SqsQueueMetric
    | CloudWatchMetric
    | ScheduleMetric
    | CapacityReservationMetric
    | PendingPodsMetric
    | PredictiveMetric
    | PrometheusMetric,
    Field(discriminator="type"),
]
# The `type` tags, from the union above: a metric type is declared there and nowhere else.
METRIC_TYPES: tuple[str, ...] = tuple(
    model.type_tag() for model in get_args(get_args(MetricSpec)[0])
)

"""Policy documents: the autoscaling/v2 HPA spec, "pods" renamed to "replicas", per node group.

A policy is user-written YAML, so every model forbids unknown fields and every check
names the field it rejects. Defaults for `behavior` are chosen for machines, not pods;
`DEFAULT_SCALE_UP` and `DEFAULT_SCALE_DOWN` say why.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self, get_args
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from nodescaler.domain.cron import cron_problem
from nodescaler.domain.optin import NAME_PATTERN
from nodescaler.domain.quantity import parse_quantity
from nodescaler.domain.token_origins import origin

PositiveAmount = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]


class Spec(BaseModel):
    """Base of every user-written model: camelCase in YAML, unknown fields rejected, immutable.
    Numbers and flags are strict: `true` is not 1, and "5" is not 5."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


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


# --- metric sources ----------------------------------------------------------------------


class SqsQueueSource(Spec):
    """Queue length the way KEDA counts it: visible + in flight (+ delayed, if asked)."""

    queue: Annotated[str, Field(min_length=1, max_length=1024)]
    include_in_flight: Annotated[bool, Field(strict=True)] = True
    include_delayed: Annotated[bool, Field(strict=True)] = False


_STATISTIC = re.compile(
    r"^(SampleCount|Average|Sum|Minimum|Maximum|(p|tm|wm|tc|ts)\d{1,2}(\.\d{1,2})?|IQM)$"
)
_EXPRESSION_ID = re.compile(r"^[a-z][a-zA-Z0-9_]{0,254}$")


class CloudWatchMetricStat(Spec):
    namespace: Annotated[str, Field(min_length=1, max_length=255)]
    metric_name: Annotated[str, Field(min_length=1, max_length=255)]
    dimensions: dict[str, str] = Field(default_factory=dict, max_length=30)
    statistic: str = "Average"

    @field_validator("statistic")
    @classmethod
    def _known_statistic(cls, statistic: str) -> str:
        if not _STATISTIC.match(statistic):
            raise ValueError(
                f"unknown statistic {statistic!r}: use SampleCount, Average, Sum, Minimum, "
                "Maximum or a percentile such as p99"
            )
        return statistic


class CloudWatchSource(Spec):
    """One metric and statistic, or a metric-math expression over named metrics."""

    metric: CloudWatchMetricStat | None = None
    expression: Annotated[str, Field(min_length=1, max_length=2048)] | None = None
    metrics: dict[str, CloudWatchMetricStat] = Field(default_factory=dict, max_length=100)
    period_seconds: Annotated[int, Field(strict=True)] = 60

    @field_validator("period_seconds")
    @classmethod
    def _cloudwatch_period(cls, period: int) -> int:
        if period not in (1, 5, 10, 20, 30) and (period <= 0 or period % 60):
            raise ValueError("periodSeconds must be 1, 5, 10, 20, 30 or a multiple of 60")
        return period

    @field_validator("metrics")
    @classmethod
    def _expression_ids(cls, metrics: dict[str, CloudWatchMetricStat]) -> dict[str, object]:
        for metric_id in metrics:
            if not _EXPRESSION_ID.match(metric_id):
                raise ValueError(
                    f"metric id {metric_id!r} must start with a lowercase letter and hold only "
                    "letters, digits and underscores"
                )
        return dict(metrics)

    @model_validator(mode="after")
    def _metric_or_expression(self) -> Self:
        if (self.metric is None) == (self.expression is None):
            raise ValueError("give exactly one of metric or expression")
        if self.metric is not None and self.metrics:
            raise ValueError("metrics (the ids of an expression) need an expression")
        return self


_REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$")
_WORKSPACE_ID = re.compile(r"^ws-[A-Za-z0-9-]{1,64}$")
_WORKSPACE_ARN = re.compile(
    r"^arn:aws[a-z-]*:aps:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"workspace/(?P<id>ws-[A-Za-z0-9-]{1,64})$"
)
_SECRET = re.compile(
    r"^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:)?[A-Za-z0-9/_+=.@-]{1,512}$"
)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class PrometheusSource(Spec):
    """A PromQL instant query whose answer is one number: a scalar or a single series. Sent
    to an Amazon Managed Service for Prometheus `workspace` (its ARN, or its id and
    `region`: signed with SigV4), or to any Prometheus-compatible `serverAddress` (with a
    bearer token from the Secrets Manager secret `bearerTokenSecret`, if it asks for one)."""

    query: Annotated[str, Field(min_length=1, max_length=10_000)]
    server_address: str | None = None
    workspace: str | None = None
    region: str | None = None
    bearer_token_secret: str | None = None
    # the whole request's deadline, not one socket read's (a server may drip its answer)
    timeout_seconds: Annotated[float, Field(strict=True, gt=0, le=20, allow_inf_nan=False)] = 5

    @field_validator("query")
    @classmethod
    def _not_blank(cls, query: str) -> str:
        if not query.strip():
            raise ValueError("query is blank")
        return query

    @field_validator("server_address")
    @classmethod
    def _http_address(cls, address: str | None) -> str | None:
        if address is None:  # `serverAddress: null` is as if unset
            return None
        url = urlsplit(address)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"serverAddress {address!r} must be an http:// or https:// URL")
        if url.username or url.password:
            raise ValueError("serverAddress must hold no credentials: use bearerTokenSecret")
        if url.query or url.fragment:
            raise ValueError(f"serverAddress {address!r} must have no query or fragment")
        return address.rstrip("/")

    @field_validator("workspace")
    @classmethod
    def _workspace_id_or_arn(cls, workspace: str | None) -> str | None:
        if workspace is None:
            return None
        if not (_WORKSPACE_ID.match(workspace) or _WORKSPACE_ARN.match(workspace)):
            raise ValueError(
                f"workspace {workspace!r} must be an Amazon Managed Service for Prometheus "
                "workspace id (ws-...) or its ARN (arn:aws:aps:<region>:<account>:workspace/ws-...)"
            )
        return workspace

    @field_validator("region")
    @classmethod
    def _aws_region(cls, region: str | None) -> str | None:
        if region is None:
            return None
        if not _REGION.match(region):
            raise ValueError(f"region {region!r} is not an AWS region name such as eu-west-1")
        return region

    @field_validator("bearer_token_secret")
    @classmethod
    def _secret_name_or_arn(cls, secret: str) -> str:
        if not _SECRET.match(secret):
            raise ValueError(
                f"bearerTokenSecret {secret!r} must be a Secrets Manager secret's name or ARN"
            )
        return secret

    @model_validator(mode="after")
    def _one_endpoint(self) -> Self:
        if (self.server_address is None) == (self.workspace is None):
            raise ValueError("give exactly one of serverAddress or workspace")
        if self.workspace is not None:
            if self.bearer_token_secret is not None:
                raise ValueError(
                    "bearerTokenSecret is for a serverAddress: a workspace's queries are "
                    "signed with the function's role (SigV4)"
                )
            arn = _WORKSPACE_ARN.match(self.workspace)
            if arn and self.region is not None and self.region != arn["region"]:
                raise ValueError(
                    f"region {self.region} differs from the workspace ARN's {arn['region']}"
                )
        elif self.region is not None:
            raise ValueError("region is for a workspace given by its id")
        if self.bearer_token_secret is not None and self.server_address is not None:
            origin(self.server_address)  # the token is bound to it: a host it can be told by
            url = urlsplit(self.server_address)
            if url.scheme != "https" and url.hostname not in _LOOPBACK:
                raise ValueError(
                    "a bearer token is sent only over https: serverAddress "
                    f"{self.server_address!r} is http"
                )
        return self

    @property
    def workspace_id(self) -> str | None:
        if self.workspace is None:
            return None
        arn = _WORKSPACE_ARN.match(self.workspace)
        return arn["id"] if arn else self.workspace

    @property
    def workspace_region(self) -> str | None:
        """The workspace's region when the policy says it (None: the function's own)."""
        arn = _WORKSPACE_ARN.match(self.workspace or "")
        return arn["region"] if arn else self.region

    @property
    def endpoint(self) -> str:
        """Where the query goes, as explain and errors name it."""
        return self.server_address or f"workspace {self.workspace}"


def _fires_every_year(expression: str) -> bool:
    """Whether the expression fires at least once in each of four years in a row (a leap
    year among them): a window whose end never comes would hold its group forever."""
    for year in range(2001, 2005):
        try:
            fire = croniter(expression, datetime(year, 1, 1) - timedelta(minutes=1)).get_next(
                datetime
            )
        except CroniterBadDateError:  # no such date at all (30 February)
            return False
        if fire.year != year:
            return False
    return True


def _check_cron(expression: str) -> str:
    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise ValueError(f"cron expression {expression!r}: {cron_problem(expression)}")
    if not _fires_every_year(expression):
        raise ValueError(
            f"cron expression {expression!r} does not fire every year (a date that does not "
            "exist, or only in leap years): its window would never open or never close"
        )
    return expression


def _check_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    # OSError: a folder of zones ("Europe"), or a name too long for a file name
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"unknown time zone {name!r} (use an IANA name such as Europe/Paris)"
        ) from None
    return name


class ScheduleEntry(Spec):
    """`replicas` from each `start` until the next `end`: cron, in the schedule's time zone."""

    name: str | None = None
    start: str
    end: str
    replicas: Annotated[int, Field(strict=True, ge=0)]

    _cron = field_validator("start", "end")(_check_cron)


class ScheduleSource(Spec):
    """Scheduled capacity: the first entry whose window is open wins, else `defaultReplicas`."""

    time_zone: str = "UTC"
    default_replicas: Annotated[int, Field(strict=True, ge=0)] = 0
    entries: Annotated[list[ScheduleEntry], Field(min_length=1, max_length=100)]

    _zone = field_validator("time_zone")(_check_zone)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)


class ReservationResource(StrEnum):
    CPU = "cpu"
    MEMORY = "memory"
    PODS = "pods"


class CapacityReservationSource(Spec):
    """Requests of the pods on the group's Ready, schedulable nodes over their allocatable."""

    resource: ReservationResource
    include_daemon_sets: Annotated[bool, Field(strict=True)] = True
    include_mirror_pods: Annotated[bool, Field(strict=True)] = True


class BufferToleration(Spec):
    """A taint the buffer's pods tolerate, as a pod's toleration says it."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""


class CapacityBuffer(Spec):
    """Room for `pods` pods of one shape, kept free in the group at all times (the capacity
    buffers of Cluster Autoscaler and Karpenter): new pods of that shape start at once
    instead of waiting for a node to boot. Planned as pending pods are, so the room is
    right under bin-packing where a percentage is not."""

    pods: Annotated[int, Field(strict=True, ge=1, le=10_000)]
    # cpu, memory and extended resources (nvidia.com/gpu), as a pod's requests say them
    requests: Annotated[
        dict[str, Annotated[str, Field(strict=True)] | StrictInt | StrictFloat],
        Field(min_length=1, max_length=16),
    ]
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: Annotated[list[BufferToleration], Field(max_length=32)] = Field(
        default_factory=list
    )

    @field_validator("requests")
    @classmethod
    def _quantities(cls, requests: dict[str, str | int | float]) -> dict[str, str | int | float]:
        amounts = []
        for name, amount in requests.items():
            if name not in ("cpu", "memory") and "/" not in name:
                raise ValueError(
                    f"{name!r}: a buffer's pods request cpu, memory or an extended resource "
                    "such as nvidia.com/gpu"
                )
            try:
                amounts.append(parse_quantity(amount))
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None
        if all(amount == 0 for amount in amounts):
            raise ValueError("requests nothing: a pod that takes no room needs no buffer")
        return requests

    def describe(self) -> str:
        """As `explain` shows it: "room for 20 × 1 cpu/2Gi"."""
        shape = "/".join(
            f"{amount} cpu" if name == "cpu" else f"{amount} {name}" if "/" in name else str(amount)
            for name, amount in self.requests.items()
        )
        return f"room for {self.pods} × {shape}"


class Consolidation(StrEnum):
    """Which of the group's nodes pending pods may shed (Karpenter's consolidation policy)."""

    WHEN_EMPTY = "WhenEmpty"  # only nodes nothing but DaemonSets run on: no pod is evicted
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"  # also those whose pods fit elsewhere


class PendingPodsSource(Spec):
    """Unschedulable pods that would fit this group; pods below the cutoff priority are ignored.
    `buffer`: room for pods not yet created, kept free in the group. `consolidation`: which
    unneeded nodes it votes to shed (WhenEmpty suits jobs an eviction would restart)."""

    expendable_priority_cutoff: Annotated[int, Field(strict=True)] = -10
    consolidation: Consolidation = Consolidation.WHEN_EMPTY_OR_UNDERUTILIZED
    buffer: Annotated[list[CapacityBuffer], Field(max_length=8)] = Field(default_factory=list)


class ForecastMode(StrEnum):
    """As EC2 Auto Scaling's predictive scaling names them."""

    FORECAST_ONLY = "ForecastOnly"  # recorded, shown, never acted on
    FORECAST_AND_SCALE = "ForecastAndScale"  # a floor under the live metrics' recommendation


FORECAST_PERIOD_SECONDS = 300  # the forecast's slots: CloudWatch's 5-minute periods fill them


class DemandMetric(Spec):
    """A CloudWatch metric whose history is the group's demand: `perNode` of it is what one
    node handles, so a datapoint asks for ceil(value / perNode) nodes."""

    metric: CloudWatchMetricStat
    per_node: PositiveAmount
    period_seconds: Annotated[int, Field(strict=True)] = FORECAST_PERIOD_SECONDS

    @field_validator("period_seconds")
    @classmethod
    def _one_slot(cls, period: int) -> int:
        if period != FORECAST_PERIOD_SECONDS:
            raise ValueError(
                f"periodSeconds must be {FORECAST_PERIOD_SECONDS}: one datapoint for each of "
                "the forecast's five-minute slots"
            )
        return period

    def describe(self) -> str:
        """Where its demand comes from, in one line: CloudWatch App/Requests Sum ÷ 50 a node."""
        stat = self.metric
        return (
            f"CloudWatch {stat.namespace}/{stat.metric_name} {stat.statistic} "
            f"÷ {self.per_node:g} a node"
        )


class PredictiveSource(Spec):
    """A forecast of the group's own demand (the nodes its live metrics asked for, or a
    named CloudWatch metric's history read each time, `cloudWatch`), with
    daily seasonality in `timeZone` from 24 hours of history and weekly from 7 days (up
    to 14 are kept), one lead time ahead: the group's measured time from a scale request
    to Ready nodes unless `leadTimeSeconds` says otherwise. With `warmPool`, it also
    keeps the group's warm pool at the growth it forecasts (`domain.warm_pool`)."""

    mode: ForecastMode = ForecastMode.FORECAST_ONLY
    lead_time_seconds: Annotated[int, Field(strict=True, ge=60, le=3600)] | None = None
    time_zone: str = "UTC"
    cloud_watch: DemandMetric | None = None
    warm_pool: Annotated[bool, Field(strict=True)] = False

    _zone = field_validator("time_zone")(_check_zone)

    @model_validator(mode="after")
    def _warm_pool_is_acted_on(self) -> PredictiveSource:
        if self.warm_pool and self.mode is not ForecastMode.FORECAST_AND_SCALE:
            raise ValueError(
                "warmPool sizes the group's warm pool, which a ForecastOnly forecast never "
                "does: use mode ForecastAndScale"
            )
        return self

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)


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
    """A metric of a policy. Each metric type is one subclass, which says everything about
    the type: its `type` tag, its source's model, its allowed targets and whether it reads
    the Kubernetes cluster; its producer is registered in `nodescaler.wiring`."""

    name: Annotated[str, Field(pattern=NAME_PATTERN)] | None = None
    target: MetricTarget
    # A reading older than this is treated as missing: it can never cause a scale-in.
    stale_after_seconds: Annotated[int, Field(strict=True, ge=10, le=86_400)] = 300
    # What it votes once it has failed this often in a row; without one it holds scale-in.
    fallback: Fallback | None = None

    allowed_targets: ClassVar[frozenset[TargetType]] = frozenset(TargetType)
    # Read from the cluster's API server: the evaluate function then carries the
    # Kubernetes client, and the stack needs a cluster name.
    reads_cluster: ClassVar[bool] = False
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
    reads_cluster: ClassVar = True

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
    reads_cluster: ClassVar = True


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

    # Computed from the group's recorded history (`domain.forecast`), not read by a producer.
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


# --- behavior ----------------------------------------------------------------------------


class ScalingPolicyType(StrEnum):
    REPLICAS = "Replicas"
    PERCENT = "Percent"


class ScalingPolicy(Spec):
    """At most `value` replicas (or percent) of change within any `periodSeconds`."""

    type: ScalingPolicyType
    value: Annotated[int, Field(strict=True, gt=0)]
    period_seconds: Annotated[int, Field(strict=True, ge=1, le=1800)]


class SelectPolicy(StrEnum):
    MAX = "Max"
    MIN = "Min"
    DISABLED = "Disabled"


class ScalingRules(Spec):
    """One direction of `behavior`, as written; unset fields take nodescaler's defaults."""

    stabilization_window_seconds: Annotated[int, Field(strict=True, ge=0, le=3600)] | None = None
    select_policy: SelectPolicy | None = None
    policies: Annotated[list[ScalingPolicy], Field(min_length=1, max_length=10)] | None = None
    tolerance: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] | None = None


class Rules(Spec):
    """One direction of `behavior` with every field resolved."""

    stabilization_window_seconds: int
    select_policy: SelectPolicy
    policies: tuple[ScalingPolicy, ...]
    tolerance: float

    def overlay(self, written: ScalingRules | None) -> Rules:
        if written is None:
            return self
        given = {
            name: tuple(value) if isinstance(value, list) else value
            for name in type(written).model_fields
            if (value := getattr(written, name)) is not None
        }
        return self.model_copy(update=given)


DEFAULT_TOLERANCE = 0.1

# Up fast: a node takes minutes to boot, so waiting adds straight to the time pods stay
# pending, and a surplus is undone by the slow scale-down below. The rate limit is there
# only so a runaway metric can't buy a thousand machines in one tick: a group may double
# or add 100 nodes a minute, whichever is more. maxReplicas remains the real cost ceiling.
DEFAULT_SCALE_UP = Rules(
    stabilization_window_seconds=0,
    select_policy=SelectPolicy.MAX,
    policies=(
        ScalingPolicy(type=ScalingPolicyType.PERCENT, value=100, period_seconds=60),
        ScalingPolicy(type=ScalingPolicyType.REPLICAS, value=100, period_seconds=60),
    ),
    tolerance=DEFAULT_TOLERANCE,
)

# Down slowly: removing a node evicts its pods and bringing it back costs a boot, so the
# lower recommendation must hold for 10 minutes (Cluster Autoscaler's scale-down-unneeded
# time) and then at most 20% or 5 nodes go per minute, whichever is more. The HPA's pod
# default (any amount after 5 minutes) would drain a fleet at once on one bad reading.
DEFAULT_SCALE_DOWN = Rules(
    stabilization_window_seconds=600,
    select_policy=SelectPolicy.MAX,
    policies=(
        ScalingPolicy(type=ScalingPolicyType.PERCENT, value=20, period_seconds=60),
        ScalingPolicy(type=ScalingPolicyType.REPLICAS, value=5, period_seconds=60),
    ),
    tolerance=DEFAULT_TOLERANCE,
)


class Behavior(Spec):
    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None

    @property
    def up(self) -> Rules:
        return DEFAULT_SCALE_UP.overlay(self.scale_up)

    @property
    def down(self) -> Rules:
        return DEFAULT_SCALE_DOWN.overlay(self.scale_down)


class ScaleInWindow(Spec):
    """While open (from each `schedule` firing, for `durationMinutes`, in `timeZone`), at
    most `maxNodesPerHour` nodes may go in any hour: a count, or a share of the group's
    current size ("10%", rounded down); 0 forbids scale-in. Karpenter's disruption budgets."""

    name: str | None = None
    schedule: str
    duration_minutes: Annotated[int, Field(strict=True, ge=1, le=7 * 24 * 60)]
    time_zone: str = "UTC"
    max_nodes_per_hour: int | str

    _cron = field_validator("schedule")(_check_cron)
    _zone = field_validator("time_zone")(_check_zone)

    @field_validator("max_nodes_per_hour", mode="before")
    @classmethod
    def _count_or_share(cls, value: object) -> int | str:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and re.fullmatch(r"(100|[1-9]?[0-9])%", value):
            return value
        raise ValueError(
            f'a count of nodes (0 or more) or a share of the group such as "10%", not {value!r}'
        )

    def allowed(self, current: int) -> int:
        budget = self.max_nodes_per_hour
        if isinstance(budget, str):
            return current * int(budget.rstrip("%")) // 100
        return budget

    def describe(self) -> str:
        label = self.name or f"{self.schedule} for {self.duration_minutes} min"
        return f"scale-in window {label} ({self.max_nodes_per_hour} nodes an hour)"


# --- the document ------------------------------------------------------------------------


class PolicySpec(Spec):
    min_replicas: Annotated[int, Field(strict=True, ge=0, le=100_000)]
    max_replicas: Annotated[int, Field(strict=True, ge=1, le=100_000)]
    metrics: Annotated[list[MetricSpec], Field(min_length=1, max_length=20)]
    behavior: Behavior = Behavior()
    # Hours in which scale-in is capped or forbidden (`ScaleInWindow`).
    scale_in_windows: Annotated[list[ScaleInWindow], Field(max_length=20)] = []
    # CloudWatch alarms whose state changes trigger an evaluation at once (the fast path).
    alarms: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=255)]], Field(max_length=20)
    ] = []

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
        return any(m.reads_cluster for m in self.spec.metrics)

    @property
    def reads_pending_pods(self) -> bool:
        """Whether it takes part in the pending-pods plan across groups."""
        return any(isinstance(m, PendingPodsMetric) for m in self.spec.metrics)

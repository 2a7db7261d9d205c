"""Where each metric type reads its value: one source model per type, as a policy writes it
(the pending pods', with its capacity buffers, in `pending_pods_source`)."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Self
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from nodescaler.domain.cluster.snapshot import ReservationResource
from nodescaler.domain.policy.spec import PositiveAmount, Spec, check_cron, check_zone
from nodescaler.domain.token_origins import origin

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


class ScheduleEntry(Spec):
    """`replicas` from each `start` until the next `end`: cron, in the schedule's time zone."""

    name: str | None = None
    start: str
    end: str
    replicas: Annotated[int, Field(strict=True, ge=0)]

    _cron = field_validator("start", "end")(check_cron)


class ScheduleSource(Spec):
    """Scheduled capacity: the first entry whose window is open wins, else `defaultReplicas`."""

    time_zone: str = "UTC"
    default_replicas: Annotated[int, Field(strict=True, ge=0)] = 0
    entries: Annotated[list[ScheduleEntry], Field(min_length=1, max_length=100)]

    _zone = field_validator("time_zone")(check_zone)

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)


class ReservationHeadroom(StrEnum):
    """The room a reservation's `Utilization` target keeps free."""

    TARGET = "target"  # the target's: 60 % keeps two fifths of the nodes free
    # room for the pods a boot time of arrivals brings, at most the target's
    # (`domain.ahead.arrivals.sized_reservations`)
    FROM_ARRIVALS = "fromArrivals"


class CapacityReservationSource(Spec):
    """Requests of the pods on the group's Ready, schedulable nodes, and of the pending pods
    its room is to take, over those nodes' allocatable."""

    resource: ReservationResource
    include_daemon_sets: Annotated[bool, Field(strict=True)] = True
    include_mirror_pods: Annotated[bool, Field(strict=True)] = True
    headroom: ReservationHeadroom = ReservationHeadroom.TARGET


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
    keeps the group's warm pool at the growth it forecasts (`domain.ahead.warm_pool`)."""

    mode: ForecastMode = ForecastMode.FORECAST_ONLY
    lead_time_seconds: Annotated[int, Field(strict=True, ge=60, le=3600)] | None = None
    time_zone: str = "UTC"
    cloud_watch: DemandMetric | None = None
    warm_pool: Annotated[bool, Field(strict=True)] = False

    _zone = field_validator("time_zone")(check_zone)

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

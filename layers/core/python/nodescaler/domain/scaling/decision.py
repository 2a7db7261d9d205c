"""A decision is data: what the core concluded for one node group, every input, and why.

Acting on it is a separate step (and skipped in dry-run). The same record becomes the
log line, the EMF metrics and the audit item.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import AliasChoices, AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from nodescaler.domain.outside_text import MAX_OUTSIDE, MAX_PROBLEM, outside
from nodescaler.domain.scale_up.backoff import Backoff

# A decision is saved twice in its group's state item (the last one and a claimed one) and
# once in its audit item, each limited by DynamoDB to 400 KB: far below that, far above
# any decision (a few KB, waiting pods included).
MAX_DECISION_BYTES = 64_000
WAITING_KEPT = 20  # pods named of those that fit no group, when the decision is cut


class Limit(StrEnum):
    """What held the result back from the raw recommendation."""

    TOLERANCE = "tolerance"
    MISSING_METRIC = "missing-metric"
    STABILIZATION = "stabilization"
    SCALE_UP_RATE = "scale-up-rate"
    SCALE_DOWN_RATE = "scale-down-rate"
    SCALING_DISABLED = "scaling-disabled"
    MIN = "min"
    MAX = "max"
    BACKOFF = "backoff"  # a failed scale-up: no new instances for a while
    PROTECTED = "scale-in-protection"  # instances protected from scale-in stay
    CLUSTER_LIMIT = "cluster-limit"  # the cluster's total nodes, vCPUs or memory
    SCALE_IN_WINDOW = "scale-in-window"  # an open window caps the nodes removed an hour
    FORECAST = "forecast"  # the forecast asked for more than the live metrics
    FALLBACK = "fallback"  # a failing metric's fallback applies (named in the reason, with since)
    PAUSED = "paused"  # a pause held the change (`nodescaler pause` or the paused tag)
    ZONAL_SHIFT = "zonal-shift"  # its zones shifted away (or unreadable): no change there
    BOUNDS_UNREAD = "bounds-unread"  # its EKS node group's scaling config unread: no scale-in
    # a metric missing, stale or invalid: only nodes empty of pods by the cluster's view go
    EMPTY_ONLY = "empty-only"
    # no scale-in below the nodes the group's pods need now: theirs would wait for room
    PODS_NEED_NODES = "pods-need-nodes"
    # no scale-in below the nodes its pods needed within its scale-down window (`pods_floor`)
    RECENTLY_NEEDED = "recently-needed"
    # past the window: empty nodes unneeded a whole scale-down window went (`unneeded_time`)
    UNNEEDED_TIME = "unneeded-time"
    # no node goes while the demand rises: it would be bought back a boot later (`pods_floor`)
    RISING_DEMAND = "rising-demand"
    # the window held from the recommendation in force as it began: the group churned
    CHURNED = "churned"

    @classmethod
    def _missing_(cls, value: object) -> Limit | None:
        """A decision stored before a limit was renamed still reads (its state, an audit)."""
        return RENAMED.get(str(value))


# a limit's name before → now: 2026-11-30 the re-acquire keep became the window's
RENAMED = {"reacquire-time": Limit.RECENTLY_NEEDED}
_KNOWN = frozenset({*(limit.value for limit in Limit), *RENAMED})
# what a limit's name looks like: one a later release adds reads as none here
_LATER_LIMIT = re.compile(r"[a-z][a-z0-9-]{0,63}")


class MetricStatus(StrEnum):
    OK = "ok"
    HELD_BY_TOLERANCE = "within-tolerance"
    ABSTAINED = "abstained"  # pending pods with nothing pending: no opinion
    # pending pods with nothing pending, and nodes nothing needs: a vote to shed them that
    # counts only when no other metric votes (it never outvotes one, up or down)
    UNNEEDED = "unneeded"
    # a forecast: a floor under the live metrics' recommendation, or only recorded
    FORECAST = "forecast"
    FORECAST_ONLY = "forecast-only"
    # failing for `failureThreshold` evaluations in a row: votes its fallback's size
    FALLBACK = "fallback"
    MISSING = "missing"
    STALE = "stale"
    INVALID = "invalid"

    @property
    def is_forecast(self) -> bool:
        return self in (MetricStatus.FORECAST, MetricStatus.FORECAST_ONLY)

    @property
    def usable(self) -> bool:
        return self in (MetricStatus.OK, MetricStatus.HELD_BY_TOLERANCE)

    @property
    def broken(self) -> bool:
        return self in (MetricStatus.MISSING, MetricStatus.STALE, MetricStatus.INVALID)

    @property
    def failing(self) -> bool:
        """No value from its source, whether its fallback votes for it or not."""
        return self.broken or self is MetricStatus.FALLBACK


class MetricOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    type: str
    target: str  # e.g. "4/replica", "60%"
    value: float | None
    at: AwareDatetime | None
    recommendation: int | None
    # value against target: 1.0 is on target (None when the metric has no ratio, e.g. pending pods)
    usage_ratio: float | None = None
    status: MetricStatus
    detail: str
    waiting: dict[str, str] = Field(default_factory=dict)  # pods that fit no group → why not here
    needed: int | None = None  # pending pods: the nodes the group's pods need now
    pending_pods: int | None = None  # pending pods: those the group's nodes are to take
    empty: int | None = None  # pending pods: the group's nodes empty of pods, nothing needs
    # the cluster's view: the nodes the group's pods need now, below which no scale-in goes
    pods_need: int | None = Field(default=None, exclude=True)
    # ... before it rounds up to whole nodes: the demand a forecast records and scales
    pods_share: float | None = Field(default=None, exclude=True)
    fallback: str = ""  # the fallback that applies ("replicas 2", "hold"), when one does
    failing_since: AwareDatetime | None = None  # the first failure of its run, when it applies


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    node_group: str
    policy: str
    # the stored version it used (`nodescaler apply`), or the policy deployed with the stack
    policy_version: int | Literal["deployed"] = "deployed"
    at: AwareDatetime
    current: int
    desired: int
    in_service: int | None = None  # nodes in service when decided (None: taken to be `current`)
    min_replicas: int  # effective bounds: the policy's inside the group's own MinSize/MaxSize
    max_replicas: int
    group_bounds: str = ""  # where the group's own bounds come from, when they cut the policy's
    recommendation: int  # all metrics combined, before behavior
    metrics: tuple[MetricOutcome, ...]
    limited_by: tuple[Limit, ...]
    reason: str
    backoff: Backoff | None = None  # running when decided
    protected: int = 0  # instances protected from scale-in when decided
    cluster_limit: str = ""  # which of the cluster's limits capped it, when one did
    scale_in_window: str = ""  # the open window that held a scale-in back, when one did
    # the nodes kept for their pods' recent need, and why (stored before as kept_for_reacquire)
    kept_recently_needed: str = Field(
        default="", validation_alias=AliasChoices("kept_recently_needed", "kept_for_reacquire")
    )
    # what the live metrics asked for, the forecast aside, in nodes (pending pods' need
    # before it rounds up: 7.5 where their requests fill seven and a half): recorded for
    # later forecasts
    demand: float | None = None
    # the warm pool asked for the forecast's growth (None: not sized), and why or why not
    warm_pool: int | None = None
    warm_pool_note: str = ""
    # the pauses in force, described (who, which way, until when): "" when none is
    paused: str = ""
    would_desire: int | None = None  # held by a pause: the size it would have set

    @field_validator("limited_by", mode="before")
    @classmethod
    def _known_limits(cls, stored: object) -> object:
        """A decision a later release stored, naming a limit this one does not know, still
        reads (a rollback reads its state and claimed decision): that limit is left out,
        its reason still says it; what is not a limit's name at all is refused, as ever."""
        if not isinstance(stored, list | tuple):
            return stored
        return tuple(
            limit
            for limit in stored
            if not (
                isinstance(limit, str) and _LATER_LIMIT.fullmatch(limit) and limit not in _KNOWN
            )
        )

    @property
    def change(self) -> int:
        return self.desired - self.current

    @property
    def direction(self) -> str:
        return "up" if self.change > 0 else "down" if self.change < 0 else "none"

    def held(self, why: str, limit: Limit) -> Decision:
        """Held at the current size by `limit`, saying why and what it would have done."""
        verb = "scale out" if self.change > 0 else "scale in"
        would = f"would {verb} {self.current} → {self.desired}"
        return self.model_copy(
            update={
                "desired": self.current,
                "would_desire": self.desired,
                "limited_by": (*self.limited_by, limit),
                "reason": f"{why}: {would} | {self.reason}",
            }
        )


def fit_to_store(decision: Decision, max_bytes: int = MAX_DECISION_BYTES) -> Decision:
    """The decision as saved, logged and told: its free texts cut, each with a marker, when
    its JSON is over `max_bytes` (its numbers and statuses are kept); never refused."""
    if _fits(decision, max_bytes):
        return decision
    cut = _cut(decision, MAX_PROBLEM, WAITING_KEPT)
    return cut if _fits(cut, max_bytes) else _cut(decision, MAX_OUTSIDE, 0)


def _fits(decision: Decision, max_bytes: int) -> bool:
    return len(decision.model_dump_json().encode()) <= max_bytes


def _cut(decision: Decision, limit: int, waiting: int) -> Decision:
    def text(said: str) -> str:
        return outside(said, limit) if said else said

    def named(pods: dict[str, str]) -> dict[str, str]:
        kept = {outside(pod): outside(why) for pod, why in list(pods.items())[:waiting]}
        more = len(pods) - len(kept)
        return kept if more <= 0 else kept | {"…": f"{more} more pods (the decision was cut)"}

    metrics = tuple(
        m.model_copy(update={"detail": text(m.detail), "waiting": named(m.waiting)})
        for m in decision.metrics
    )
    texts = (
        "reason",
        "cluster_limit",
        "scale_in_window",
        "kept_recently_needed",
        "warm_pool_note",
        "paused",
    )
    return decision.model_copy(
        update={"metrics": metrics} | {name: text(getattr(decision, name)) for name in texts}
    )

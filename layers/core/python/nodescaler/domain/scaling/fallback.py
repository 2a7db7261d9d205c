"""Fallbacks: how long each metric with a fallback has been failing, and what it votes then.

KEDA's rule, per metric: after more than `failureThreshold` evaluations in a row in which it
was missing, stale or invalid, the metric votes its fallback's size instead of holding the
group; one good reading ends the run. The counts persist in the group's state item
(only metrics with a fallback, only while they fail: a few bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict

from nodescaler.domain.policy import FallbackAction, MetricBase
from nodescaler.domain.scaling.decision import MetricOutcome, MetricStatus


class FailureRun(BaseModel):
    """A metric's failed evaluations in a row, and when the first of them was."""

    model_config = ConfigDict(frozen=True)

    count: int
    since: AwareDatetime


class MetricFailures(BaseModel):
    """The failure runs of a group's metrics that have a fallback, by metric name."""

    model_config = ConfigDict(frozen=True)

    runs: dict[str, FailureRun] = {}

    def after(
        self, metrics: Sequence[MetricBase], outcomes: Sequence[MetricOutcome], now: datetime
    ) -> MetricFailures:
        """Counted on with this evaluation's outcomes: a failure adds one to its metric's run,
        anything else ends it; metrics without a fallback (or gone from the policy) drop out."""
        runs = {}
        for metric, outcome in zip(metrics, outcomes, strict=True):
            if metric.fallback is None or not outcome.status.broken:
                continue
            run = self.runs.get(metric.key)
            runs[metric.key] = (
                FailureRun(count=1, since=now)
                if run is None
                else FailureRun(count=run.count + 1, since=run.since)
            )
        return MetricFailures(runs=runs)


def with_fallback(
    metric: MetricBase, outcome: MetricOutcome, failures: MetricFailures, current: int
) -> MetricOutcome:
    """The metric's outcome once its fallback applies: a vote of the fallback's size (a
    `fallback` outcome), or for `hold` the failure as it was, named. Before the threshold,
    or without a fallback, the outcome as it was: a failed metric holds scale-in."""
    fallback, run = metric.fallback, failures.runs.get(metric.key)
    # KEDA's count: the fallback applies once the failures in a row exceed the threshold
    # (`NumberOfFailures > FailureThreshold`, kedacore/keda pkg/fallback/fallback.go).
    if fallback is None or run is None or run.count <= fallback.failure_threshold:
        return outcome
    named = f"{outcome.detail}; fallback {fallback.describe()} after {run.count} failures"
    update: dict[str, object] = {"fallback": fallback.describe(), "failing_since": run.since}
    if fallback.action is FallbackAction.HOLD:
        return outcome.model_copy(update=update | {"detail": named})
    vote = {
        None: fallback.replicas,
        FallbackAction.CURRENT_REPLICAS: current,
        FallbackAction.IF_HIGHER: max(current, fallback.replicas or 0),
    }[fallback.action]
    return outcome.model_copy(
        update=update
        | {
            "status": MetricStatus.FALLBACK,
            "recommendation": vote,
            "usage_ratio": None,
            "detail": named,
        }
    )

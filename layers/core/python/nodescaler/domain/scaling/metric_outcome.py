"""One metric's outcome before the metrics are combined: its reading judged against its
target (or found missing, stale, invalid, or a forecast's floor), and whether it votes."""

from __future__ import annotations

import math
from datetime import datetime
from functools import partial

from nodescaler.domain.policy import MetricBase
from nodescaler.domain.policy.descriptors import metric_type
from nodescaler.domain.scaling.decision import MetricOutcome, MetricStatus
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.proportional import Tolerances, recommend
from nodescaler.domain.scaling.readings import MetricReading, Reading

# How far ahead of the evaluation's clock a reading may be dated (clocks differ a little).
CLOCK_SKEW_SECONDS = 60


def evaluate_metric(
    metric: MetricBase,
    reading: Reading | None,
    size: GroupSize,
    now: datetime,
    tolerances: Tolerances,
) -> MetricOutcome:
    judged = partial(_outcome, metric, reading)
    if (floor_acts := metric_type(metric).floor_acts) is not None:
        # a floor from history (a forecast): never a missing metric
        return _forecast_outcome(metric, reading, acts=floor_acts(metric))
    if reading is None:
        return judged(MetricStatus.MISSING, "no reading was produced")
    if not isinstance(reading, MetricReading):
        return judged(MetricStatus.MISSING, reading.reason)
    if (unusable := _unusable(metric, reading, now)) is not None:
        return unusable
    value = reading.value
    result = recommend(
        metric,
        value,
        size.current,
        tolerances,
        size.ready,
        measured=reading.measured_nodes,
        unneeded=reading.unneeded_nodes,
    )
    detail = reading.detail or f"{value:g} against {metric.target.describe()}"
    if result.replicas is None:
        return judged(MetricStatus.ABSTAINED, f"{detail}: nothing to add", value=value)
    if result.unneeded:
        return judged(MetricStatus.UNNEEDED, detail, value=value, replicas=result.replicas)
    if result.held_by_tolerance:
        return judged(
            MetricStatus.HELD_BY_TOLERANCE,
            f"{detail}: within tolerance",
            value=value,
            replicas=result.replicas,
            usage_ratio=result.usage_ratio,
            needed=result.proposed,  # the demand, not the size the tolerance holds
        )
    ratio = result.usage_ratio
    return judged(MetricStatus.OK, detail, value=value, replicas=result.replicas, usage_ratio=ratio)


def _outcome(
    metric: MetricBase,
    reading: Reading | None,
    status: MetricStatus,
    detail: str,
    *,
    value: float | None = None,
    replicas: int | None = None,
    usage_ratio: float | None = None,
    needed: int | None = None,
) -> MetricOutcome:
    """The metric's outcome, keeping what its reading said (when, who waits, the need)."""
    read = reading if isinstance(reading, MetricReading) else None
    return MetricOutcome(
        name=metric.key,
        type=metric.type_name,
        target=metric.target.describe(),
        value=value,
        at=read.at if read else None,
        recommendation=replicas,
        usage_ratio=usage_ratio,
        status=status,
        detail=detail,
        waiting=read.waiting if read else {},
        needed=needed if needed is not None else read.needed_nodes if read else None,
        pending_pods=read.pending_pods if read else None,
        empty=read.empty_nodes if read else None,
        pods_need=read.needed_nodes if read else None,
        pods_share=read.needed_share if read else None,
    )


def _forecast_outcome(metric: MetricBase, reading: Reading | None, *, acts: bool) -> MetricOutcome:
    """A forecast's floor under the group, or its abstention (never a missing metric)."""
    if not isinstance(reading, MetricReading):
        why = reading.reason if reading else "no forecast"
        return _outcome(metric, reading, MetricStatus.ABSTAINED, why)
    status = MetricStatus.FORECAST if acts else MetricStatus.FORECAST_ONLY
    value = reading.value
    detail = reading.detail or ""
    return _outcome(metric, reading, status, detail, value=value, replicas=math.ceil(value))


def _unusable(metric: MetricBase, reading: MetricReading, now: datetime) -> MetricOutcome | None:
    """The outcome of a value that can't be used (invalid, future-dated, stale), else None."""
    value = reading.value
    if math.isnan(value) or math.isinf(value) or value < 0:
        return _outcome(metric, reading, MetricStatus.INVALID, f"unusable value {value!r}")
    age = (now - reading.at).total_seconds()
    if -age > CLOCK_SKEW_SECONDS:  # a clock ahead, or a bad timestamp: nothing to trust
        why = f"dated {-age:.0f}s in the future"
        return _outcome(metric, reading, MetricStatus.INVALID, why, value=value)
    if age > metric.stale_after_seconds:
        why = f"last value is {age:.0f}s old (limit {metric.stale_after_seconds}s)"
        return _outcome(metric, reading, MetricStatus.STALE, why, value=value)
    return None


def votes(outcome: MetricOutcome) -> bool:
    """A live metric's recommendation, or a failed one's fallback: one vote among the
    others, the highest winning (as KEDA's fallback metric is one of the HPA's metrics)."""
    return outcome.status.usable or outcome.status is MetricStatus.FALLBACK

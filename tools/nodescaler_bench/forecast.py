"""The forecast's error and speed: a 21-day trace of a web tier's demand, one minute a
point (office hours on weekdays, a quieter weekend, 1 % growth a day, ±10 % that wanders
every half hour, a few half-hour spikes;
made from a fixed seed, so every run measures the same trace), recorded as the evaluate
function records it; then every five minutes of the last week forecast one lead time
(5 minutes) ahead and compared with what came.

- `forecast_mape`: the mean absolute error over the demand that came, in percent;
- `forecast_p90_underprediction`: the 90th percentile of how far short of the demand the
  forecast fell, in percent (0 when it asked for enough): what the live metrics and the
  buffer must make up;
- `forecast_tick_s`: 1,000 groups, each with 14 days of history, loaded from their stored
  form and forecast, as one tick of evaluations does it;
- `named_forecast_ms`: one group's forecast from a named CloudWatch metric, its 14 days
  (4,032 datapoints, as GetMetricData returns them) turned into a history and forecast,
  the mean of 100 (the read itself is one call, not measured here).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from nodescaler.domain.ahead.forecast import (
    DemandHistory,
    forecast,
    forecast_readings,
    history_from_datapoints,
    named_history_window,
)
from nodescaler.domain.policy import NodeGroupPolicy

from nodescaler_bench import reference

START = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday
DAYS = 21
LEAD = timedelta(minutes=5)
GROUPS = 1000


def forecast_policy(**predictive: object) -> NodeGroupPolicy:
    """A policy of one Predictive metric that scales, from `predictive`'s source."""
    metric = {"type": "Predictive", "predictive": {"mode": "ForecastAndScale", **predictive}}
    return NodeGroupPolicy.model_validate(
        {
            "metadata": {"name": "bench"},
            "spec": {"minReplicas": 0, "maxReplicas": 100, "metrics": [metric]},
        }
    )


POLICY = forecast_policy()


def trace(seed: int = 7) -> list[int]:
    """Nodes needed each minute for `DAYS` days."""
    rng = random.Random(seed)
    spikes = {rng.randrange(DAYS * 1440) for _ in range(6)}
    nodes, noise = [], 1.0
    for minute in range(DAYS * 1440):
        at = START + timedelta(minutes=minute)
        hour = at.hour + at.minute / 60
        busy = math.exp(-(((hour - 11.5) / 2.2) ** 2)) + 0.9 * math.exp(-(((hour - 16) / 1.8) ** 2))
        weekday = at.weekday() < 5
        growth = 1 + 0.01 * (minute // 1440)
        if minute % 30 == 0:  # demand wanders, it does not jitter each minute
            noise = rng.uniform(0.9, 1.1)
        level = (4 + (26 if weekday else 8) * busy) * growth * noise
        if any(0 <= minute - s < 30 for s in spikes):
            level *= 1.6
        nodes.append(max(round(level), 1))
    return nodes


def accuracy(nodes: list[int]) -> dict[str, float]:
    history = DemandHistory()
    errors: list[float] = []
    short: list[float] = []
    first_judged = (DAYS - 7) * 1440
    for minute, demand in enumerate(nodes):
        at = START + timedelta(minutes=minute)
        if minute >= first_judged and minute % 5 == 0 and minute + 5 < len(nodes):
            made = forecast(history, at, LEAD, ZoneInfo("UTC"))
            came = nodes[minute + 5]
            if made.replicas is not None:
                errors.append(abs(made.replicas - came) / came)
                short.append(max(came - made.replicas, 0) / came)
        history = history.record(at, demand)
    short.sort()
    return {
        "forecast_mape": round(100 * sum(errors) / len(errors), 1),
        "forecast_p90_underprediction": round(100 * short[int(0.9 * (len(short) - 1))], 1),
        "forecast_points": len(errors),
    }


def tick(nodes: list[int]) -> dict[str, float]:
    history = DemandHistory()
    for minute, demand in enumerate(nodes[-14 * 1440 :]):
        history = history.record(START + timedelta(days=DAYS - 14, minutes=minute), demand)
    stored = history.dump()
    now = START + timedelta(days=DAYS)
    before = reference.seconds()
    started = time.perf_counter()
    asked = 0
    for _ in range(GROUPS):
        readings = forecast_readings(POLICY, DemandHistory.load(stored), now)
        asked += len(readings)
    seconds = time.perf_counter() - started
    beside = statistics.median([before, reference.seconds()])
    assert asked == GROUPS
    return {
        "forecast_tick_s": round(seconds, 3),
        "forecast_reference_s": round(beside, 4),
        "forecast_history_stored_bytes": len(stored),
    }


NAMED = forecast_policy(
    cloudWatch={"metric": {"namespace": "Shop", "metricName": "Requests"}, "perNode": 50}
)
NAMED_GROUPS = 100


def named(nodes: list[int]) -> dict[str, float]:
    now = START + timedelta(days=DAYS)
    since, _ = named_history_window(now)
    points = [
        (since + timedelta(minutes=minute), 50.0 * demand)
        for minute, demand in enumerate(nodes[-14 * 1440 :])
        if minute % 5 == 0
    ]
    started = time.perf_counter()
    for _ in range(NAMED_GROUPS):
        history = history_from_datapoints(points, 50, now)
        (reading,) = forecast_readings(
            NAMED, DemandHistory(), now, {"predictive": history}
        ).values()
    seconds = time.perf_counter() - started
    assert len(points) == 4032 and reading.value > 0  # type: ignore[union-attr]
    return {"named_forecast_ms": round(1000 * seconds / NAMED_GROUPS, 2)}


def run() -> dict[str, float]:
    nodes = trace()
    return accuracy(nodes) | tick(nodes) | named(nodes)

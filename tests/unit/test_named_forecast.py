"""Forecasts from a named CloudWatch metric's history: its datapoints as demand in the
forecast's slots, the same forecast, and a failed read that abstains naming why."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler.domain.ahead.forecast import (
    LARGEST,
    MAX_SLOTS,
    UNKNOWN,
    DemandHistory,
    forecast_readings,
    history_from_datapoints,
    named_history_window,
)
from nodescaler.domain.policy import DemandMetric, NodeGroupPolicy
from nodescaler.domain.scaling.decision import Limit, MetricStatus
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable
from nodescaler.errors import MetricHistoryError
from nodescaler.service.forecasts import named_histories
from pydantic import ValidationError

from tests.builders import UNLIMITED, policy, queue_metric, run

MONDAY = datetime(2026, 3, 2, tzinfo=UTC)
FIVE = timedelta(minutes=5)
REQUESTS = {"namespace": "App", "metricName": "Requests", "statistic": "Sum"}

Points = list[tuple[datetime, float]]


def slot_of(at: datetime) -> int:
    return int(at.timestamp()) // 300


def diurnal(at: datetime) -> float:
    """Requests in five minutes: 1,000 from 08:00 to 18:00 UTC, 100 at night."""
    return 1000.0 if 8 <= at.hour < 18 else 100.0


def datapoints(days: float, value: Callable[[datetime], float], start: datetime = MONDAY) -> Points:
    """One datapoint a five-minute period, as CloudWatch returns them (period start)."""
    return [(start + FIVE * i, value(start + FIVE * i)) for i in range(int(days * 288))]


def named_predictive(
    mode: str = "ForecastAndScale", name: str = "predictive", **source: Any
) -> dict[str, Any]:
    cloud_watch = {"metric": REQUESTS, "perNode": 50} | source
    predictive = {"mode": mode, "cloudWatch": cloud_watch}
    return {"type": "Predictive", "name": name, "predictive": predictive}


# --- datapoints → demand --------------------------------------------------------------------


def test_each_datapoint_asks_for_its_value_over_per_node_rounded_up() -> None:
    now = MONDAY + timedelta(hours=1)
    points = [(MONDAY, 100.0), (MONDAY + FIVE, 101.0), (MONDAY + 2 * FIVE, 0.0)]
    history = history_from_datapoints(points, 50, now)
    assert (history.start, history.values) == (slot_of(MONDAY), (2, 3, 0))
    # a fraction of a node is a node; float noise (0.3 / 0.1 = 2.9999...) is not one more
    assert history_from_datapoints([(MONDAY, 0.3)], 0.1, now).values == (3,)


def test_a_period_with_no_datapoint_stays_unknown_never_zero() -> None:
    now = MONDAY + timedelta(hours=3)
    points = [(MONDAY, 400.0), (MONDAY + timedelta(hours=2), 400.0)]
    history = history_from_datapoints(points, 50, now)
    assert history.values == (8, *(UNKNOWN,) * 23, 8)
    assert history.known_hours() == pytest.approx(10 / 60)


def test_points_in_any_order_land_in_their_slots_the_highest_where_two_share_one() -> None:
    now = MONDAY + timedelta(hours=1)
    points = [(MONDAY + 2 * FIVE, 150.0), (MONDAY + timedelta(seconds=30), 200.0), (MONDAY, 50.0)]
    assert history_from_datapoints(points, 50, now).values == (4, UNKNOWN, 3)
    assert history_from_datapoints(reversed(points), 50, now).values == (4, UNKNOWN, 3)


def test_only_the_fourteen_days_of_whole_periods_before_now_are_kept() -> None:
    now = MONDAY + timedelta(days=20, minutes=2)  # 2 minutes into a period still filling
    since, until = named_history_window(now)
    assert (since, until) == (MONDAY + timedelta(days=6), MONDAY + timedelta(days=20))
    history = history_from_datapoints(datapoints(21, lambda at: 50.0), 50, now)
    assert len(history.values) == MAX_SLOTS
    assert (history.start, history.end) == (slot_of(since), slot_of(until) - 1)
    assert set(history.values) == {1}
    # the period still filling is left out: a partial Sum would read as a dip
    assert history_from_datapoints([(until, 500.0)], 50, now) == DemandHistory()


def test_a_value_that_is_not_a_finite_number_is_unknown_and_a_huge_one_is_capped() -> None:
    now = MONDAY + timedelta(hours=1)
    points = [(MONDAY, math.nan), (MONDAY + FIVE, math.inf), (MONDAY + 2 * FIVE, 1e300)]
    history = history_from_datapoints([*points, (MONDAY + 3 * FIVE, -5.0)], 1e-300, now)
    assert history.values == (LARGEST, 0)  # from the third slot: the first two are unknown
    assert history.start == slot_of(MONDAY + 2 * FIVE)


# --- the forecast ---------------------------------------------------------------------------


def forecast_at(now: datetime, points: Points, the_policy: NodeGroupPolicy, **kw: Any) -> Any:
    """The decision at `now`, the named metric's history read from `points`."""
    source = Recorded(points)
    named = named_histories(the_policy, source, now)
    group_history = kw.pop("group_history", DemandHistory())
    readings = forecast_readings(the_policy, group_history, now, named)
    readings["jobs"] = MetricReading(value=kw.pop("jobs", 8), at=now)
    return run(the_policy, kw.pop("current", 2), readings, History(), now).decision


class Recorded:
    """A `MetricHistory` holding one metric's datapoints (the moto-backed adapter is
    checked against the same cases in tests/integration)."""

    def __init__(self, points: Points, error: Exception | None = None) -> None:
        self.points, self.error = points, error
        self.asked: list[tuple[Sequence[DemandMetric], datetime, datetime]] = []

    def datapoints(
        self, metrics: Sequence[DemandMetric], since: datetime, until: datetime
    ) -> list[Points]:
        self.asked.append((metrics, since, until))
        if self.error is not None:
            raise self.error
        return [[p for p in self.points if since <= p[0] < until] for _ in metrics]


WEB = policy(queue_metric("jobs", per_node=4), named_predictive(), min_replicas=1)


def test_three_days_of_a_diurnal_metric_ask_for_the_morning_ramp_one_lead_time_ahead() -> None:
    thursday_0755 = MONDAY + timedelta(days=3, hours=7, minutes=55)
    decision = forecast_at(thursday_0755, datapoints(3, diurnal), WEB)
    # 1,000 requests at 50 a node: 20 nodes for 08:00, while the queue asks for 2
    assert (decision.desired, decision.demand) == (20, 2)
    assert Limit.FORECAST in decision.limited_by
    (made,) = [m for m in decision.metrics if m.name == "predictive"]
    assert made.detail == (
        "20 for Thu 08:00 UTC: 3 days at that time (20, 20, 20) (lead time 5.0 min, "
        "default until 5 cold launches are measured (0 so far); "
        "from CloudWatch App/Requests Sum ÷ 50 a node)"
    )
    # half an hour earlier, the night's 2: the queue decides
    assert (
        forecast_at(thursday_0755 - timedelta(minutes=30), datapoints(3, diurnal), WEB).desired == 2
    )


def test_the_lead_time_is_the_groups_own_as_measured() -> None:
    group_history = DemandHistory().measured_lead(timedelta(minutes=20))
    thursday_0740 = MONDAY + timedelta(days=3, hours=7, minutes=40)
    decision = forecast_at(thursday_0740, datapoints(3, diurnal), WEB, group_history=group_history)
    assert decision.desired == 20  # 20 minutes ahead: the 08:00 ramp
    assert "lead time 20.0 min, measured" in decision.reason


def test_under_a_day_of_the_metric_the_forecast_abstains_saying_how_much_it_has() -> None:
    now = MONDAY + timedelta(hours=20)
    decision = forecast_at(now, datapoints(0.5, diurnal), WEB, current=6, jobs=8)
    (made,) = [m for m in decision.metrics if m.name == "predictive"]
    assert made.status is MetricStatus.ABSTAINED
    assert made.detail.startswith("needs 24 h of history to forecast, has 12.0 h")


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (
            MetricHistoryError("CloudWatch App/Requests Sum: Throttling: Rate exceeded"),
            "no forecast: CloudWatch App/Requests Sum: Throttling: Rate exceeded",
        ),
        (KeyError("Timestamps"), "no forecast: KeyError('Timestamps')"),  # an adapter's bug
    ],
)
def test_a_failed_read_abstains_naming_why_and_holds_no_scale_in(
    error: Exception, why: str
) -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), named_predictive(), behavior=UNLIMITED)
    now = MONDAY + timedelta(days=3, hours=12)
    source = Recorded(datapoints(3, diurnal), error)
    readings = forecast_readings(
        the_policy, DemandHistory(), now, named_histories(the_policy, source, now)
    )
    assert readings["predictive"] == MetricUnavailable(
        reason=f"{why} (lead time 5.0 min, default until 5 cold launches are measured "
        "(0 so far); from CloudWatch App/Requests Sum ÷ 50 a node)"
    )
    readings["jobs"] = MetricReading(value=8, at=now)  # the queue wants 2 of the 10
    decision = run(the_policy, 10, readings, History(), now).decision
    assert decision.desired == 2  # an abstaining forecast is not a missing metric
    assert Limit.MISSING_METRIC not in decision.limited_by


def test_a_groups_named_metrics_are_read_together_once_and_its_own_history_not_at_all() -> None:
    the_policy = policy(
        named_predictive(name="requests"),
        named_predictive(name="sessions", metric=REQUESTS | {"metricName": "Sessions"}, perNode=5),
        {"type": "Predictive", "name": "own"},
    )
    now = MONDAY + timedelta(days=3, minutes=2)
    source = Recorded(datapoints(3, diurnal))
    named = named_histories(the_policy, source, now)
    ((metrics, since, until),) = source.asked
    assert [m.metric.metric_name for m in metrics] == ["Requests", "Sessions"]
    assert (since, until) == (MONDAY + timedelta(days=-11), MONDAY + timedelta(days=3))
    assert set(named) == {"requests", "sessions"}
    assert isinstance(named["sessions"], DemandHistory)
    assert set(named["sessions"].values) == {20, 200}  # ÷ 5
    assert named_histories(policy(queue_metric()), source, now) == {}
    assert len(source.asked) == 1  # a policy naming none reads nothing


def test_with_no_history_reader_set_a_named_forecast_abstains_saying_so() -> None:
    now = MONDAY + timedelta(days=3)
    assert named_histories(WEB, None, now) == {
        "predictive": MetricUnavailable(reason="no metric history reader is set")
    }
    (reading,) = forecast_readings(WEB, DemandHistory(), now).values()  # nothing read
    assert isinstance(reading, MetricUnavailable)
    assert reading.reason.startswith("no forecast: its history was not read")


# --- the policy -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ({"perNode": 0}, "greater than 0"),
        ({"perNode": -50}, "greater than 0"),
        ({"perNode": math.inf}, "finite number"),
        ({"perNode": math.nan}, "finite number"),
        ({"perNode": "50"}, "valid number"),
        ({"periodSeconds": 60}, "periodSeconds must be 300"),
        ({"perNode": None}, "valid number"),
        ({"expression": "m1 * 2"}, "Extra inputs are not permitted"),
        ({"metric": REQUESTS | {"statistic": "Mean"}}, "unknown statistic 'Mean'"),
    ],
)
def test_a_malformed_named_metric_is_refused_naming_the_field(
    source: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        policy(named_predictive(**source))


def test_a_named_metric_takes_the_time_zone_lead_time_and_mode_beside_it() -> None:
    the_policy = policy(named_predictive("ForecastOnly", perNode=12.5))
    (predictive,) = the_policy.spec.metrics
    source = predictive.predictive  # type: ignore[union-attr]
    assert source.cloud_watch is not None
    assert (source.cloud_watch.per_node, source.cloud_watch.period_seconds) == (12.5, 300)
    timed = policy(
        {
            "type": "Predictive",
            "predictive": {
                "timeZone": "Europe/Paris",
                "leadTimeSeconds": 600,
                "cloudWatch": {"metric": REQUESTS, "perNode": 50},
            },
        }
    )
    assert timed.spec.metrics[0].predictive.time_zone == "Europe/Paris"  # type: ignore[union-attr]

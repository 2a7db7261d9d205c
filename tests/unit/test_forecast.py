"""Forecasts from a group's recorded demand: seasonal, safe with too little or broken
history, and a floor under the live metrics that never causes a scale-in."""

from __future__ import annotations

import base64
import json
import zlib
from array import array
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from nodescaler.domain.ahead.forecast import (
    LARGEST,
    MAX_SLOTS,
    SLOT,
    UNKNOWN,
    DemandHistory,
    forecast,
    forecast_readings,
    lead_time,
)
from nodescaler.domain.scaling.decision import Limit, MetricStatus
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable
from pydantic import ValidationError

from tests.builders import T0, policy, queue_metric, run

UTC_ZONE = ZoneInfo("UTC")
MONDAY = datetime(2026, 3, 2, tzinfo=UTC)  # T0's day, at midnight
LEAD = timedelta(minutes=5)


def recorded(
    days: float, demand: Callable[[datetime], float], start: datetime = MONDAY
) -> DemandHistory:
    history = DemandHistory()
    at = start
    while at < start + timedelta(days=days):
        history = history.record(at, demand(at))
        at += timedelta(minutes=1)
    return history


def office_hours(at: datetime) -> int:
    """10 nodes from 09:00 to 17:00 UTC on weekdays, 2 otherwise."""
    return 10 if at.weekday() < 5 and 9 <= at.hour < 17 else 2


def test_with_less_than_a_day_of_history_the_forecast_abstains_and_says_how_much_it_has() -> None:
    history = recorded(0.5, office_hours)
    made = forecast(history, MONDAY + timedelta(hours=12), LEAD, UTC_ZONE)
    assert made.replicas is None
    assert made.detail == "needs 24 h of history to forecast, has 12.0 h"


def test_after_a_day_the_morning_ramp_is_asked_for_one_lead_time_before_it_comes() -> None:
    history = recorded(1, office_hours)  # Monday
    before_nine = MONDAY + timedelta(days=1, hours=8, minutes=55)  # Tuesday 08:55
    assert forecast(history, before_nine, LEAD, UTC_ZONE).replicas == 10
    assert forecast(history, before_nine - timedelta(minutes=20), LEAD, UTC_ZONE).replicas == 2


def test_with_a_week_of_history_the_weekend_is_forecast_from_the_last_weekend() -> None:
    history = recorded(13, office_hours)  # Monday to the next Saturday night
    sunday_noon = MONDAY + timedelta(days=13, hours=12)
    made = forecast(history, sunday_noon, LEAD, UTC_ZONE)
    assert made.replicas == 2  # the days before were weekdays at 10: weeks know better
    assert "1 weeks at that time (2)" in made.detail


def test_one_spiky_day_does_not_set_the_forecast() -> None:
    def spiky(at: datetime) -> int:
        return 40 if at.day == 4 else 10  # Wednesday spikes

    made = forecast(recorded(6.5, spiky), MONDAY + timedelta(days=6, hours=12), LEAD, UTC_ZONE)
    assert made.replicas == 10  # the upper quartile of 10, 10, 10, 40, 10, 10


def test_an_all_zero_history_forecasts_zero() -> None:
    made = forecast(recorded(2, lambda at: 0), MONDAY + timedelta(days=2), LEAD, UTC_ZONE)
    assert made.replicas == 0


def test_a_busier_day_raises_the_forecast_by_its_level_within_bounds() -> None:
    def growing(at: datetime) -> int:
        return 10 if at < MONDAY + timedelta(days=1) else 15  # Tuesday half as busy again

    made = forecast(recorded(1.5, growing), MONDAY + timedelta(days=1, hours=12), LEAD, UTC_ZONE)
    assert made.replicas == 15
    assert "level ×1.50" in made.detail


def test_a_busier_day_scales_the_need_not_its_whole_nodes() -> None:
    # Given 7.5 nodes' worth on Monday and 8 on Tuesday (a day 1/15 busier): 8 whole nodes
    def busier(at: datetime) -> float:
        return 7.5 if at < MONDAY + timedelta(days=1) else 8.0

    made = forecast(recorded(1.5, busier), MONDAY + timedelta(days=1, hours=12), LEAD, UTC_ZONE)
    # Then 7.5 × 1.07 asks for 8 nodes; Monday's 8 whole nodes scaled would ask for 9
    assert made.replicas == 8
    assert "1 days at that time (7.5), level ×1.07" in made.detail


def test_the_demand_a_decision_records_is_scaled_not_its_whole_nodes() -> None:
    # Given pending pods needing 7.5 nodes' worth on Monday and 8 on Tuesday (8 whole nodes
    # each day), recorded from each decision, stored and loaded as the state item holds it
    pending = policy({"type": "PendingPods"})

    def decided(share: float, at: datetime) -> float | None:
        reading = MetricReading(value=0, at=at, needed_nodes=8, needed_share=share)
        return run(pending, 8, {"pending-pods": reading}, History(), at).decision.demand

    history, at = DemandHistory(), MONDAY
    while at < MONDAY + timedelta(days=1, hours=12):
        share = 8.0 if at >= MONDAY + timedelta(days=1) else 7.5
        history = history.record(at, decided(share, at) or 0)
        at += SLOT
    stored = DemandHistory.load(history.dump())
    made = forecast(stored, MONDAY + timedelta(days=1, hours=12), LEAD, UTC_ZONE)
    # Then 8 nodes: Monday's 8 whole nodes, scaled by the day's ×1.07, would ask for 9
    assert (made.replicas, made.references) == (8, (7.5,))


def test_an_hour_before_the_history_began_sets_no_level() -> None:
    # Given a history from Monday 00:00: an evening at 3 nodes falling to 1 by midnight
    def evening(at: datetime) -> int:
        return 3 if at.hour >= 23 else 1

    history = recorded(1, evening)
    # When Tuesday 00:05 is forecast: the hour before it on Monday began before the history
    made = forecast(history, MONDAY + timedelta(days=1, minutes=5), LEAD, UTC_ZONE)
    # Then no level: Sunday 23:05's single known slot would say ×3 (clamped to ×1.5)
    assert made.replicas == 1
    assert "level" not in made.detail


def test_a_gap_in_the_history_is_unknown_not_zero() -> None:
    history = recorded(1, lambda at: 8)
    history = history.record(MONDAY + timedelta(days=1, hours=6), 8)  # nothing for 6 hours
    assert history.values.count(UNKNOWN) == 6 * 12
    assert history.known_hours() == pytest.approx(24 + 5 / 60)
    made = forecast(history, MONDAY + timedelta(days=1, hours=6, minutes=5), LEAD, UTC_ZONE)
    assert made.replicas == 8  # from the day before, not dragged down by the gap


def test_a_clock_gone_back_writes_into_the_past_and_the_forecast_abstains_naming_it() -> None:
    history = recorded(1.2, lambda at: 6)
    back = MONDAY + timedelta(days=1)  # the clock jumped back almost 5 hours
    history = history.record(back, 9)
    assert history.around(back, 0) == 9  # the slot keeps the highest asked in it
    made = forecast(history, back, LEAD, UTC_ZONE)
    assert made.replicas is None
    assert "past this clock (a clock gone back?)" in made.detail


def test_a_clock_jumped_far_ahead_starts_the_history_afresh() -> None:
    history = recorded(2, lambda at: 6)
    later = history.record(MONDAY + timedelta(days=30), 3)
    assert (later.values, later.known_hours()) == ((3,), 5 / 60)


def test_a_clock_that_jumped_ahead_a_day_and_came_back_starts_afresh_not_days_blind() -> None:
    history = recorded(1, lambda at: 6).record(MONDAY + timedelta(days=3), 9)  # ahead
    back = history.record(MONDAY + timedelta(days=1), 7)  # and back
    assert (back.values, back.start * 300) == ((7,), (MONDAY + timedelta(days=1)).timestamp())


def test_fourteen_days_are_kept_and_no_more() -> None:
    history = recorded(15, lambda at: 4)
    assert len(history.values) == MAX_SLOTS
    assert history.start * 300 == (MONDAY + timedelta(days=1)).timestamp()


def test_daily_seasonality_follows_wall_clock_time_across_a_daylight_saving_change() -> None:
    paris = ZoneInfo("Europe/Paris")

    def paris_mornings(at: datetime) -> int:
        return 12 if 9 <= at.astimezone(paris).hour < 12 else 3

    # Saturday 28 March 2026; the clocks go forward that night
    saturday = datetime(2026, 3, 27, 23, 0, tzinfo=UTC)  # 00:00 in Paris
    history = recorded(1, paris_mornings, start=saturday)
    nine_sunday = datetime(2026, 3, 29, 7, 0, tzinfo=UTC)  # 09:00 in Paris, summer time
    assert forecast(history, nine_sunday - LEAD, LEAD, paris).replicas == 12
    assert forecast(history, nine_sunday - LEAD, LEAD, UTC_ZONE).replicas == 3  # UTC: an hour off


def test_the_history_survives_its_storage_form() -> None:
    history = recorded(3, office_hours).measured_lead(timedelta(minutes=4))
    stored = history.dump()
    assert len(stored) < 4_000  # three days in a few hundred bytes, compressed
    assert DemandHistory.load(stored) == history


def test_the_lead_time_is_set_else_measured_else_five_minutes() -> None:
    fresh = DemandHistory()
    assert lead_time(fresh, None) == (
        timedelta(minutes=5),
        "default until 5 cold launches are measured (0 so far)",
    )
    measured = fresh.measured_lead(timedelta(minutes=4)).measured_lead(timedelta(minutes=6))
    assert measured.lead_seconds == pytest.approx(0.3 * 360 + 0.7 * 240)
    assert lead_time(measured, None) == (
        timedelta(seconds=measured.lead_seconds),
        "measured mean until 5 cold launches are measured (2 so far)",
    )
    assert lead_time(measured, 600) == (timedelta(minutes=10), "set")


def launched(minutes: list[float], *, warm: bool = False) -> DemandHistory:
    history = DemandHistory()
    for m in minutes:
        history = history.measured_lead(timedelta(minutes=m), warm=warm)
    return history


def test_given_enough_launches_the_lead_time_is_their_p90_not_their_mean() -> None:
    # Given ten cold launches, most ready in 3 minutes, one slow at 8
    history = launched([3, 3, 3, 3, 3, 3, 3, 3, 4, 8])
    # When the lead time is asked for, Then it is the p90 (between 4 and 8: 4.4 minutes),
    # which covers all but the slowest launch, and says where it comes from
    lead, source = lead_time(history, None)
    assert lead == timedelta(minutes=4.4)
    assert source == "p90 of the last 10 cold launches"
    # ... and a setting still wins
    assert lead_time(history, 120) == (timedelta(minutes=2), "set")


def test_given_a_boot_time_that_changed_only_the_latest_launches_count() -> None:
    # Given 20 slow launches (an old AMI) then 20 quick ones
    history = launched([10] * 20 + [2] * 20)
    # Then what is kept is bounded and the p90 is today's boot time
    assert len(history.cold) == 20
    assert lead_time(history, None)[0] == timedelta(minutes=2)


def test_warm_pool_launches_are_learnt_apart_from_cold_ones() -> None:
    # Given six cold launches of 5 minutes and six from the warm pool of about a minute
    history = launched([5] * 6)
    for m in (1, 1, 1.5, 1, 1, 1):
        history = history.measured_lead(timedelta(minutes=m), warm=True)
    # Then a group scaling out of its pool looks ahead by the warm launches' p90, and one
    # without a pool by the cold launches'
    assert lead_time(history, None, warm=True) == (
        timedelta(minutes=1.25),
        "p90 of the last 6 warm launches",
    )
    assert lead_time(history, None, warm=False)[0] == timedelta(minutes=5)


def test_until_enough_warm_launches_are_seen_the_running_mean_applies_and_says_so() -> None:
    history = launched([5] * 6).measured_lead(timedelta(minutes=1), warm=True)
    lead, source = lead_time(history, None, warm=True)
    assert lead == timedelta(seconds=history.lead_seconds or 0)
    assert source == "measured mean until 5 warm launches are measured (1 so far)"


def test_the_launches_survive_storage_and_a_history_stored_before_them_loads() -> None:
    history = recorded(1, office_hours).measured_lead(timedelta(minutes=4))
    history = history.measured_lead(timedelta(seconds=70), warm=True)
    assert DemandHistory.load(history.dump()) == history
    # a history as stored before launches were kept: none measured, its mean kept
    older = json.loads(history.dump())
    del older["launches"]
    loaded = DemandHistory.load(json.dumps(older))
    assert (loaded.cold, loaded.warm, loaded.lead_seconds) == ((), (), history.lead_seconds)


@pytest.mark.parametrize(
    "launches",
    [{"cold": "300"}, {"cold": [300] * 21}, {"warm": [-5]}, {"warm": ["soon"]}],
)
def test_stored_launches_that_are_not_times_are_refused(launches: dict[str, object]) -> None:
    stored = json.loads(recorded(1, office_hours).dump())
    stored["launches"] = launches
    with pytest.raises(ValueError, match=r"demand: (cold|warm) launch|could not convert"):
        DemandHistory.load(json.dumps(stored))


def test_recording_demand_keeps_the_launches_measured() -> None:
    history = launched([3] * 5, warm=True).record(MONDAY, 4)
    history = history.record(MONDAY + timedelta(days=20), 4)  # far ahead: slots start afresh
    assert history.warm == (180.0,) * 5


# --- the forecast in a decision ------------------------------------------------------------


def predictive(mode: str = "ForecastAndScale", **source: object) -> dict[str, object]:
    return {"type": "Predictive", "predictive": {"mode": mode, **source}}


def decided(
    the_policy: object, current: int, jobs: float, history: DemandHistory, at: datetime
) -> object:
    readings = {"jobs": MetricReading(value=jobs, at=at)}
    readings |= forecast_readings(the_policy, history, at)  # type: ignore[arg-type]
    return run(the_policy, current, readings, History(), at).decision  # type: ignore[arg-type]


def test_a_forecast_raises_a_scale_up_before_the_live_metrics_ask_and_says_so() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), predictive(), min_replicas=1)
    history = recorded(1, office_hours)
    at = MONDAY + timedelta(days=1, hours=8, minutes=55)
    decision = decided(the_policy, 2, 8, history, at)  # the queue wants 2
    assert (decision.desired, decision.demand) == (10, 2)  # type: ignore[attr-defined]
    assert Limit.FORECAST in decision.limited_by  # type: ignore[attr-defined]
    assert "predictive: 10 for Tue 09:00 UTC: 1 days at that time (10)" in decision.reason  # type: ignore[attr-defined]


def test_a_forecast_never_causes_a_scale_in_and_an_abstaining_one_never_holds_one() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), predictive(), min_replicas=1)
    night = MONDAY + timedelta(days=1, hours=20)
    # the forecast says 2, the queue wants 6 of the 10: the queue decides (after its window)
    decision = decided(the_policy, 6, 24, recorded(1, office_hours), night)
    assert decision.desired == 6  # type: ignore[attr-defined]
    # no history: the forecast abstains, which is not a missing metric
    decision = decided(the_policy, 6, 24, DemandHistory(), night)
    statuses = {m.name: m.status for m in decision.metrics}  # type: ignore[attr-defined]
    assert statuses["predictive"] is MetricStatus.ABSTAINED
    assert Limit.MISSING_METRIC not in decision.limited_by  # type: ignore[attr-defined]


def test_a_forecast_between_the_live_metrics_and_the_size_stops_the_scale_in_there() -> None:
    no_window = {"scaleDown": {"stabilizationWindowSeconds": 0}}
    the_policy = policy(queue_metric("jobs", per_node=4), predictive(), behavior=no_window)
    at = MONDAY + timedelta(days=1, hours=12)
    readings = {"jobs": MetricReading(value=16, at=at), "predictive": MetricReading(value=7, at=at)}
    decision = run(the_policy, 10, readings, History(), at).decision
    assert (decision.desired, decision.demand) == (7, 4)  # the queue wants 4, the forecast 7


def test_forecast_only_is_recorded_and_never_acted_on() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), predictive("ForecastOnly"))
    at = MONDAY + timedelta(days=1, hours=8, minutes=55)
    decision = decided(the_policy, 2, 8, recorded(1, office_hours), at)
    (forecast_outcome,) = [m for m in decision.metrics if m.name == "predictive"]  # type: ignore[attr-defined]
    assert (forecast_outcome.status, forecast_outcome.recommendation) == (
        MetricStatus.FORECAST_ONLY,
        10,
    )
    assert decision.desired == 2  # type: ignore[attr-defined]


def test_a_forecast_above_the_size_scales_up_even_while_another_metric_is_missing() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), predictive(), min_replicas=1)
    at = MONDAY + timedelta(days=1, hours=8, minutes=55)
    readings = forecast_readings(the_policy, recorded(1, office_hours), at)  # jobs missing
    decision = run(the_policy, 2, readings, History(), at).decision
    assert (decision.desired, decision.demand) == (10, None)


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ({"mode": "Always"}, "ForecastOnly"),
        ({"leadTimeSeconds": 30}, "greater than or equal to 60"),
        ({"leadTimeSeconds": "300"}, "valid integer"),
        ({"timeZone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"history": "14d"}, "Extra inputs are not permitted"),
        ({"target": {"type": "AverageValue", "averageValue": 2}}, "its target is AverageValue 1"),
    ],
)
def test_a_malformed_predictive_metric_is_refused_naming_the_field(
    source: dict[str, object], says: str
) -> None:
    # The case's dict is read, never changed: `make mutate` runs the suite twice in one process.
    fields = {key: value for key, value in source.items() if key != "target"}
    target = {"target": source["target"]} if "target" in source else {}
    with pytest.raises(ValidationError, match=says):
        policy({"type": "Predictive", "predictive": fields, **target})


def test_t0_is_a_monday_noon() -> None:  # the tests above count days from it
    assert (T0.weekday(), T0.hour, MONDAY.date()) == (0, 12, T0.date())


def test_the_nodes_a_forecast_added_are_not_learnt_as_demand() -> None:
    # Given a forecast that raised the group to 10 nodes, 5 of them still booting, and
    # pending pods that need only the 5 Ready ones
    the_policy = policy({"type": "PendingPods"}, predictive(), min_replicas=1)
    at = MONDAY + timedelta(days=1, hours=9)
    readings = {
        "pending-pods": MetricReading(value=0, at=at, needed_nodes=5),
        "predictive": MetricReading(value=10, at=at),
    }
    size = GroupSize(current=10, ready=5)
    decision = run(the_policy, 10, readings, History(), at, size=size).decision
    # Then it holds the forecast's 10, and records a demand of 5: tomorrow asks for 5
    assert (decision.desired, decision.demand) == (10, 5)
    # and with no live metric saying anything, the demand is the nodes in service
    quiet = readings | {"pending-pods": MetricReading(value=0, at=at)}
    assert run(the_policy, 10, quiet, History(), at, size=size).decision.demand == 5


# The forecast at its edges: which earlier days it reads, how their upper quartile is taken,
# when a clock gone back stops it, and what the stored history accepts.


KOLKATA = ZoneInfo("Asia/Kolkata")  # no daylight saving: its days are UTC's, shifted 5:30


def _slot(at: datetime) -> int:
    return int(at.timestamp()) // int(SLOT.total_seconds())


def slots(start: datetime, until: datetime, demand: Callable[[datetime], int]) -> DemandHistory:
    """A history with a known value in every slot from `start` up to `until` (included)."""
    count = _slot(until) - _slot(start) + 1
    return DemandHistory(_slot(start), tuple(demand(start + SLOT * i) for i in range(count)))


def noon_by_day(values: dict[int, int]) -> Callable[[datetime], int]:
    """10 nodes, except from 12:00 UTC on day `d` (from MONDAY): `values[d]` for an hour."""

    def demand(at: datetime) -> int:
        day = (at - MONDAY).days
        return values.get(day, 10) if at.hour == 12 else 10

    return demand


def test_two_earlier_days_give_their_upper_quartile_not_the_slot_still_filling() -> None:
    now = MONDAY + timedelta(days=2, hours=12)  # Wednesday noon, its own slot recorded
    history = slots(MONDAY, now, noon_by_day({0: 20, 1: 10, 2: 50}))
    made = forecast(history, now, LEAD, KOLKATA)
    assert made.at == now + LEAD
    assert made.references == (10, 20)  # Tuesday's, Monday's: not today's 50
    assert made.replicas == 18  # 10 + 0.75 × (20 - 10), rounded up
    assert made.detail == "18 for Wed 17:35 Asia/Kolkata: 2 days at that time (10, 20), level ×1.00"


def test_seven_earlier_days_interpolate_between_the_ranks_around_the_upper_quartile() -> None:
    now = MONDAY + timedelta(days=7, hours=12)
    noons = {day: value for day, value in enumerate([31, 29, 23, 19, 17, 13, 11])}
    start = MONDAY + timedelta(hours=12, minutes=5)  # just short of a week: days, not weeks
    history = slots(start, now - SLOT, noon_by_day(noons))
    made = forecast(history, now, LEAD, UTC_ZONE)
    assert made.references == (11, 13, 17, 19, 23, 29, 31)
    assert made.replicas == 26  # rank 4.5 of 7: 23 + 0.5 × (29 - 23)
    assert "7 days at that time" in made.detail


def test_with_a_week_of_history_the_same_weekday_is_read_not_the_day_before_it() -> None:
    now = MONDAY + timedelta(days=9, hours=12)  # the second Wednesday
    history = slots(MONDAY, now - SLOT, noon_by_day({day: 20 + day for day in range(9)}))
    made = forecast(history, now, LEAD, UTC_ZONE)
    assert (made.replicas, made.references) == (22, (22,))  # the first Wednesday's
    assert "1 weeks at that time (22)" in made.detail


@pytest.mark.parametrize(
    ("slots_before", "kind"),
    [(1, "weeks"), (0, "days")],  # the week's reference, ±5 minutes, must be recorded
)
def test_weeks_are_read_once_the_history_reaches_a_week_back(slots_before: int, kind: str) -> None:
    now = MONDAY + timedelta(days=8, hours=12)
    week_back = now + LEAD - timedelta(days=7)
    history = slots(week_back - SLOT * slots_before, now - SLOT, lambda at: 10)
    made = forecast(history, now, LEAD, UTC_ZONE)
    assert made.replicas == 10
    assert f" {kind} at that time" in made.detail


def test_a_history_that_stopped_weeks_ago_gives_no_forecast_from_older_weeks() -> None:
    history = slots(MONDAY, MONDAY + timedelta(days=14) - SLOT, lambda at: 10)
    now = MONDAY + timedelta(days=30, hours=12)  # a Wednesday, 16 days after it stopped
    made = forecast(history, now, LEAD, UTC_ZONE)
    assert (made.at, made.replicas, made.references) == (now + LEAD, None, ())
    assert made.detail == "no history near Wed 12:05 UTC on earlier days"


@pytest.mark.parametrize("ahead", [0, 1])
def test_a_history_up_to_a_slot_past_the_clock_still_forecasts(ahead: int) -> None:
    now = MONDAY + timedelta(days=2)
    history = slots(MONDAY, now + SLOT * ahead, lambda at: 7)
    assert forecast(history, now, LEAD, UTC_ZONE).replicas == 7


def test_a_history_two_slots_past_the_clock_abstains_saying_how_far() -> None:
    now = MONDAY + timedelta(days=2)
    made = forecast(slots(MONDAY, now + SLOT * 2, lambda at: 7), now, LEAD, UTC_ZONE)
    assert (made.at, made.replicas) == (now + LEAD, None)
    assert made.detail == (
        "the history runs 0:10:00 past this clock (a clock gone back?): no forecast until "
        "the clock catches up"
    )


def test_a_dropped_history_says_why_while_the_forecast_waits_for_a_day() -> None:
    history = DemandHistory(problem="the stored history was not readable")
    made = forecast(history, MONDAY, LEAD, UTC_ZONE)
    assert (made.at, made.replicas) == (MONDAY + LEAD, None)
    assert made.detail == (
        "needs 24 h of history to forecast, has 0.0 h; the stored history was not readable"
    )


def test_around_reads_the_slot_and_its_neighbours_only() -> None:
    history = DemandHistory(_slot(MONDAY), (9, 1, 1, 1, 8))
    assert history.around(MONDAY) == 9  # the first slot has no neighbour before it
    assert history.around(MONDAY + SLOT * 2) == 1  # 9 and 8 are two slots away
    assert history.mean(MONDAY, MONDAY + SLOT * 2) == 5  # (9 + 1) / 2, from the first slot


def test_a_measured_lead_time_is_kept_to_a_tenth_of_a_second() -> None:
    history = DemandHistory().measured_lead(timedelta(seconds=100.26))
    assert history.lead_seconds == 100.3


def test_a_measured_lead_time_survives_every_kind_of_record() -> None:
    history = DemandHistory().measured_lead(timedelta(minutes=4))
    fresh = history.record(MONDAY, 3)
    later = fresh.record(MONDAY + SLOT * 3, 4)
    rewritten = later.record(MONDAY + SLOT, 5)
    jumped = rewritten.record(MONDAY + timedelta(days=30), 6)
    for kept in (fresh, later, rewritten, jumped):
        assert kept.lead_seconds == 240


def test_a_clock_gone_back_to_the_first_slot_still_writes_into_it() -> None:
    history = DemandHistory().record(MONDAY, 3).record(MONDAY + SLOT * 2, 4)
    assert history.record(MONDAY, 9).values[0] == 9


def test_a_record_exactly_fourteen_days_after_the_last_keeps_the_gap_as_unknown() -> None:
    history = DemandHistory().record(MONDAY, 3)
    later = history.record(MONDAY + SLOT * MAX_SLOTS, 4)
    assert len(later.values) == MAX_SLOTS  # the old slot dropped, the gap kept
    assert later.values[-1] == 4 and later.known_hours() == 5 / 60


def test_a_clock_gone_back_exactly_a_day_writes_into_the_past() -> None:
    history = slots(MONDAY, MONDAY + timedelta(days=1, hours=2), lambda at: 3)
    back = history.record(MONDAY + timedelta(hours=2), 9)
    assert back.start == history.start and back.around(MONDAY + timedelta(hours=2), 0) == 9


def stored(start: int = 1, values: list[int] | None = None, lead: object = 240.0) -> str:
    text = DemandHistory(0, tuple(values or [3])).dump()
    return json.dumps({**json.loads(text), "start": start, "lead_seconds": lead})


def test_an_empty_history_survives_its_storage_form() -> None:
    assert DemandHistory.load(DemandHistory().dump()) == DemandHistory()


def test_tenths_of_a_node_rounded_up_survive_their_storage_form() -> None:
    history = DemandHistory().record(MONDAY, 7.5).record(MONDAY + SLOT * 2, 1234.51)
    assert history.record(MONDAY + SLOT * 3, 2.0000001).values[-1] == 2.0  # a float's last bit
    loaded = DemandHistory.load(history.dump())
    assert loaded.values == (7.5, UNKNOWN, 1234.6)


def test_a_history_stored_in_whole_nodes_before_tenths_still_loads() -> None:
    # the form stored before tenths: int16 whole nodes, and no unit
    slots = base64.b64encode(zlib.compress(array("h", [3, UNKNOWN, 9]).tobytes())).decode()
    legacy = json.dumps({"start": 5, "lead_seconds": None, "slots": slots})
    assert DemandHistory.load(legacy).values == (3, UNKNOWN, 9)


def test_a_build_from_before_tenths_starts_afresh_instead_of_reading_them_as_nodes() -> None:
    # an older build reads "slots" as int16 whole nodes: tenths under that key would read as
    # ten times the demand; under a key of their own the older build finds no history
    assert "slots" not in json.loads(DemandHistory().record(MONDAY, 7.5).dump())


def test_a_history_beyond_the_largest_demand_is_refused() -> None:
    huge = base64.b64encode(zlib.compress(array("i", [LARGEST * 10 + 1]).tobytes())).decode()
    stored = json.dumps({"start": 5, "lead_seconds": None, "tenths": huge})
    with pytest.raises(ValueError, match="1 slots: not a history"):
        DemandHistory.load(stored)


def test_a_full_fourteen_days_and_a_short_lead_time_load() -> None:
    full = DemandHistory.load(stored(values=[2] * MAX_SLOTS, lead=0.5))
    assert (len(full.values), full.lead_seconds) == (MAX_SLOTS, 0.5)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (stored(start=2**40), "start 1099511627776, 1 slots: not a history"),
        (stored(values=[3, -2]), "2 slots: not a history"),
        (stored(lead=0), "lead time 0 s"),
        (stored(lead=86_400), "lead time 86400 s"),
    ],
)
def test_a_stored_history_out_of_range_is_refused_naming_what(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        DemandHistory.load(text)


def test_a_set_lead_time_is_the_one_forecast_for() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), predictive(leadTimeSeconds=600))
    now = MONDAY + timedelta(days=2)
    (reading,) = forecast_readings(the_policy, slots(MONDAY, now, lambda at: 7), now).values()
    assert isinstance(reading, MetricReading)
    assert reading.detail.endswith("(lead time 10.0 min, set)")


def test_a_history_no_clock_can_hold_is_no_forecast_naming_the_error() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), predictive())
    broken = DemandHistory(2**40, (3,) * 300)
    (reading,) = forecast_readings(the_policy, broken, MONDAY).values()
    assert isinstance(reading, MetricUnavailable)
    assert reading.reason.startswith("no forecast: ") and "Error" in reading.reason


def test_the_warm_pool_looks_a_quarter_of_an_hour_beyond_the_lead_time_and_no_further() -> None:
    the_policy = policy(queue_metric("jobs", per_node=4), predictive(warmPool=True))
    now = MONDAY + timedelta(days=2, hours=12)

    def spike(at: datetime) -> int:  # 40 nodes at 12:30 each day: 25 minutes after `now + LEAD`
        return 40 if (at.hour, at.minute) == (12, 30) else 10

    (reading,) = forecast_readings(the_policy, slots(MONDAY, now - SLOT, spike), now).values()
    assert isinstance(reading, MetricReading)
    assert (reading.value, reading.peak) == (10, 10)

"""The forecast at its edges: which earlier days it reads, how their upper quartile is
taken, when a clock gone back stops it, and what the stored history accepts."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from nodescaler.domain.ahead.forecast import (
    MAX_SLOTS,
    SLOT,
    DemandHistory,
    forecast,
    forecast_readings,
)
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable

from tests.builders import policy, queue_metric
from tests.unit.test_forecast import LEAD, MONDAY, UTC_ZONE, predictive

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


# --- which earlier days, and their upper quartile -------------------------------------------


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


# --- a clock gone back, a history too short --------------------------------------------------


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


# --- recording -----------------------------------------------------------------------------


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


# --- the stored form ------------------------------------------------------------------------


def stored(start: int = 1, values: list[int] | None = None, lead: object = 240.0) -> str:
    text = DemandHistory(0, tuple(values or [3])).dump()
    return json.dumps({**json.loads(text), "start": start, "lead_seconds": lead})


def test_an_empty_history_survives_its_storage_form() -> None:
    assert DemandHistory.load(DemandHistory().dump()) == DemandHistory()


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


# --- readings -------------------------------------------------------------------------------


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

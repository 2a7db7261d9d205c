"""Scheduled capacity: windows between cron `start` and `end`, in the schedule's time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from nodescaler.domain.ahead.scheduled_capacity import scheduled_replicas
from nodescaler.domain.policy import ScheduleSource

OFFICE = ScheduleSource.model_validate(
    {
        "timeZone": "Europe/Paris",
        "defaultReplicas": 2,
        "entries": [
            {"name": "launch-day", "start": "0 6 24 12 *", "end": "0 23 24 12 *", "replicas": 30},
            {
                "name": "office",
                "start": "30 8 * * MON-FRI",
                "end": "0 19 * * MON-FRI",
                "replicas": 10,
            },
        ],
    }
)


@pytest.mark.parametrize(
    ("utc", "replicas", "which"),
    [
        (
            datetime(2026, 3, 2, 7, 29, tzinfo=UTC),
            2,
            "defaultReplicas",
        ),  # Monday 08:29 in Paris (UTC+1)
        (datetime(2026, 3, 2, 7, 30, tzinfo=UTC), 10, "office"),  # 08:30: the start minute counts
        (datetime(2026, 3, 2, 17, 59, tzinfo=UTC), 10, "office"),
        (datetime(2026, 3, 2, 18, 0, tzinfo=UTC), 2, "defaultReplicas"),  # 19:00: closed
        (datetime(2026, 3, 7, 10, 0, tzinfo=UTC), 2, "defaultReplicas"),  # Saturday
        (datetime(2026, 7, 6, 6, 30, tzinfo=UTC), 10, "office"),  # summer time: 08:30 is 06:30 UTC
        (datetime(2026, 12, 24, 9, 0, tzinfo=UTC), 30, "launch-day"),  # first open entry wins
    ],
)
def test_schedule_windows(utc: datetime, replicas: int, which: str) -> None:
    got, why = scheduled_replicas(OFFICE, utc)
    assert got == replicas
    assert which in why


# At the boundaries: exactly at a limit, a clock's edge or a count's edge, each test on
# the side its name says.


def test_a_schedule_opens_on_its_minute_not_its_second() -> None:
    for before in (
        datetime(2026, 3, 2, 7, 29, 30, tzinfo=UTC),
        datetime(2026, 3, 2, 7, 29, 0, 500_000, tzinfo=UTC),
    ):
        assert scheduled_replicas(OFFICE, before) == (
            2,
            "no schedule entry is open: defaultReplicas",
        )

"""Scheduled capacity: which entry's window is open at an instant, in the schedule's time zone."""

from __future__ import annotations

from datetime import datetime, timedelta

from croniter import croniter

from nodescaler.domain.policy import ScheduleSource


def _last_fire(expression: str, now: datetime) -> datetime:
    # Cron has minute resolution: start from the next minute so a firing at the
    # current minute counts as already happened.
    base = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    fired: datetime = croniter(expression, base).get_prev(datetime)
    return fired


def scheduled_replicas(schedule: ScheduleSource, now: datetime) -> tuple[int, str]:
    """The replicas the schedule asks for at `now` and which entry (or the default) said so.

    An entry's window is open when its `start` fired more recently than its `end`; the
    first open entry wins.
    """
    local = now.astimezone(schedule.zone)
    for index, entry in enumerate(schedule.entries):
        if _last_fire(entry.start, local) > _last_fire(entry.end, local):
            label = entry.name or f"entries[{index}]"
            return entry.replicas, f"schedule entry {label} ({entry.start} until {entry.end})"
    return schedule.default_replicas, "no schedule entry is open: defaultReplicas"

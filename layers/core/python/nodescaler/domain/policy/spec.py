"""The base every policy model shares: camelCase in YAML, unknown fields rejected, strict
numbers; and the checks of the cron expressions and time zones several models take."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)
from pydantic.alias_generators import to_camel

from nodescaler.domain.ahead.cron import cron_problem

PositiveAmount = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]


class Spec(BaseModel):
    """Base of every user-written model: camelCase in YAML, unknown fields rejected, immutable.
    Numbers and flags are strict: `true` is not 1, and "5" is not 5."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


def fires_every_year(expression: str) -> bool:
    """Whether the expression fires at least once in each of four years in a row (a leap
    year among them): a window whose end never comes would hold its group forever."""
    for year in range(2001, 2005):
        try:
            fire = croniter(expression, datetime(year, 1, 1) - timedelta(minutes=1)).get_next(
                datetime
            )
        except CroniterBadDateError:  # no such date at all (30 February)
            return False
        if fire.year != year:
            return False
    return True


def check_cron(expression: str) -> str:
    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise ValueError(f"cron expression {expression!r}: {cron_problem(expression)}")
    if not fires_every_year(expression):
        raise ValueError(
            f"cron expression {expression!r} does not fire every year (a date that does not "
            "exist, or only in leap years): its window would never open or never close"
        )
    return expression


def check_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    # OSError: a folder of zones ("Europe"), or a name too long for a file name
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"unknown time zone {name!r} (use an IANA name such as Europe/Paris)"
        ) from None
    return name

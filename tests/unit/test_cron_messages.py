"""A refused cron expression says the real reason: the field and the value given, not
"expected 5 fields" for an expression that has five."""

from __future__ import annotations

import pytest
from nodescaler.domain.ahead.cron import cron_problem

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("0 25 * * *", "hour 25 out of range (0-23)"),
        ("60 * * * *", "minute 60 out of range (0-59)"),
        ("0 0 0 * *", "day-of-month 0 out of range (1-31)"),
        ("0 0 * 13 *", "month 13 out of range (1-12)"),
        ("0 0 * * 1-8", "day-of-week 8 out of range (0-7)"),
        ("0 9,25 * * *", "hour 25 out of range (0-23)"),
        ("0 0 * * mon-fry", "day-of-week 'fry' is not a number (0-7) or a name (sun-sat)"),
        ("0 x * * *", "hour 'x' is not a number (0-23)"),
        ("*/0 * * * *", "minute step '0' is not a whole number of 1 or more"),
        ("0 9 * *", "has 4 fields, expected 5 (minute hour day-of-month month day-of-week)"),
    ],
)
def test_given_a_refused_cron_then_the_field_and_the_value_given_are_named(
    expression: str, problem: str
) -> None:
    assert cron_problem(expression) == problem


# At the edge: the first field truly wrong is the one named.


def test_a_cron_problem_names_the_first_field_truly_wrong() -> None:
    assert cron_problem("*/1 25 * * *") == "hour 25 out of range (0-23)"  # a step of 1 is fine
    assert cron_problem("59 24 * * *") == "hour 24 out of range (0-23)"  # 59 is a minute
    assert cron_problem("1-2-3 * * * *") == "minute '2-3' is not a number (0-59)"

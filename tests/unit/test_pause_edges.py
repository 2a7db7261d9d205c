"""Pauses at their edges: a duration's every part guarded against overflow, a year
exactly, and several pauses named together."""

from __future__ import annotations

from datetime import timedelta

import pytest
from nodescaler.domain.scaling.pause import Pause, hold, parse_duration

from tests.unit.test_pause import ARN, BOTH, SCALE_IN, SCALE_OUT, decision, stored


@pytest.mark.parametrize("text", ["99999999999999h", "99999999999999m", "99999999999999999s"])
def test_a_huge_number_of_any_unit_is_longer_than_a_year_not_an_overflow(text: str) -> None:
    with pytest.raises(ValueError, match=f"'{text}' is longer than 365 days"):
        parse_duration(text)


def test_a_year_written_in_seconds_is_the_longest_pause() -> None:
    assert parse_duration("31536000s") == timedelta(days=365)


def test_the_problems_say_what_to_write_instead() -> None:
    with pytest.raises(ValueError) as raised:
        parse_duration("soon")
    assert str(raised.value) == (
        "'soon' is not a duration: write a whole number of days, hours, minutes or seconds, "
        "e.g. 90s, 30m, 2h, 1d or 1h30m"
    )
    with pytest.raises(ValueError) as raised:
        parse_duration("366d")
    assert str(raised.value) == (
        "'366d' is longer than 365 days; leave --for out to pause until resumed"
    )


def test_every_pause_in_force_is_named_and_every_one_holding_it() -> None:
    tag = Pause(direction=BOTH, by="tag nodescaler/paused")
    held = hold(decision(5, 12), [stored(SCALE_IN), tag])
    both = f"paused (scale-in) by {ARN} until 2026-03-02 14:00:00Z (node upgrade); {tag.describe()}"
    assert held.paused == both
    assert held.reason.startswith(f"{both}: would scale in 5 → 3 | ")


def test_a_pause_that_holds_nothing_is_still_named() -> None:
    held = hold(decision(5, 40), [stored(SCALE_IN)])  # a scale-out goes ahead
    assert held.desired == 10
    assert held.paused == f"paused (scale-in) by {ARN} until 2026-03-02 14:00:00Z (node upgrade)"


def test_a_scale_out_pause_says_what_it_held() -> None:
    held = hold(decision(5, 40), [stored(SCALE_OUT)])
    assert "would scale out 5 → 10 | " in held.reason


def test_a_paused_group_outside_its_bounds_goes_back_inside_and_names_the_pause() -> None:
    held = hold(decision(12, 48, max_size=10), [stored(BOTH)])
    assert held.desired == 10
    assert held.paused == f"paused (both) by {ARN} until 2026-03-02 14:00:00Z (node upgrade)"

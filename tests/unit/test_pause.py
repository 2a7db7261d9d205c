"""Pauses: durations, the paused tag, which pauses are in force, and how a pause holds a
decision (only its direction, never outside the bounds, saying what it would have done)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nodescaler.domain.groups.optin import PauseDirection, TagNames, read_opt_in
from nodescaler.domain.scaling.decision import Decision, Limit
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.pause import Pause, hold, in_force, parse_duration

from tests.builders import EXACT, T0, policy, queue_metric, readings, run

BOTH, SCALE_IN, SCALE_OUT = PauseDirection.BOTH, PauseDirection.SCALE_IN, PauseDirection.SCALE_OUT
ARN = "arn:aws:iam::123456789012:user/alice"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        (" 45m ", timedelta(minutes=45)),
        ("365d", timedelta(days=365)),
    ],
)
def test_durations_read_as_days_hours_minutes_and_seconds(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("-5m", "'-5m' is not a positive duration"),
        ("-", "'-' is not a duration"),
        ("0m", "'0m' is not a positive duration"),
        ("0d0h", "'0d0h' is not a positive duration"),
        ("", "'' is not a duration"),
        ("soon", "'soon' is not a duration"),
        ("30", "'30' is not a duration"),
        ("1.5h", "'1.5h' is not a duration"),
        ("2w", "'2w' is not a duration"),
        ("m", "'m' is not a duration"),
        ("366d", "'366d' is longer than 365 days; leave --for out"),
        ("99999999999999999999d", "is longer than 365 days"),  # no overflow
    ],
)
def test_a_duration_that_is_not_one_or_not_positive_is_named(text: str, problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_duration(text)
    assert problem in str(raised.value)


@pytest.mark.parametrize(
    ("value", "paused", "problem"),
    [
        ("true", BOTH, ""),
        ("TRUE", BOTH, ""),
        ("scale-in", SCALE_IN, ""),
        (" Scale-Out ", SCALE_OUT, ""),
        ("false", None, ""),
        (None, None, ""),
        # unreadable: whoever set it meant to pause something, so both ways, and said
        (
            "scale_in",
            BOTH,
            "node group ng-1: tag nodescaler/paused='scale_in' must be true, scale-in, "
            "scale-out or false; treating the group as paused both ways",
        ),
    ],
)
def test_the_paused_tag(value: str | None, paused: PauseDirection | None, problem: str) -> None:
    tags = {"nodescaler/policy": "batch"} | ({} if value is None else {"nodescaler/paused": value})
    opt_in = read_opt_in("ng-1", tags, TagNames())
    assert opt_in.paused is paused
    assert opt_in.problems == ((problem,) if problem else ())
    assert opt_in.policy == "batch"  # a bad paused tag rejects nothing


def test_the_paused_tag_name_is_configurable() -> None:
    names = TagNames(paused="team/hold")
    assert read_opt_in("ng-1", {"team/hold": "scale-out"}, names).paused is SCALE_OUT
    assert read_opt_in("ng-1", {"nodescaler/paused": "true"}, names).paused is None


def stored(direction: PauseDirection, *, hours: float | None = 2) -> Pause:
    until = None if hours is None else T0 + timedelta(hours=hours)
    return Pause(direction=direction, by=ARN, reason="node upgrade", at=T0, until=until)


def test_a_stored_pause_applies_until_it_expires_and_the_tag_beside_it() -> None:
    pause = stored(SCALE_IN)
    assert in_force(pause, None, "nodescaler/paused", T0 + timedelta(hours=1)) == (pause,)
    assert in_force(pause, None, "nodescaler/paused", T0 + timedelta(hours=2)) == ()
    forever = stored(BOTH, hours=None)
    assert in_force(forever, None, "t", T0 + timedelta(days=400)) == (forever,)
    (tagged,) = in_force(pause, SCALE_OUT, "nodescaler/paused", T0 + timedelta(hours=3))
    assert (tagged.direction, tagged.by) == (SCALE_OUT, "tag nodescaler/paused")
    assert len(in_force(pause, SCALE_OUT, "nodescaler/paused", T0)) == 2  # either pauses


def test_a_pause_describes_who_which_way_until_when_and_why() -> None:
    assert stored(SCALE_IN).describe() == (
        f"paused (scale-in) by {ARN} until 2026-03-02 14:00:00Z (node upgrade)"
    )
    assert Pause(direction=BOTH, by="tag nodescaler/paused").describe() == (
        "paused (both) by tag nodescaler/paused"
    )


def decision(current: int, jobs: float, *, min_size: int = 0, max_size: int = 100) -> Decision:
    """What 4 tasks a node ask for, with nothing in the way (no window, no rate limit)."""
    the_policy = policy(queue_metric("jobs", per_node=4), behavior=EXACT)
    size = GroupSize(current=current, min_size=min_size, max_size=max_size)
    return run(the_policy, current, readings(jobs=jobs), size=size).decision


@pytest.mark.parametrize(
    ("direction", "current", "jobs", "desired"),
    [
        (SCALE_IN, 5, 12, 5),  # would scale in 5 → 3: held
        (SCALE_IN, 5, 40, 10),  # a scale-in pause still scales out
        (SCALE_OUT, 5, 40, 5),  # would scale out 5 → 10: held
        (SCALE_OUT, 5, 12, 3),  # a scale-out pause still scales in
        (BOTH, 5, 12, 5),
        (BOTH, 5, 40, 5),
    ],
)
def test_only_the_paused_direction_is_held(
    direction: PauseDirection, current: int, jobs: float, desired: int
) -> None:
    assert hold(decision(current, jobs), [stored(direction)]).desired == desired


def test_a_held_decision_says_paused_by_whom_and_what_it_would_have_done() -> None:
    unpaused = decision(5, 12)
    held = hold(unpaused, [stored(SCALE_IN)])
    assert (held.current, held.desired, held.would_desire) == (5, 5, 3)
    assert held.limited_by == (*unpaused.limited_by, Limit.PAUSED)
    assert held.reason == (
        f"paused (scale-in) by {ARN} until 2026-03-02 14:00:00Z (node upgrade): would scale "
        f"in 5 → 3 | {unpaused.reason}"
    )
    assert held.paused == stored(SCALE_IN).describe()
    assert held.recommendation == unpaused.recommendation  # decided as usual


def test_a_pause_that_holds_nothing_is_still_recorded_on_the_decision() -> None:
    unpaused = decision(5, 40)
    kept = hold(unpaused, [stored(SCALE_IN)])
    assert (kept.desired, kept.would_desire, kept.limited_by) == (10, None, unpaused.limited_by)
    assert kept.paused.startswith("paused (scale-in) by")
    assert hold(unpaused, []) == unpaused  # no pause: the decision as it was


def test_the_tag_and_the_stored_pause_combine() -> None:
    tag = Pause(direction=SCALE_OUT, by="tag nodescaler/paused")
    held = hold(decision(5, 40), [stored(SCALE_IN), tag])
    assert (held.desired, held.would_desire) == (5, 10)
    assert held.reason.startswith("paused (scale-out) by tag nodescaler/paused: would scale out")
    assert "paused (scale-in)" in held.paused and "tag nodescaler/paused" in held.paused


@pytest.mark.parametrize(
    ("current", "jobs", "min_size", "max_size", "direction", "desired"),
    [
        (12, 12, 0, 10, SCALE_IN, 10),  # above its maximum: back to 10
        (12, 40, 0, 10, BOTH, 10),
        (2, 0, 4, 20, SCALE_OUT, 4),  # below its minimum: up to 4
        (2, 40, 4, 20, BOTH, 4),
    ],
)
def test_a_paused_group_outside_its_bounds_still_goes_back_inside_them(
    current: int,
    jobs: float,
    min_size: int,
    max_size: int,
    direction: PauseDirection,
    desired: int,
) -> None:
    unpaused = decision(current, jobs, min_size=min_size, max_size=max_size)
    held = hold(unpaused, [stored(direction)])
    assert (held.desired, held.would_desire, held.limited_by) == (
        desired,
        None,
        unpaused.limited_by,
    )
    assert held.reason == (
        f"{stored(direction).describe()}, but a group outside [{min_size}, {max_size}] goes "
        f"back inside | {unpaused.reason}"
    )


@given(
    current=st.integers(0, 60),
    jobs=st.integers(0, 400),
    bounds=st.tuples(st.integers(0, 30), st.integers(0, 30)).map(sorted),
    direction=st.sampled_from(PauseDirection),
)
def test_a_pause_never_moves_a_group_its_way_nor_keeps_it_outside_its_bounds(
    current: int, jobs: int, bounds: list[int], direction: PauseDirection
) -> None:
    low, high = bounds
    unpaused = decision(current, jobs, min_size=low, max_size=max(high, 1))
    held = hold(unpaused, [stored(direction)])
    assert held.min_replicas <= held.desired <= held.max_replicas
    if held.min_replicas <= current <= held.max_replicas:
        assert not direction.holds(held.change)
        # the other direction goes ahead as decided
        assert held.desired in (current, unpaused.desired)
    assert (held.would_desire is None) == (held.desired == unpaused.desired)


# Pauses at their edges: a duration's every part guarded against overflow, a year exactly,
# and several pauses named together.


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

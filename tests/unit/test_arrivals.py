"""Headroom sized by the demand: a group's pod arrivals learnt from one count to the next,
and a `fromArrivals` buffer holding the pods a boot time of them brings, within bounds."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.ahead.arrivals import Arrivals, sized_buffers
from nodescaler.domain.policy import CapacityBuffer, PendingPodsMetric
from pydantic import ValidationError

from tests.builders import policy

T = datetime(2026, 11, 23, 8, tzinfo=UTC)
BOOT = timedelta(minutes=4)


def counted(*pods: int, every: timedelta = timedelta(minutes=1)) -> Arrivals:
    """The arrivals learnt from these counts of the group's pods, one `every` apart."""
    arrivals = Arrivals()
    for n, count in enumerate(pods):
        arrivals = arrivals.observed(T + n * every, count)
    return arrivals


def web(**sizing: object) -> object:
    return policy(
        {
            "type": "PendingPods",
            "pendingPods": {
                "buffer": [{"fromArrivals": sizing, "requests": {"cpu": "1", "memory": "1Gi"}}]
            },
        },
        name="web",
    )


def buffer_of(sized: object) -> CapacityBuffer:
    (metric,) = sized.spec.metrics  # type: ignore[attr-defined]
    assert isinstance(metric, PendingPodsMetric)
    return metric.pending_pods.buffer[0]


def test_a_steady_stream_of_pods_is_learnt_as_its_rate() -> None:
    # Given 3 pods arriving every minute for an hour
    arrivals = counted(*range(0, 181, 3))
    # Then the rate learnt is 3 a minute: 12 pods in a boot time
    assert arrivals.per_minute == pytest.approx(3)
    assert arrivals.arriving_in(BOOT) == pytest.approx(12)


def test_pods_that_leave_are_not_arrivals_and_a_quiet_cluster_forgets_its_rate() -> None:
    # Given a burst of 30 pods, then an hour of a steady count, then pods leaving
    burst = counted(10, 40)
    quiet = counted(10, 40, *[40] * 60, *range(40, 0, -5))
    # Then the burst raised the rate at once, and quiet minutes (and leaving pods) let it
    # fall as e^(-t / 15 min): after 68 minutes to about 1 % of it
    assert burst.per_minute == 30
    assert quiet.per_minute == pytest.approx(30 * math.exp(-68 / 15), rel=0.01)


def test_the_rate_is_per_minute_of_the_time_each_count_covers() -> None:
    # Given the same 20 pods a minute seen every minute, or every five minutes
    often = counted(*range(0, 401, 20))
    seldom = counted(*range(0, 401, 100), every=timedelta(minutes=5))
    # Then both learn the same rate
    assert often.per_minute == seldom.per_minute == 20


def test_a_count_after_a_long_gap_or_a_clock_gone_back_teaches_no_rate() -> None:
    learnt = counted(0, 10)
    later = learnt.observed(T + timedelta(hours=3), 500)  # 490 more, but over three hours
    assert later.pods == 500 and later.per_minute < learnt.per_minute
    assert learnt.observed(T, 900) == learnt  # before the last count: nothing learnt
    assert learnt.observed(learnt.at, 900) == learnt  # type: ignore[arg-type]  # the same instant


@pytest.mark.parametrize(
    ("arrivals", "bounds", "pods"),
    [
        (Arrivals(10, T, 3.0), {"maxPods": 40}, 12),  # 3 a minute × 4 minutes
        (Arrivals(10, T, 3.0), {"maxPods": 8}, 8),  # capped
        (Arrivals(10, T, 0.05), {"maxPods": 40}, 0),  # quiet: none
        (Arrivals(10, T, 0.05), {"minPods": 2, "maxPods": 40}, 2),  # quiet: its least
        (Arrivals(), {"minPods": 1, "maxPods": 40}, 40),  # never counted: the most room
    ],
)
def test_a_buffer_from_arrivals_holds_a_boot_time_of_them_within_its_bounds(
    arrivals: Arrivals, bounds: dict[str, int], pods: int
) -> None:
    sized, note = sized_buffers(web(**bounds), arrivals, BOOT, "p90 of the last 5 cold launches", T)  # type: ignore[arg-type]
    assert buffer_of(sized).pods == pods
    assert note.startswith(
        f"buffer from arrivals: {arrivals.per_minute:.2f} pods/min × 4.0 min boot "
        "(p90 of the last 5 cold launches) = "
    )
    assert f"room for {pods} × 1 cpu/1Gi (from arrivals, " in note


@pytest.mark.parametrize(
    ("minutes", "pods", "why"),
    [
        (0, 40, "counted once: the most room, nothing learnt"),
        (15, 15, "40 × e^-1 = 14.7: the most room forgotten as a learnt rate is"),
        (60, 1, "40 × e^-4 = 0.7: an hour of quiet lets it fall"),
        (240, 0, "forgotten"),
    ],
)
def test_until_a_rate_is_learnt_the_buffer_errs_towards_room(
    minutes: int, pods: int, why: str
) -> None:
    # Given a group first counted at T, with no pod arriving since
    quiet = counted(10, *[10] * minutes)
    now = T + timedelta(minutes=minutes)
    sized, note = sized_buffers(web(maxPods=40), quiet, BOOT, "set", now)  # type: ignore[arg-type]
    # Then its buffer holds the unlearnt share of its most room, said in the decision
    assert buffer_of(sized).pods == pods, why
    assert (f"{math.exp(-minutes / 15):.0%} of the most room kept while" in note) == (pods > 0)


def test_a_rate_learnt_above_the_unlearnt_room_sizes_the_buffer() -> None:
    # Given 5 pods a minute from the first count, counted every minute: 25 in a boot and a
    # minute between counts, above 40 × e^-2 = 5.4
    busy = counted(*range(0, 151, 5))
    sized, _ = sized_buffers(web(maxPods=40), busy, BOOT, "set", T + timedelta(minutes=30))  # type: ignore[arg-type]
    assert buffer_of(sized).pods == 25


@pytest.mark.parametrize(
    ("since_last", "pods", "between"),
    [
        (5, 27, "5.0"),  # 3 a minute × (4-minute boot + 5 minutes until the next look)
        (60, 57, "15.0"),  # a look an hour later: at most 15 minutes counted
    ],
)
def test_the_buffer_also_holds_the_arrivals_until_the_next_look(
    since_last: int, pods: int, between: str
) -> None:
    # Given 3 pods a minute learnt at the last count, and the group evaluated again later
    arrivals = Arrivals(10, T, 3.0)
    now = T + timedelta(minutes=since_last)
    sized, note = sized_buffers(web(maxPods=100), arrivals, BOOT, "set", now)  # type: ignore[arg-type]
    # Then room that runs short just after this look is asked for at the next: the buffer
    # holds what arrives meanwhile, and through the boot of the node asked for then
    assert buffer_of(sized).pods == pods
    assert f"3.00 pods/min × (4.0 min boot (set) + {between} min between looks) = " in note


def test_the_longest_time_between_counts_lately_is_learnt_as_the_time_between_looks() -> None:
    # Given a group ticked every 5 minutes, with the fast path bringing an evaluation
    # forward 10 s after each tick
    arrivals = Arrivals()
    for tick in range(6):
        at = T + tick * timedelta(minutes=5)
        arrivals = arrivals.observed(at, tick).observed(at + timedelta(seconds=10), tick)
    # Then just after a fast-path count the room is still looked at only at the next tick
    last = arrivals.at
    looks = arrivals.between_looks(last)  # type: ignore[arg-type]
    assert looks.total_seconds() == pytest.approx(290, abs=1)  # 4 min 50 s, barely forgotten
    # and a clock gone back, or a look long after, change nothing but what they must
    assert arrivals.between_looks(last - timedelta(hours=1)) == arrivals.longest_gap  # type: ignore[operator]
    assert arrivals.between_looks(last + timedelta(hours=2)) == timedelta(minutes=15)  # type: ignore[operator]
    # And a longest gap of an hour ago counts for e^-1 of itself: 1-minute ticks since
    # let it fall
    for minute in range(1, 61):
        arrivals = arrivals.observed(last + timedelta(minutes=minute), 6)  # type: ignore[operator]
    assert arrivals.longest_gap.total_seconds() == pytest.approx(290 / math.e, abs=1)


def test_a_count_after_an_hour_without_one_learns_the_rate_again_erring_towards_room() -> None:
    learnt = counted(*[10] * 200)  # quiet for over three hours: learnt, no room
    assert learnt.unlearnt(learnt.at) == 0  # type: ignore[arg-type]
    later = learnt.at + timedelta(hours=2)  # type: ignore[operator]
    again = learnt.observed(later, 10)
    assert (again.since, again.unlearnt(later)) == (later, 1)


def test_a_fixed_buffer_beside_one_from_arrivals_keeps_its_pods() -> None:
    both = policy(
        {
            "type": "PendingPods",
            "pendingPods": {
                "buffer": [
                    {"pods": 5, "requests": {"cpu": "2"}},
                    {"fromArrivals": {"maxPods": 40}, "requests": {"cpu": "1"}},
                ]
            },
        }
    )
    sized, _ = sized_buffers(both, Arrivals(10, T, 3.0), BOOT, "set", T)
    (metric,) = sized.spec.metrics
    assert isinstance(metric, PendingPodsMetric)
    assert [b.pods for b in metric.pending_pods.buffer] == [5, 12]


def test_a_policy_without_a_buffer_from_arrivals_is_left_as_it_is() -> None:
    fixed = policy(
        {"type": "PendingPods", "pendingPods": {"buffer": [{"pods": 16, "requests": {"cpu": "1"}}]}}
    )
    assert sized_buffers(fixed, Arrivals(1, T, 9.0), BOOT, "set", T) == (fixed, "")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({}, "a buffer needs either pods"),
        ({"pods": 4, "fromArrivals": {"maxPods": 8}}, "not both and not neither"),
        ({"fromArrivals": {"minPods": 9, "maxPods": 8}}, "minPods 9 is above maxPods 8"),
        ({"fromArrivals": {"minPods": 1}}, "fromArrivals.maxPods\n  Field required"),
        ({"fromArrivals": {"maxPods": 0}}, "greater than or equal to 1"),
        ({"fromArrivals": {"maxPods": "8"}}, "valid integer"),
        ({"fromArrivals": {"maxPods": 8, "rate": 2}}, "fromArrivals.rate\n  Extra inputs"),
    ],
)
def test_a_buffer_sized_wrongly_is_refused_naming_the_field(
    fields: dict[str, object], error: str
) -> None:
    with pytest.raises(ValidationError, match=error):
        CapacityBuffer.model_validate({"requests": {"cpu": "1"}, **fields})


def test_the_arrivals_survive_their_storage_form_and_a_broken_one_is_refused() -> None:
    arrivals = counted(0, 7, 19)
    assert Arrivals.load(arrivals.dump()) == arrivals
    for broken in (
        {"pods": -1},
        {"per_minute": -2},
        {"at": "2026-11-23T08:00:00"},
        {"since": "2026-11-23T08:00:00"},
        {"longest_gap_s": 3600},
    ):
        with pytest.raises(ValueError, match="arrivals: "):
            Arrivals.load(json.dumps(json.loads(arrivals.dump()) | broken))


def test_arrivals_stored_before_their_first_count_was_kept_load_as_learnt() -> None:
    # Given a rate stored by a build that did not keep the first count
    older = {"pods": 10, "at": T.isoformat(), "per_minute": 0.0}
    loaded = Arrivals.load(json.dumps(older))
    # Then it is taken as learnt: no room is brought back for it
    assert loaded.since is None and loaded.unlearnt(T) == 0
    assert counted(10).since == T and Arrivals().unlearnt(T) == 1

"""A buffer's room eaten before the next tick is looked at again when the group's arrival
rate says it runs short (`domain.ahead.recheck`): the evaluation counts the room beyond the
buffer, works out when, and the fast path asks for an evaluation then, once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.group_buffers import BufferFit, fit_buffer
from nodescaler.domain.ahead.recheck import COUNTED_UP_TO, Recheck, SpareSeen, buffer_recheck
from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Pod, Resources
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import CapacityBuffer
from nodescaler.errors import StateUnavailableError
from nodescaler.service.fast_path import FastPath
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy
from tests.unit.test_fast_path_prometheus import Sent

GIB = 2**30
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
BUFFER = {"type": "PendingPods", "pendingPods": {"buffer": [{"pods": 4, "requests": {"cpu": "1"}}]}}


def node(cpus: int) -> NodeTemplate:
    return NodeTemplate("web", Resources(cpus * 1000, 64 * GIB, 110))


def four_one_core_pods() -> list[CapacityBuffer]:
    return [CapacityBuffer.model_validate({"pods": 4, "requests": {"cpu": "1"}})]


# --- the room beyond the buffer ------------------------------------------------------------


def test_the_room_beyond_a_whole_buffer_is_counted_in_its_pods() -> None:
    fit = fit_buffer(four_one_core_pods(), {"a": node(3), "b": node(3)}, node(8))
    assert (fit.nodes, fit.spare) == (0, 2)  # 6 cores: 4 for the buffer, 2 beyond


def test_the_room_beyond_is_counted_up_to_a_bound() -> None:
    fit = fit_buffer(four_one_core_pods(), {"a": node(1000)}, node(8))
    assert fit.spare == COUNTED_UP_TO


def test_the_room_beyond_is_counted_in_the_buffers_largest_shape() -> None:
    # whichever is written first: a 1-core and a 2-core pod, 3 cores beyond them
    small = {"pods": 1, "requests": {"cpu": "1"}}
    large = {"pods": 1, "requests": {"cpu": "2"}}
    for written in ([small, large], [large, small]):
        buffers = [CapacityBuffer.model_validate(b) for b in written]
        assert fit_buffer(buffers, {"a": node(6)}, node(8)).spare == 1


def test_a_buffer_short_of_room_has_none_beyond() -> None:
    fit = fit_buffer(four_one_core_pods(), {"a": node(3)}, node(8))
    assert (fit.fit_now, fit.nodes, fit.spare) == (3, 1, None)


def test_an_empty_buffer_counts_no_room() -> None:
    # a buffer sized from arrivals in a quiet cluster: its least, none
    quiet = {"fromArrivals": {"maxPods": 8}, "requests": {"cpu": "1"}}
    sized_to_nothing = [CapacityBuffer.model_validate(quiet)]
    fit = fit_buffer(sized_to_nothing, {"a": node(3)}, node(8))
    assert fit == BufferFit("room for 0..8 × 1 cpu (from arrivals)", 0, 0, 0, spare=None)


# --- when to look again ---------------------------------------------------------------------

BOOT = timedelta(minutes=3)
MINUTE = timedelta(minutes=1)


def counted(pods: int, per_minute: float = 6, gap: timedelta = MINUTE) -> Arrivals:
    """The group's pods counted at T0, arriving at `per_minute` at most lately, its counts
    `gap` apart lately."""
    return Arrivals(pods, T0, per_minute, T0 - timedelta(hours=1), gap)


def recheck(
    buffer: int, spare: int | None, before: SpareSeen | None, arrivals: Arrivals, **given: Any
) -> Recheck:
    """`buffer_recheck` at T0, a boot of 3 minutes unless `given`."""
    boot = given.get("boot", BOOT)
    return buffer_recheck(buffer, spare, before, arrivals=arrivals, boot=boot, now=T0)


def a_minute_ago(spare: int, group_pods: int = 40, per_minute: float = 0.0) -> SpareSeen:
    return SpareSeen(spare, T0 - MINUTE, group_pods, per_minute)


def test_the_look_comes_when_the_pod_past_the_spare_room_arrives() -> None:
    # 6 pods came in a minute, 6 pods' room went, 2 left beyond a buffer of 4: the third
    # eats into it 30 s from now, and a node asked for at the tick would come too late
    found = recheck(4, 2, a_minute_ago(8), counted(46))
    assert found == Recheck(T0 + timedelta(seconds=30), SpareSeen(2, T0, 46, 6.0))


def test_the_faster_of_the_rooms_rate_and_the_pods_arrival_rate_counts() -> None:
    # 2 pods' room went in a minute, but pods arrive at 12 a minute at most lately: the
    # third pod comes in 15 s; and room going faster than pods (larger pods) counts too
    assert recheck(4, 2, a_minute_ago(4), counted(46, 12)).at == T0 + timedelta(seconds=15)
    assert recheck(4, 2, a_minute_ago(14), counted(41, 1)).at == T0 + timedelta(seconds=15)


def test_no_look_when_the_next_tick_comes_first() -> None:
    assert recheck(4, 5, a_minute_ago(11), counted(46)).at is None  # the sixth at the minute


def test_no_look_where_the_buffer_covers_a_boot_and_a_tick_at_the_rate() -> None:
    # 40 pods' room at 6 a minute lasts 7 minutes: the tick's node is in time
    assert recheck(40, 0, a_minute_ago(6), counted(46)).at is None
    # which a boot of 7 minutes would not be
    later = recheck(40, 0, a_minute_ago(6), counted(46), boot=timedelta(minutes=7))
    assert later.at is not None


def test_no_look_when_no_pod_came_however_fast_they_came_before() -> None:
    # a burst over: 120 a minute lately, none since the count a minute ago
    assert recheck(4, 2, a_minute_ago(2, 46), counted(46, 120)) == Recheck(
        None, SpareSeen(2, T0, 46, 0.0)
    )
    # a node came: the room grew, and lasts past the tick
    assert recheck(4, 17, a_minute_ago(1), counted(46)) == Recheck(None, SpareSeen(17, T0, 46, 6))
    assert recheck(4, 2, None, counted(46)) == Recheck(None, SpareSeen(2, T0, 46, 0.0))
    stale = SpareSeen(60, T0 - timedelta(minutes=16), 10)
    assert recheck(4, 2, stale, counted(46)).at is None


def test_a_buffer_short_now_asks_no_look_and_forgets_its_count() -> None:
    assert recheck(4, None, a_minute_ago(8), counted(46)) == Recheck(None, None)


def test_a_count_stands_until_a_minute_old_with_its_rate() -> None:
    # the tick 5 s ago counted 8 beyond, pods coming at 6 a minute, and asked for a look;
    # an evaluation now that saw none come keeps the tick's count, and its rate stands
    tick = SpareSeen(2, T0 - timedelta(seconds=5), 46, 6.0)
    assert recheck(4, 2, tick, counted(46)) == Recheck(T0 + timedelta(seconds=30), tick)
    # one that saw pods come measures from the tick's count too
    assert recheck(4, 1, tick, counted(47)).seen == tick
    # a minute on, this count is the one measured from, with the rate it found
    assert recheck(4, 8, a_minute_ago(8, 46), counted(46)).seen == SpareSeen(8, T0, 46, 0.0)


def test_the_rooms_own_rate_is_per_minute_of_the_time_since_its_count() -> None:
    # 6 pods' room went in 30 s: 12 a minute, pods arriving at 1: the third in 15 s
    half = SpareSeen(8, T0 - timedelta(seconds=30), 45, 0.0)
    assert recheck(4, 2, half, counted(46, 1)).at == T0 + timedelta(seconds=15)


def test_a_single_pods_room_gone_is_pods_coming_with_no_pods_counted() -> None:
    # one pod's room went in a minute; the group's pods were not counted then
    assert recheck(4, 2, SpareSeen(3, T0 - MINUTE), counted(46)).at is not None


def test_a_count_of_the_same_instant_measures_nothing_and_stands() -> None:
    same = SpareSeen(8, T0, 40, 0.0)
    assert recheck(4, 2, same, counted(46)) == Recheck(None, same)


def test_a_count_fifteen_minutes_old_still_measures_and_an_older_one_does_not() -> None:
    old = SpareSeen(92, T0 - timedelta(minutes=15), 40)  # 6 a minute
    assert recheck(4, 2, old, counted(46, 1)).at == T0 + timedelta(seconds=30)
    older = SpareSeen(92, T0 - timedelta(minutes=15, seconds=1), 40)
    assert recheck(4, 2, older, counted(46, 1)).at is None


def test_the_look_is_asked_exactly_while_the_tick_would_leave_a_pod_waiting() -> None:
    # 6 a minute, 2 beyond: the room lasts (buffer + 3) / 6 minutes, the tick's node
    # comes in 1 + 3: a buffer of 21 lasts exactly that (in time), one of 20 does not
    assert recheck(21, 2, a_minute_ago(8), counted(46)).at is None
    assert recheck(20, 2, a_minute_ago(8), counted(46)).at == T0 + timedelta(seconds=30)


def test_the_look_is_never_sooner_than_the_fast_paths_slot() -> None:
    assert recheck(4, 0, a_minute_ago(600), counted(46)).at == T0 + timedelta(seconds=10)


def test_before_a_gap_between_counts_is_learnt_no_look_is_asked() -> None:
    assert recheck(4, 0, a_minute_ago(6), counted(46, gap=timedelta(0))).at is None


# --- the fast path asks when one comes due -------------------------------------------------


class Groups:
    def discover(self) -> list[NodeGroup]:
        tags = {"nodescaler/enabled": "true", "nodescaler/policy": "web"}
        plain = {"nodescaler/enabled": "true", "nodescaler/policy": "plain"}
        return [
            NodeGroup("web-a", 3, 0, 10, 3, tags=tags),
            NodeGroup("web-b", 3, 0, 10, 3, tags=tags),
            NodeGroup("plain", 3, 0, 10, 3, tags=plain),
        ]


class Times:
    """The groups' recheck times, or the error reading them raises."""

    def __init__(self, times: dict[str, datetime] | Exception) -> None:
        self.times = times
        self.asked: list[tuple[str, ...]] = []

    def rechecks(self, groups: Any) -> dict[str, datetime]:
        self.asked.append(tuple(groups))
        if isinstance(self.times, Exception):
            raise self.times
        return {g: t for g, t in self.times.items() if g in groups}


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def now(self) -> datetime:
        return self.at


class NoPods:
    def unschedulable_pods(self) -> dict[str, Pod]:
        return {}

    def nodes(self) -> list[Any]:
        return []


def fast_path(times: Times, clock: Clock | None = None) -> tuple[FastPath, Sent]:
    sent = Sent()
    book = PolicyBook(
        {"web": policy(BUFFER, name="web"), "plain": policy({"type": "PendingPods"})},
        TagNames(),
    )
    path = FastPath(
        Groups(),
        sent,
        book,
        NoPods(),
        backlogs=None,  # type: ignore[arg-type]
        prometheus=None,  # type: ignore[arg-type]
        clock=clock or Clock(),
        sleep=lambda seconds: None,
        rechecks=times,
    )
    return path, sent


def test_a_group_whose_recheck_has_come_is_asked_once_for_it() -> None:
    clock = Clock()
    times = Times({"web-a": T0 - timedelta(seconds=2), "web-b": T0 + timedelta(seconds=20)})
    path, sent = fast_path(times, clock)
    watch = path.watch()

    look = path.act(path.look(watch))
    clock.at = T0 + timedelta(seconds=15)  # past the slot: the same time is not asked again
    path.act(path.look(watch))

    assert times.asked[0] == ("web-a", "web-b")  # the groups that keep a buffer, alone
    assert [(r.node_group, r.cause) for r in sent.requests] == [
        ("web-a", "fast path: its last evaluation asked for a look by 08:59:58Z")
    ]
    assert look.next_recheck == T0 + timedelta(seconds=20)


def test_a_new_time_written_by_the_evaluation_is_asked_again_when_it_comes() -> None:
    clock = Clock()
    times = Times({"web-a": T0})
    path, sent = fast_path(times, clock)
    watch = path.watch()
    path.act(path.look(watch))
    clock.at = T0 + timedelta(seconds=30)
    times.times = {"web-a": T0 + timedelta(seconds=25)}

    path.act(path.look(watch))

    assert [r.node_group for r in sent.requests] == ["web-a", "web-a"]
    assert sent.requests[0].event_id != sent.requests[1].event_id  # two requests, not one


def test_a_group_asked_within_the_slot_waits_and_is_asked_at_the_next_look() -> None:
    clock = Clock()
    times = Times({"web-a": T0 - timedelta(seconds=1)})
    path, sent = fast_path(times, clock)
    path.debounce.last_asked["web-a"] = T0 - timedelta(seconds=3)  # its pods just asked
    watch = path.watch()

    resting = path.act(path.look(watch))
    clock.at = T0 + timedelta(seconds=10)
    path.act(path.look(watch))

    assert resting.resting == ["web-a"] and len(sent.requests) == 1


@pytest.mark.parametrize("error", [StateUnavailableError("state-table: throttled")])
def test_the_times_unreadable_are_said_and_back_off_no_other_look(error: Exception) -> None:
    path, sent = fast_path(Times(error))

    look = path.act(path.look(path.watch()))

    assert sent.requests == []
    assert look.state_error == "the groups' recheck times: state-table: throttled"
    assert not look.failed  # the pods' and queues' looks go on every 5 s; the tick looks


def test_a_recheck_time_in_another_zone_is_told_in_utc() -> None:
    from zoneinfo import ZoneInfo

    paris = (T0 - timedelta(seconds=2)).astimezone(ZoneInfo("Europe/Paris"))
    path, sent = fast_path(Times({"web-a": paris}))

    path.act(path.look(path.watch()))

    assert sent.requests[0].cause.endswith("by 08:59:58Z")


def test_without_a_group_that_keeps_a_buffer_no_time_is_read() -> None:
    times = Times({})
    path, _ = fast_path(times)
    watch = path.watch()
    unbuffered = type(watch)(watch.pending_groups, watch.queues, watch.pending, ())

    path.look(unbuffered)

    assert times.asked == []


class DaemonSetPodPending(NoPods):
    def unschedulable_pods(self) -> dict[str, Pod]:
        agent = Pod("kube-system", "agent-x", None, Resources(100, 2**20, 1), daemon_set=True)
        return {"uid-agent": replace(agent, phase="Pending", unschedulable=True)}


def test_a_daemon_sets_pod_waiting_for_its_node_is_no_pod_to_look_for() -> None:
    # Given only a DaemonSet's pod unschedulable (its node is full)
    path, sent = fast_path(Times({}))
    path.pods = DaemonSetPodPending()
    look = path.act(path.look(path.watch()))
    # Then no group is asked for it, and the look counts no pod waiting
    assert look.unschedulable == 0
    assert sent.requests == []

"""A buffer's room eaten before the next tick is looked at again when the group's arrival
rate says it runs short (`domain.ahead.recheck`): the evaluation counts the room beyond the
buffer, works out when, and the fast path asks for an evaluation then, once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.group_buffers import fit_buffer
from nodescaler.domain.ahead.recheck import buffer_recheck
from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Pod, Resources
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import CapacityBuffer
from nodescaler.errors import StateUnavailableError
from nodescaler.events.evaluation_request import EvaluationRequest
from nodescaler.service.fast_path import FastPath
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy

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


def test_the_room_beyond_is_counted_up_to_as_many_pods_as_the_buffer_keeps() -> None:
    fit = fit_buffer(four_one_core_pods(), {"a": node(64)}, node(8))
    assert fit.spare == 4


def test_a_buffer_short_of_room_has_none_beyond() -> None:
    fit = fit_buffer(four_one_core_pods(), {"a": node(3)}, node(8))
    assert (fit.fit_now, fit.nodes, fit.spare) == (3, 1, None)


def test_an_empty_buffer_counts_no_room() -> None:
    # a buffer sized from arrivals in a quiet cluster: its least, none
    quiet = {"fromArrivals": {"maxPods": 8}, "requests": {"cpu": "1"}}
    sized_to_nothing = [CapacityBuffer.model_validate(quiet)]
    assert fit_buffer(sized_to_nothing, {"a": node(3)}, node(8)).spare is None


# --- when to look again ---------------------------------------------------------------------


def learnt(per_minute: float, gap: timedelta = timedelta(minutes=1)) -> Arrivals:
    """Pods counted at T0, arriving at `per_minute`, counted every `gap` lately."""
    return Arrivals(50, T0, per_minute, T0 - timedelta(hours=1), gap)


BOOT = timedelta(minutes=3)


def test_the_look_comes_when_the_pod_past_the_spare_room_arrives() -> None:
    # 6 pods a minute, 2 beyond a buffer of 4: the third eats into it 30 s from now, and
    # a node asked for at the tick (a minute on) would be Ready after the room is gone
    assert buffer_recheck(4, 2, learnt(6), BOOT, T0) == T0 + timedelta(seconds=30)


def test_no_look_when_the_next_tick_comes_first() -> None:
    assert buffer_recheck(4, 5, learnt(6), BOOT, T0) is None  # the sixth pod at the minute


def test_no_look_where_the_buffer_covers_a_boot_and_a_tick_at_the_rate() -> None:
    # 40 pods' room at 6 a minute lasts 7 minutes: the tick's node is in time
    assert buffer_recheck(40, 0, learnt(6), BOOT, T0) is None
    # which a boot of 7 minutes would not be
    assert buffer_recheck(40, 0, learnt(6), timedelta(minutes=7), T0) is not None


def test_no_look_without_arrivals_or_a_whole_buffer() -> None:
    assert buffer_recheck(4, 0, learnt(0), BOOT, T0) is None
    assert buffer_recheck(4, None, learnt(60), BOOT, T0) is None  # short: this one buys


def test_the_look_is_never_sooner_than_the_fast_paths_slot() -> None:
    assert buffer_recheck(4, 0, learnt(600), BOOT, T0) == T0 + timedelta(seconds=10)


def test_before_a_gap_between_looks_is_learnt_no_look_is_asked() -> None:
    assert buffer_recheck(4, 0, learnt(6, timedelta(0)), BOOT, T0) is None


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


class Sent:
    def __init__(self) -> None:
        self.requests: list[EvaluationRequest] = []

    def send(self, requests: list[EvaluationRequest]) -> None:
        self.requests += requests


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
    times = Times({"web-a": T0 - timedelta(seconds=2), "web-b": T0 + timedelta(seconds=20)})
    path, sent = fast_path(times)
    watch = path.watch()

    look = path.act(path.look(watch))
    path.act(path.look(watch))  # the same time read again: not asked again

    assert times.asked[0] == ("web-a", "web-b")  # the groups that keep a buffer, alone
    assert [(r.node_group, r.cause) for r in sent.requests] == [
        ("web-a", "fast path: its buffer's room runs short at its pods' rate by 08:59:58Z")
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
def test_the_times_unreadable_fail_the_look_and_ask_nothing(error: Exception) -> None:
    path, sent = fast_path(Times(error))

    look = path.act(path.look(path.watch()))

    assert look.failed and sent.requests == []
    assert look.state_error == "the groups' recheck times: state-table: throttled"


def test_without_a_group_that_keeps_a_buffer_no_time_is_read() -> None:
    times = Times({})
    path, _ = fast_path(times)
    watch = path.watch()
    unbuffered = type(watch)(watch.pending_groups, watch.queues, watch.pending, ())

    path.look(unbuffered)

    assert times.asked == []

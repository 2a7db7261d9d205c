"""A reservation's room used up between looks is looked at again as a buffer's is
(`domain.ahead.recheck`): its `Utilization` reading counts its room in pods of the group's
average shape, the plan works out when the pod that would make an evaluation buy a node
arrives, and the fast path asks for that evaluation then, where the tick would leave pods
waiting."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.recheck import Room, SpareSeen, reserved_room
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.plan import plan
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy
from tests.unit.test_buffer_recheck import BUFFER, T0, Times, fast_path
from tests.unit.test_planning import GROUP, NOW, facts

RESERVATION = {
    "type": "CapacityReservation",
    "name": "cpu",
    "capacityReservation": {"resource": "cpu"},
    "target": {"type": "Utilization", "averageUtilization": 75},
}
RESERVED = policy(RESERVATION, {"type": "PendingPods"}, name="payments")


def read(value: float, share: float | None = 2.5, measured: int | None = 4) -> MetricReading:
    """A reservation read at `value` %, each pod `share` points, over `measured` nodes."""
    return MetricReading(value=value, at=NOW, measured_nodes=measured, pod_share=share)


# --- its room in pods ------------------------------------------------------------------------


def test_the_pods_before_an_evaluation_buys_are_the_spare_and_the_rest_is_kept() -> None:
    # 75 % with a tolerance of 0.1 buys past 82.5 %: 4 pods of 2.5 points fit before
    # (82.5 %), the fifth buys; 27.5 points leave 11 pods' room in all
    assert reserved_room(75, read(72.5), desired=4, tolerance=0.1) == Room(kept=7, spare=4)
    # a tolerance of 0 buys past 75 %: 1 pod fits before
    assert reserved_room(75, read(72.5), desired=4, tolerance=0) == Room(kept=10, spare=1)


def test_nodes_on_their_way_raise_where_an_evaluation_buys() -> None:
    # five nodes desired over four measured: the reading buys past 75 × 5/4 = 93.75 %
    assert reserved_room(75, read(72.5), desired=5, tolerance=0.1) == Room(kept=3, spare=8)


def test_room_that_buys_past_full_is_all_spare() -> None:
    # 95 % buys past 104.5 %: the nodes are full (6 pods) before it would; past full with
    # pods waiting, none is left
    assert reserved_room(95, read(85), desired=4, tolerance=0.1) == Room(kept=0, spare=6)
    assert reserved_room(95, read(102), desired=4, tolerance=0.1) == Room(kept=0, spare=0)


def test_a_reading_at_the_point_an_evaluation_buys_past_is_whole_with_nothing_spare() -> None:
    # the tolerance holds up to and with 1.1 × 75 %: a pod more buys
    assert reserved_room(75, read(82.5), desired=4, tolerance=0.1) == Room(kept=7, spare=0)


@pytest.mark.parametrize(
    ("reading", "why"),
    [
        (read(85), "past 82.5 %: this evaluation buys"),
        (read(60, share=None), "no pod counted: no shape to count room in"),
        (read(60, measured=None), "nothing measured"),
        (read(60, measured=0), "no node measured"),
    ],
)
def test_no_room_is_counted(reading: MetricReading, why: str) -> None:
    assert reserved_room(75, reading, desired=4, tolerance=0.1) is None, why


# --- the plan records when to look ----------------------------------------------------------

# 4 pods a minute lately (the group's pods 26 → 30 in a minute, the room beyond 5 → 1):
# the room beyond is 1 pod now (79.7 %, 2.656 points a pod), counts a minute apart. The
# second pod to come, 30 s on, makes an evaluation buy; the eighth would wait, 2 minutes
# on, before the next tick's node could boot.
ASKED = NOW + timedelta(seconds=30)


def planned(
    value: float = 79.7, *, going: int = 5, counted: int = 26, **changes: object
) -> GroupState:
    """The state planned for the group of four, its reservation read at `value` %, the room
    beyond `going` pods and the group's pods `counted` a minute ago (30 now)."""
    arrivals = Arrivals(counted, NOW - timedelta(minutes=1), 0.0, NOW - timedelta(hours=1))
    arrivals = dataclasses.replace(arrivals, longest_gap=timedelta(minutes=1))
    readings = {
        "cpu": MetricReading(value=value, at=NOW, measured_nodes=4, pod_share=2.656),
        "pending-pods": MetricReading(value=0, at=NOW, group_pods=30),
    }
    before = SpareSeen(going, NOW - timedelta(minutes=1), counted)
    state = GroupState("web", arrivals=arrivals, spare_seen=before)
    made = facts(policy=RESERVED, state=state, readings=readings)
    return plan(dataclasses.replace(made, **changes)).state  # type: ignore[arg-type]


def test_a_reservation_about_to_buy_before_the_tick_is_looked_at_when_it_would() -> None:
    state = planned()
    assert (state.recheck, state.spare_seen) == (ASKED, SpareSeen(1, NOW, 30, 4.0))


def test_the_faster_of_the_rooms_rate_and_the_arrivals_counts() -> None:
    # the room gone 1 pod in a minute, the pods arriving at 4: the arrivals' rate counts;
    # 1 arriving, the room gone 4: the room's does
    assert planned(going=2).recheck == ASKED
    assert planned(counted=29).recheck == ASKED
    assert planned(going=2, counted=29).recheck is None  # 2 minutes: the tick comes first


def test_a_group_that_could_buy_nothing_or_shrinks_asks_no_look() -> None:
    assert planned(dry_run=True).recheck is None
    assert planned(group=dataclasses.replace(GROUP, max_size=4)).recheck is None


def test_a_reservation_whose_room_outlasts_a_tick_and_a_boot_asks_no_look() -> None:
    # 40 % leaves 22 pods' room: at 4 pods a minute the tick buys in time
    assert planned(40.0).recheck is None


def test_a_reservation_that_buys_looks_again_when_the_nodes_it_bought_would_be_used() -> None:
    # 90 % buys a fifth node; five nodes over four measured buy past 93.75 %: the second
    # pod to come would buy a sixth
    state = planned(90.0)
    assert (state.recheck, state.spare_seen) == (ASKED, SpareSeen(1, NOW, 30, 4.0))


def test_a_reservation_of_an_amount_keeps_no_room_to_count() -> None:
    amount = dict(RESERVATION, target={"type": "Value", "value": 24})
    state = planned(policy=policy(amount, {"type": "PendingPods"}, name="payments"))
    assert (state.recheck, state.spare_seen) == (None, None)


def test_a_group_keeping_a_buffer_too_is_watched_by_its_buffers_room() -> None:
    # the buffer's room beyond is 20 pods: however short the reservation's, no look
    buffered = policy(
        RESERVATION,
        {"type": "PendingPods", "pendingPods": {"buffer": [{"pods": 4, "requests": {"cpu": "1"}}]}},
    )
    readings = {
        "cpu": MetricReading(value=79.7, at=NOW, measured_nodes=4, pod_share=2.656),
        "pending-pods": MetricReading(value=0, at=NOW, group_pods=30, buffer_spare=20),
    }
    state = planned(policy=buffered, readings=readings)
    assert state.recheck is None and state.spare_seen == SpareSeen(20, NOW, 30, 4.0)


def test_of_two_reservations_the_least_room_of_each_counts() -> None:
    # memory's room beyond is 10 pods and 17 in all, CPU's 1 and 7: 1 beyond 6 kept
    memory = dict(RESERVATION, name="memory", capacityReservation={"resource": "memory"})
    both = policy(RESERVATION, memory, {"type": "PendingPods"})
    readings = {
        "cpu": MetricReading(value=79.7, at=NOW, measured_nodes=4, pod_share=2.656),
        "memory": MetricReading(value=57.5, at=NOW, measured_nodes=4, pod_share=2.5),
        "pending-pods": MetricReading(value=0, at=NOW, group_pods=30),
    }
    state = planned(policy=both, readings=readings)
    assert (state.recheck, state.spare_seen) == (ASKED, SpareSeen(1, NOW, 30, 4.0))


# --- the fast path looks at its time --------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "read"),
    [
        (RESERVED, ("web-a", "web-b", "plain")),
        (policy(RESERVATION), ("web-a", "web-b")),  # no PendingPods to count its arrivals
    ],
)
def test_a_reservation_beside_pending_pods_has_its_time_read_and_asked(
    written: NodeGroupPolicy, read: tuple[str, ...]
) -> None:
    # Given the groups "web-a" and "web-b" keeping a buffer, "plain" a reservation, its
    # last evaluation asking for a look 2 s ago
    times = Times({"plain": T0 - timedelta(seconds=2)})
    buffered, sent = fast_path(times)
    book = PolicyBook({"web": policy(BUFFER, name="web"), "plain": written}, TagNames())
    path = dataclasses.replace(buffered, policies=book)

    path.act(path.look(path.watch()))

    # Then its time is read with theirs, and its evaluation asked for, where it is watched
    assert times.asked == [read]
    assert [r.node_group for r in sent.requests] == [g for g in read if g == "plain"]

"""A plan asks the fast path for no look its group could buy nothing at
(`domain.scaling.plan_recheck`): not while its scale-out is paused, in a dry run, or with
no room under the cluster's limits for one more node; the count of its room is kept, as
for a group at its maximum (`test_planning.py`)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.recheck import SpareSeen
from nodescaler.domain.groups.optin import PauseDirection
from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.pause import Pause
from nodescaler.domain.scaling.plan import plan
from nodescaler.domain.scaling.readings import MetricReading

from tests.unit.test_planning import NOW, facts

# The room beyond the buffer down from 8 pods a minute ago to 2 now (6 a minute), counts a
# minute apart lately: the third pod to come, 30 s on, is when to look again.
ASKED = NOW + timedelta(seconds=30)
COUNTED = SpareSeen(2, NOW, 46, 6.0)  # this count, which the next evaluations measure from


def going(jobs: float = 16, **changes: object) -> GroupState:
    """The state planned for the group of four (`jobs` queued, four to a node), its room
    going, with `changes` to what was read."""
    arrivals = Arrivals(40, NOW - timedelta(minutes=1), 0.0, NOW - timedelta(hours=1))
    arrivals = dataclasses.replace(arrivals, longest_gap=timedelta(minutes=1))
    state = GroupState(
        "web", arrivals=arrivals, spare_seen=SpareSeen(8, NOW - timedelta(minutes=1))
    )
    readings = {
        "jobs": MetricReading(value=jobs, at=NOW),
        "pending-pods": MetricReading(value=0, at=NOW, group_pods=46, buffer_spare=2),
    }
    made = facts(jobs, state=state, readings=readings)
    return plan(dataclasses.replace(made, **changes)).state  # type: ignore[arg-type]


def paused(direction: PauseDirection, until: timedelta | None = None) -> Pause:
    ends = None if until is None else NOW + until
    return Pause(direction=direction, by="nodescaler pause", until=ends)


def test_a_group_free_to_buy_is_asked_to_be_looked_at_again() -> None:
    # the case each test below changes one thing of
    assert (going().recheck, going().spare_seen) == (ASKED, COUNTED)


@pytest.mark.parametrize("direction", [PauseDirection.SCALE_OUT, PauseDirection.BOTH])
def test_a_group_whose_scale_out_is_paused_is_not_asked(direction: PauseDirection) -> None:
    state = going(pauses=(paused(direction),))
    assert (state.recheck, state.spare_seen) == (None, COUNTED)


def test_a_pause_of_its_scale_in_alone_still_asks() -> None:
    assert going(pauses=(paused(PauseDirection.SCALE_IN),)).recheck == ASKED


def test_a_pause_over_before_the_look_still_asks_and_one_lasting_past_it_does_not() -> None:
    ending = paused(PauseDirection.SCALE_OUT, until=timedelta(seconds=20))
    assert going(pauses=(ending,)).recheck == ASKED
    lasting = paused(PauseDirection.SCALE_OUT, until=timedelta(seconds=40))
    assert going(pauses=(lasting,)).recheck is None


def test_a_dry_run_is_not_asked() -> None:
    state = going(dry_run=True)
    assert (state.recheck, state.spare_seen) == (None, COUNTED)


def test_a_group_the_clusters_limits_leave_no_node_is_not_asked() -> None:
    # Given limits that leave the group of four no fifth node, or one
    state = going(ceiling=Ceiling(4, "maximum of 4 nodes"))
    assert (state.recheck, state.spare_seen) == (None, COUNTED)
    assert going(ceiling=Ceiling(5, "maximum of 5 nodes")).recheck == ASKED


def test_a_scale_up_to_the_clusters_limit_leaves_no_room_to_ask_for() -> None:
    # Given 24 jobs: six nodes, under limits of seven, or of six
    under = plan(facts(24, ceiling=Ceiling(7, "maximum of 7 nodes"))).decision
    assert under.desired == 6 and Limit.CLUSTER_LIMIT not in under.limited_by
    assert going(24, ceiling=Ceiling(7, "maximum of 7 nodes")).recheck == ASKED
    state = going(24, ceiling=Ceiling(6, "maximum of 6 nodes"))
    assert (state.recheck, state.spare_seen) == (None, COUNTED)

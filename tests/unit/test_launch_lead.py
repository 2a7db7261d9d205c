"""A scale-up's time from request to Ready, to the second: from the Node's Ready condition
(`lastTransitionTime`, as the kubelet reports it), not the evaluation that saw it arrive
(a tick later), for the forecast's lead and a buffer's boot time (issue 44, item 1)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from nodescaler.adapters.k8s.conversion import node_from_json
from nodescaler.domain.scale_up.backoff import Provisioning
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.plan import plan

from tests.kube import node
from tests.unit.test_planning import GROUP, NOW, facts

ASKED = Provisioning(since=NOW - timedelta(minutes=3), target=6)
OLD = NOW - timedelta(hours=1)  # the group's four nodes from before


def at(seconds: float) -> datetime:
    """`seconds` after the request."""
    return ASKED.since + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("ready_since", "arrived"),
    [
        # the two new nodes Ready 130 and 142 s after the request: the target at 142 s
        ((OLD, OLD, OLD, OLD, at(142), at(130)), at(142)),
        # one more than the target: reached when the sixth turned Ready
        ((OLD, OLD, OLD, OLD, at(130), at(142), at(170)), at(142)),
        # a node that gives no time: the evaluation's own time stands
        ((OLD, OLD, OLD, OLD, at(130), None), NOW),
        # fewer than the target (the cluster counted otherwise): the evaluation's time
        ((OLD, OLD, at(130)), NOW),
        # the target reached before the request (a node Ready again, say): not its launch
        ((OLD,) * 6, NOW),
    ],
)
def test_a_scale_up_arrives_when_its_target_th_node_turned_ready(
    ready_since: tuple[datetime | None, ...], arrived: datetime
) -> None:
    assert ASKED.arrived(ready_since, NOW) == arrived


def test_the_lead_measured_is_request_to_ready_not_to_the_evaluation_that_saw_it() -> None:
    # Given a scale-up to 6 asked 3 minutes ago, its two nodes Ready at 130 and 142 s
    group = dataclasses.replace(GROUP, desired=6, in_service=6)
    ready = (OLD, OLD, OLD, OLD, at(130), at(142))
    state = GroupState("web", provisioning=ASKED)
    # When the next evaluation (at 180 s) sees them
    planned = plan(facts(24, group=group, state=state, ready=6, ready_since=ready))
    # Then the lead is 142 s, to the second, not the 180 s to the evaluation
    assert planned.state.provisioning is None
    assert planned.state.demand.cold == (142.0,)
    assert planned.state.demand.lead_seconds == 142


def test_a_nodes_ready_time_is_read_from_its_ready_condition() -> None:
    made = node("a-1", "a")
    made["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-23T09:03:07Z"
    assert node_from_json(made).ready_since == datetime.fromisoformat("2026-11-23T09:03:07+00:00")
    made["status"]["conditions"][0]["status"] = "False"  # NotReady since then: not Ready since
    assert node_from_json(made).ready_since is None
    assert node_from_json(node("a-2", "a")).ready_since is None  # none given

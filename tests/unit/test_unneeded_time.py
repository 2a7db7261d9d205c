"""Each node's own unneeded time (`domain.scaling.unneeded_time`): an empty node the
cluster's view has found unneeded at every evaluation for a whole scale-down window goes,
though the window over the group's recommendations still remembers a higher peak, unless
the demand now wants it; as Cluster Autoscaler deletes a node unneeded for its unneeded
time whatever its group's other nodes did. The evaluations below run one after another,
each with the history the last one left."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from nodescaler.domain.scaling.autoscaler import Evaluation, decide
from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading
from nodescaler.domain.scaling.unneeded_time import Spare, spare_of

from tests.builders import T0, policy, queue_metric
from tests.unit.test_schedule_bound import schedule

WINDOW = 300
NODES = ("n1", "n2", "n3", "n4")  # empty, and unneeded: the cluster's view


def _policy(*extra: dict[str, Any], min_replicas: int = 0, **scale_down: Any) -> Any:
    """A queue's workers, 5 tasks a node, and pending pods (as scenario 7's policy)."""
    behavior = {"scaleDown": {"stabilizationWindowSeconds": WINDOW, **scale_down}}
    pending = {"type": "PendingPods", "pendingPods": {}}
    metrics = (queue_metric("jobs", per_node=5), pending, *extra)
    return policy(*metrics, min_replicas=min_replicas, max_replicas=20, behavior=behavior)


QUEUE = _policy()


def _view(seconds: float, nodes: tuple[str, ...] = NODES, empty: int = 4) -> Reading:
    """The pending pods metric: none pending, `nodes` unneeded, the first `empty` empty,
    the group's pods needing 6 nodes."""
    return MetricReading(
        value=0,
        at=T0 + timedelta(seconds=seconds),
        unneeded_nodes=len(nodes),
        empty_nodes=empty,
        needed_nodes=6,
        candidates=nodes,
    )


def _decide(
    history: History,
    seconds: float,
    *,
    backlog: float | None = 0,
    the_policy: Any = QUEUE,
    view: Reading | None = None,
    **more: Reading,
) -> Evaluation:
    now = T0 + timedelta(seconds=seconds)
    jobs: Reading = (
        MetricReading(value=backlog, at=now)
        if backlog is not None
        else MetricUnavailable(reason="CloudWatch is down")
    )
    return decide(
        node_group="workers-ng",
        policy=the_policy,
        size=GroupSize(current=10),
        readings={"jobs": jobs, "pending-pods": view or _view(seconds), **more},
        history=history,
        now=now,
    )


def _peak(the_policy: Any = QUEUE, view: Reading | None = None, **more: Reading) -> Evaluation:
    """At T0 and T0 + 60 s the backlog asks for all 10 nodes, though 4 are empty and
    unneeded from T0 (`view`: the cluster's view at 60 s): the window holds 10 until
    T0 + 360 s, past the 4 nodes' own time."""
    first = _decide(History(), 0, backlog=50, the_policy=the_policy, **more)
    again = _decide(first.history, 60, backlog=50, the_policy=the_policy, view=view, **more)
    assert first.decision.desired == again.decision.desired == 10
    return again


def test_empty_nodes_unneeded_a_whole_window_go_though_the_window_remembers_the_peak() -> None:
    # Given the peak until T0 + 60 s, and the backlog empty from T0 + 120 s
    quiet = _decide(_peak().history, 120)
    assert quiet.decision.desired == 10  # the window holds the peak
    # When evaluated a second before the 4 nodes' window ends, Then it still holds
    early = _decide(quiet.history, WINDOW - 1)
    assert early.decision.desired == 10
    assert Limit.UNNEEDED_TIME not in early.decision.limited_by
    # When evaluated as it ends (the peak still in the window), Then they go: down to the
    # 6 nodes the pods need
    due = _decide(early.history, WINDOW)
    assert due.decision.desired == 6
    assert Limit.UNNEEDED_TIME in due.decision.limited_by
    assert "but nodes empty and unneeded for 300s go" in due.decision.reason
    # the window held all of it: not told as a window that let some go
    assert "held by the scale-down window" in due.decision.reason
    assert [u.since for u in due.history.unneeded] == [T0] * 4  # timed from the first read
    # (without their own time, the window's end would have let them go only at T0 + 360 s)
    assert _decide(early.history, WINDOW + 60).decision.desired == 6


def test_a_node_found_needed_in_between_starts_its_time_again() -> None:
    # n4 was needed at T0 + 60 s: its time starts again when next found unneeded
    needed = _peak(view=_view(60, NODES[:3], empty=3))
    assert _decide(needed.history, WINDOW).decision.desired == 7


def test_a_cluster_unread_starts_every_nodes_time_again() -> None:
    blind = _peak(view=MetricUnavailable(reason="the API server is down"))
    assert blind.history.unneeded == ()
    assert _decide(blind.history, WINDOW).decision.desired == 10


def test_only_empty_nodes_go_past_the_window() -> None:
    # all 4 unneeded since T0, but only 2 empty now (the other 2's pods could move)
    assert _decide(_peak().history, WINDOW, view=_view(WINDOW, empty=2)).decision.desired == 8


def test_the_demand_now_keeps_the_nodes_it_wants() -> None:
    # the backlog is back: 40 tasks, 8 nodes' worth; two empty nodes of the four go
    back = _decide(_peak().history, WINDOW, backlog=40)
    assert back.decision.desired == 8
    assert Limit.UNNEEDED_TIME in back.decision.limited_by
    # 50 tasks want all 10: none goes
    full = _decide(_peak().history, WINDOW, backlog=50)
    assert full.decision.desired == 10
    assert Limit.UNNEEDED_TIME not in full.decision.limited_by


def test_never_below_the_minimum_nor_a_schedules_count() -> None:
    at_least_8 = _policy(min_replicas=8)
    assert _decide(_peak(at_least_8).history, WINDOW, the_policy=at_least_8).decision.desired == 8
    nightly = _policy(schedule(9))
    count = {"schedule": MetricReading(value=9, at=T0)}
    held = _decide(_peak(nightly, **count).history, WINDOW, the_policy=nightly, **count)
    assert held.decision.desired == 9


def test_a_rate_the_user_wrote_or_a_scale_in_disabled_binds_them_too() -> None:
    one_a_minute = _policy(policies=[{"type": "Replicas", "value": 1, "periodSeconds": 60}])
    disabled = _policy(selectPolicy="Disabled")
    for written in (one_a_minute, disabled):
        held = _decide(_peak(written).history, WINDOW, the_policy=written)
        assert held.decision.desired == 10
        assert Limit.UNNEEDED_TIME not in held.decision.limited_by


def test_a_scale_in_window_that_holds_them_is_what_the_reason_names() -> None:
    closed = {"name": "none", "schedule": "0 0 * * *", "durationMinutes": 1440}
    spec = QUEUE.spec.model_dump(by_alias=True, exclude_none=True)
    held_policy = type(QUEUE).model_validate(
        {
            "metadata": {"name": "closed"},
            "spec": spec | {"scaleInWindows": [closed | {"maxNodesPerHour": 0}]},
        }
    )
    held = _decide(_peak(held_policy).history, WINDOW, the_policy=held_policy)
    assert held.decision.desired == 10
    assert Limit.SCALE_IN_WINDOW in held.decision.limited_by
    assert Limit.UNNEEDED_TIME not in held.decision.limited_by  # nothing went past the window
    assert "unneeded for" not in held.decision.reason


def test_with_the_metric_missing_only_empty_nodes_go_and_their_time_still_runs() -> None:
    # CloudWatch down from T0 + 120 s: with no node empty, nothing may go, yet the nodes'
    # time runs (the cluster is read)
    down = _decide(_peak().history, 120, backlog=None, view=_view(120, empty=0))
    assert Limit.MISSING_METRIC in down.decision.limited_by
    assert [u.since for u in down.history.unneeded] == [T0] * 4
    # 2 of them empty at the window's end: those 2 go, the others' pods stay put
    gone = _decide(down.history, WINDOW, backlog=None, view=_view(WINDOW, empty=2))
    assert gone.decision.desired == 8
    assert Limit.EMPTY_ONLY in gone.decision.limited_by


def test_the_view_naming_the_most_empty_nodes_is_the_one_timed() -> None:
    fewer = MetricReading(value=0, at=T0, empty_nodes=1, candidates=("a", "b"))
    more = MetricReading(value=0, at=T0, empty_nodes=2, candidates=("c", "d", "e"))
    assert spare_of([fewer, None, more]) == Spare(("c", "d", "e"), frozenset({"c", "d"}))
    assert spare_of([MetricUnavailable(reason="unread"), None]) == Spare()
    named_none = MetricReading(value=0, at=T0, candidates=("a",))
    assert spare_of([named_none]) == Spare(("a",), frozenset())
    one_empty = MetricReading(value=0, at=T0, empty_nodes=1, candidates=("b",))
    assert spare_of([named_none, one_empty]).nodes == ("b",)  # none said empty counts as 0

"""A group's persisted state as it moves on, its scale events and the nodes that must stay."""

from __future__ import annotations

from datetime import timedelta

from nodescaler.domain.cluster.snapshot import Node, Pod, Resources
from nodescaler.domain.scale_down.pod_rules import keeps_node
from nodescaler.domain.scaling.group_state import RECENT_EVENTS, GroupState
from nodescaler.domain.scaling.history import History, ScaleEvent
from nodescaler.domain.scaling.readings import MetricReading, reading_at

from tests.builders import T0, policy, queue_metric, readings, run


def test_a_scale_event_is_kept_for_its_window_and_a_no_change_is_not_one() -> None:
    history = History().with_scale_event(T0, before=2, after=5, keep_seconds=60)
    assert history.scale_events == (ScaleEvent(at=T0, change=3),)
    later = history.with_scale_event(T0 + timedelta(seconds=59), 5, 5, keep_seconds=60)
    assert later.scale_events == history.scale_events  # kept, nothing added
    down = later.with_scale_event(T0 + timedelta(seconds=60), 5, 1, keep_seconds=60)
    assert down.scale_events == (ScaleEvent(at=T0 + timedelta(seconds=60), change=-4),)
    assert down.replicas_changed_within(60, T0 + timedelta(seconds=60), up=False) == 4
    assert down.replicas_changed_within(60, T0 + timedelta(seconds=60), up=True) == 0


def test_scale_events_are_bounded_keeping_the_newest() -> None:
    history = History()
    for second in range(1005):
        history = history.with_scale_event(
            T0 + timedelta(seconds=second), second, second + 1, keep_seconds=10**6
        )
    assert len(history.scale_events) == 1000
    assert history.scale_events[-1].at == T0 + timedelta(seconds=1004)
    assert history.scale_events[0].at == T0 + timedelta(seconds=5)


def test_the_state_after_an_evaluation_keeps_the_last_decision_unless_replaced() -> None:
    decision = run(policy(queue_metric()), 1, readings(jobs=8)).decision
    state = GroupState("web", last_decision=decision, problems=("old",))
    history = History().with_scale_event(T0, 1, 2, keep_seconds=60)

    kept = state.after(history=history)
    assert (kept.history, kept.last_decision, kept.problems, kept.recent_events) == (
        history,
        decision,
        (),
        (),
    )
    newer = run(policy(queue_metric()), 2, readings(jobs=40)).decision
    replaced = state.after(history=history, decision=newer, event_id="e1", problems=("bad",))
    assert (replaced.last_decision, replaced.problems, replaced.recent_events) == (
        newer,
        ("bad",),
        ("e1",),
    )
    assert replaced.seen("e1") and not state.seen("e1")


def test_recent_events_are_remembered_once_and_bounded() -> None:
    state = GroupState("web").remembering("a", "b").remembering("a", "c")
    assert state.recent_events == ("a", "b", "c")
    many = GroupState("web").remembering(*(str(i) for i in range(RECENT_EVENTS + 5)))
    assert many.recent_events[0] == "5" and len(many.recent_events) == RECENT_EVENTS


def test_a_reading_at_a_time_keeps_its_value_and_detail() -> None:
    assert reading_at(3.5, T0, "3.5 visible") == MetricReading(
        value=3.5, at=T0, detail="3.5 visible"
    )


def node(scale_down_disabled: bool = False) -> Node:
    return Node("n", "web", True, True, Resources(), scale_down_disabled=scale_down_disabled)


def pod(not_safe: bool, phase: str = "Running") -> Pod:
    return Pod("d", "p", "n", Resources(), phase=phase, not_safe_to_evict=not_safe)


def test_a_node_stays_when_it_or_a_running_pod_says_so() -> None:
    assert keeps_node(node(scale_down_disabled=True), [], now=T0)
    assert keeps_node(node(), [pod(False), pod(True)], now=T0)
    assert not keeps_node(node(), [pod(False)], now=T0)
    assert not keeps_node(node(), [pod(True, phase="Succeeded")], now=T0)  # finished: moves nothing
    assert not keeps_node(node(), [], now=T0)

"""Where the cluster is read and the group bought nodes back within a window of letting
them go (churn, within the hour), its scale-down window holds the recommendation in force
as it began too (`autoscaler._stabilized`, `History.in_force_at`): at a minute's cadence
the HPA's strict cutoff leaves a 120 s window two evaluations, and lets a node go before
Cluster Autoscaler's unneeded time would. Elsewhere the HPA's rule stands."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import cast

import pydantic
import pytest
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scaling.acted import record_scale
from nodescaler.domain.scaling.decision import Decision, Limit, MetricOutcome, MetricStatus
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.history import History, TimedRecommendation
from nodescaler.domain.scaling.readings import MetricReading, Reading

from tests.builders import T0, act, minutes, policy, queue_metric, run
from tests.unit.test_pods_floor import QUIET, _need, _queue_asks, _queue_policy
from tests.unit.test_schedule_bound import schedule

WINDOW = _queue_policy(120)  # 5 jobs a node, a 120 s window, no scale-down rate


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# 8 nodes let go to 4 at T0 - 10 min, bought back a minute later: the group churned
CHURNED = QUIET.with_scale_in(_at(-600)).with_bought_back(_at(-540), 120)


def _burst_then_calm(
    *later: float, history: History = CHURNED, read: bool = True
) -> list[Decision]:
    """40 jobs at T0 (8 nodes), then 15 (3 nodes) at each of `later`; the pods need what
    the queue asks, the rest of the 8 nodes empty (`read` False: the cluster unread)."""
    decisions = []
    for seconds, jobs in ((0, 40), *((s, 15) for s in later)):
        nodes = jobs // 5
        own: Reading | None = _need(nodes, 8 - nodes, _at(seconds)) if read else None
        evaluation = _queue_asks(
            _at(seconds), history, current=8, jobs=jobs, own=own, the_policy=WINDOW
        )
        history, decisions = evaluation.history, [*decisions, evaluation.decision]
    return decisions


def _desired(*later: float, history: History = CHURNED, read: bool = True) -> list[int]:
    return [d.desired for d in _burst_then_calm(*later, history=history, read=read)]


def test_after_churn_the_recommendation_made_exactly_a_window_ago_still_holds() -> None:
    # the 8 of T0 was in force as the window of 120 s began; from 60 s on, 3 were
    decisions = _burst_then_calm(60, 120, 180)
    assert [d.desired for d in decisions] == [8, 8, 8, 3]
    assert decisions[2].limited_by == (Limit.STABILIZATION, Limit.CHURNED)
    assert decisions[2].reason.endswith(
        "held by the scale-down window: no lower than its highest recommendation of the last "
        "120s, and by the count in force as it began, as nodes let go lately were bought back "
        "within it"
    )
    assert Limit.CHURNED not in decisions[1].limited_by  # held by the window all the same


def test_without_churn_the_hpas_strict_cutoff_stands() -> None:
    assert _desired(60, 120, history=QUIET) == [8, 8, 3]
    long_ago = CHURNED.model_copy(update={"bought_back_at": _at(-3601 + 120)})
    assert _desired(60, 120, history=long_ago) == [8, 8, 3]  # over an hour before
    an_hour = CHURNED.model_copy(update={"bought_back_at": _at(-3600 + 120)})
    assert _desired(60, 120, history=an_hour) == [8, 8, 8]


def test_with_the_cluster_unread_the_hpas_strict_cutoff_stands() -> None:
    assert _desired(60, 120, read=False) == [8, 8, 3]


def test_a_recommendation_older_than_a_window_before_the_start_holds_nothing() -> None:
    # no evaluation from T0 to 241 s: what held through the gap is not known
    assert _desired(241) == [8, 3]
    assert _desired(240) == [8, 8]


def test_a_scale_up_within_the_window_of_a_scale_in_is_churn_and_one_after_is_not() -> None:
    scaled_in = History().with_scale_in(_at(0))
    assert (scaled_in.scaled_in_at, scaled_in.bought_back_at) == (_at(0), None)
    assert scaled_in.with_bought_back(_at(120), 120).bought_back_at == _at(120)
    assert scaled_in.with_bought_back(_at(121), 120).bought_back_at is None
    assert History().with_bought_back(_at(0), 120).bought_back_at is None  # none let go


def _acted(seconds: float, current: int, desired: int, *limits: Limit, jobs: int = 0) -> Decision:
    """A decision acted on, its queue's metric voting `jobs` nodes."""
    voted = MetricOutcome(
        name="jobs",
        type="SQSQueue",
        target="5/replica",
        value=jobs * 5,
        at=_at(seconds),
        recommendation=jobs,
        status=MetricStatus.OK,
        detail="",
    )
    return Decision(
        node_group="gpu-ng",
        policy="queue",
        at=_at(seconds),
        current=current,
        desired=desired,
        in_service=current,
        min_replicas=0,
        max_replicas=16,
        recommendation=desired,
        metrics=(voted,),
        limited_by=limits,
        reason="",
    )


def test_acting_marks_churn_only_for_a_scale_in_chosen_and_a_scale_up_demanded() -> None:
    policy = cast(NodeGroupPolicy, WINDOW)
    let_go = record_scale(History(), policy, _acted(0, 8, 4, jobs=4))
    assert let_go.scaled_in_at == _at(0)
    assert record_scale(let_go, policy, _acted(60, 4, 6, jobs=6)).bought_back_at == _at(60)
    # a scale-up its demand did not ask for (a raised minimum, a schedule): no churn
    raised = record_scale(let_go, policy, _acted(60, 4, 6, Limit.MIN, jobs=3))
    assert raised.bought_back_at is None
    # the group shrinks from a scale-in until a scale-up, however long that is (its scale
    # events are kept a rate period; the marks read `shrinking`)
    assert let_go.shrinking and not raised.shrinking and not History().shrinking
    again = record_scale(raised, policy, _acted(120, 6, 5, jobs=5))
    later = record_scale(again, policy, _acted(3600, 5, 5, jobs=5))
    assert later.scale_events == () and later.shrinking
    # an aborted scale-up, or a group back inside a lowered maximum, let no node go
    for forced in (Limit.BACKOFF, Limit.MAX):
        kept = record_scale(History(), policy, _acted(0, 8, 4, forced, jobs=2))
        assert (kept.scaled_in_at, len(kept.scale_events)) == (None, 1)


def test_a_scale_in_is_done_once_no_more_are_in_service_than_desired() -> None:
    # Given a group whose last change, an hour ago, took it from 6 to 5
    shrunk = record_scale(History(), cast(NodeGroupPolicy, WINDOW), _acted(0, 6, 5, jobs=5))
    at = _at(3600)
    # When it is read with 6 in service (a node its termination policy waits for), then 5
    waiting = run(WINDOW, 5, {}, shrunk, at, GroupSize(current=5, ready=6)).history
    done = run(WINDOW, 5, {}, waiting, at, GroupSize(current=5, ready=5)).history
    # Then it shrinks while the node waits, and not once it is gone: an excess later (an
    # instance refresh launching first) is not its scale-in's, and marks nothing
    assert waiting.shrinking and not done.shrinking
    assert not run(WINDOW, 5, {}, done, at, GroupSize(current=5, ready=6)).history.shrinking


def test_in_force_at_is_the_latest_made_at_or_before_it_within_the_trusted_time() -> None:
    history = History()
    for seconds, count in ((0, 8), (60, 3), (120, 3), (180, 3), (240, 5)):
        history = history.with_recommendation(_at(seconds), count, keep_seconds=120)
    # a run of 3s kept as its first and its latest; the 8 dropped once out of force
    assert history.recommendations == (
        TimedRecommendation(at=_at(60), replicas=3),
        TimedRecommendation(at=_at(180), replicas=3),
        TimedRecommendation(at=_at(240), replicas=5),
    )
    assert history.in_force_at(_at(239), trusted_seconds=120) == 3
    assert history.in_force_at(_at(240), trusted_seconds=120) == 5
    assert history.in_force_at(_at(59), trusted_seconds=120) is None  # none made before
    assert history.in_force_at(_at(300), trusted_seconds=60) == 5
    assert history.in_force_at(_at(301), trusted_seconds=60) is None


def test_a_scale_up_to_a_schedules_count_is_no_churn_and_one_the_queue_asks_is() -> None:
    the_policy = policy(schedule(6), queue_metric("jobs", 5), max_replicas=20)
    let_go = History().with_scale_in(T0 - minutes(1))

    def grown(jobs: int) -> History:
        values = {
            "schedule": MetricReading(value=6, at=T0),
            "jobs": MetricReading(value=jobs, at=T0),
        }
        evaluation = run(the_policy, 4, values, let_go)  # type: ignore[arg-type]
        assert evaluation.decision.desired > 4
        return act(the_policy, evaluation)  # type: ignore[arg-type]

    assert grown(jobs=15).bought_back_at is None  # 3 nodes asked: the schedule's 6 grew it
    assert grown(jobs=40).bought_back_at == T0  # 8 nodes asked


def test_the_last_change_is_stored_and_an_item_without_it_or_with_it_wrong_is_told() -> None:
    shrunk = record_scale(History(), cast(NodeGroupPolicy, WINDOW), _acted(0, 6, 5, jobs=5))
    assert History.model_validate_json(shrunk.model_dump_json()) == shrunk
    # an item the code before it saved loads, shrinking nothing
    assert not History.model_validate_json('{"scale_events": []}').shrinking
    # a change that is not a count is refused by name (the state table says which group)
    with pytest.raises(pydantic.ValidationError, match=r"last_change\.change"):
        History.model_validate_json(
            '{"last_change": {"at": "2026-03-02T12:00:00Z", "change": "x"}}'
        )

"""Where the cluster is read and the group bought nodes back within a window of letting
them go (churn, within the hour), its scale-down window holds the recommendation in force
as it began too (`autoscaler._stabilized`, `History.in_force_at`): at a minute's cadence
the HPA's strict cutoff leaves a 120 s window two evaluations, and lets a node go before
Cluster Autoscaler's unneeded time would. Elsewhere the HPA's rule stands."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import cast

from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scaling.autoscaler import record_scale
from nodescaler.domain.scaling.decision import Decision, Limit
from nodescaler.domain.scaling.history import History, TimedRecommendation
from nodescaler.domain.scaling.readings import Reading

from tests.builders import T0
from tests.unit.test_pods_floor import QUIET, _need, _queue_asks, _queue_policy

WINDOW = _queue_policy(120)  # 5 jobs a node, a 120 s window, no scale-down rate


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# 8 nodes let go to 4 at T0 - 10 min, bought back a minute later: the group churned
CHURNED = QUIET.with_churn(_at(-600), 8, 4, 120).with_churn(_at(-540), 4, 8, 120)


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


def test_a_metric_policy_keeps_the_hpas_strict_cutoff() -> None:
    assert _desired(60, 120, read=False) == [8, 8, 3]


def test_a_recommendation_older_than_a_window_before_the_start_holds_nothing() -> None:
    # no evaluation from T0 to 241 s: what held through the gap is not known
    assert _desired(241) == [8, 3]
    assert _desired(240) == [8, 8]


def test_a_scale_up_within_the_window_of_a_scale_in_is_churn_and_one_after_is_not() -> None:
    scaled_in = History().with_churn(_at(0), 8, 4, 120)
    assert (scaled_in.scaled_in_at, scaled_in.bought_back_at) == (_at(0), None)
    assert scaled_in.with_churn(_at(120), 4, 6, 120).bought_back_at == _at(120)
    assert scaled_in.with_churn(_at(121), 4, 6, 120).bought_back_at is None
    held = scaled_in.with_churn(_at(60), 4, 4, 120)
    assert (held.scaled_in_at, held.bought_back_at) == (_at(0), None)


def _acted(seconds: float, current: int, desired: int, *limits: Limit) -> Decision:
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
        metrics=(),
        limited_by=limits,
        reason="",
    )


def test_acting_marks_churn_but_an_aborted_scale_up_lets_no_node_go() -> None:
    policy = cast(NodeGroupPolicy, WINDOW)
    let_go = record_scale(History(), policy, _acted(0, 8, 4))
    assert record_scale(let_go, policy, _acted(60, 4, 6)).bought_back_at == _at(60)
    aborted = record_scale(History(), policy, _acted(0, 8, 4, Limit.BACKOFF))
    assert (aborted.scaled_in_at, len(aborted.scale_events)) == (None, 1)


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

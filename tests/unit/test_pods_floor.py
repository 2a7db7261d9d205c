"""A node its pods needed stays the policy's scale-down window before a scale-in takes it
(`domain.scaling.pods_floor`), as Cluster Autoscaler keeps a node its unneeded time: only
where the cluster is read, never adding a node."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest
from nodescaler.domain.ahead.forecast import DemandHistory
from nodescaler.domain.scaling.autoscaler import Evaluation, decide
from nodescaler.domain.scaling.decision import Decision, Limit
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.history import History, TimedRecommendation
from nodescaler.domain.scaling.plan import plan
from nodescaler.domain.scaling.pods_floor import BootTime
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading
from pydantic import ValidationError

from tests.builders import T0, policy, queue_metric, readings
from tests.unit.test_planning import GROUP, facts


def _queue_policy(window: int) -> object:
    """KEDA's workers as a queue policy, 5 requests a node, with a scale-down window of
    `window` seconds and no scale-down rate (nodes go as soon as the window lets them)."""
    behavior = {
        "scaleDown": {
            "stabilizationWindowSeconds": window,
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}],
        }
    }
    return policy(queue_metric("jobs", per_node=5), max_replicas=16, behavior=behavior)


QUEUE = _queue_policy(600)
LAUNCH = BootTime(180, "p90 of the last 20 cold launches")
# The queue read empty for long before: the window over it asks for nothing
QUIET = History().with_recommendation(T0 - timedelta(minutes=30), 0, keep_seconds=600)


def _need(nodes: int, empty: int, at: datetime) -> MetricReading:
    """The cluster's view: the group's pods need `nodes`, `empty` of its nodes hold none."""
    return MetricReading(value=0, at=at, empty_nodes=empty, needed_nodes=nodes)


def _decide(
    seconds: float,
    own: Reading,
    history: History,
    *,
    the_policy: object = QUEUE,
    boot: BootTime | None = LAUNCH,
    current: int = 16,
) -> Evaluation:
    now = T0 + timedelta(seconds=seconds)
    return decide(
        node_group="gpu-ng",
        policy=the_policy,  # type: ignore[arg-type]
        size=GroupSize(current=current),
        readings=readings(now, jobs=0),
        history=history,
        now=now,
        own_pending=own,
        boot=boot,
    )


def _queue_asks(
    at: datetime,
    history: History,
    *,
    current: int,
    jobs: int,
    own: Reading | None,
    the_policy: object = QUEUE,
) -> Evaluation:
    """The group at `current` when its queue holds `jobs` at `at` (`own` None: the
    cluster unread)."""
    return decide(
        node_group="gpu-ng",
        policy=the_policy,  # type: ignore[arg-type]
        size=GroupSize(current=current),
        readings=readings(at, jobs=jobs),
        history=history,
        now=at,
        own_pending=own,
        boot=LAUNCH,
    )


def _workers_left(**kwargs: object) -> History:
    """16 nodes full of workers at T0; at T0 + 60 s KEDA has let 13 of them go."""
    full = _decide(0, _need(16, 0, T0), QUIET, **kwargs)  # type: ignore[arg-type]
    assert full.decision.desired == 16  # the pods need all 16 (`pods-need-nodes`)
    return full.history


def test_given_workers_left_their_nodes_then_the_nodes_stay_the_window_then_go() -> None:
    history = _workers_left()
    # When the next evaluation, a minute later, finds 13 nodes empty
    emptied = _decide(60, _need(3, 13, T0 + timedelta(seconds=60)), history)
    # Then they stay: a burst within the window finds them, and says why
    decision = emptied.decision
    assert decision.desired == 16
    assert Limit.RECENTLY_NEEDED in decision.limited_by
    assert (
        "keeps 13 of the nodes its pods needed within its 600s window: re-acquiring one "
        "takes 180s (p90 of the last 20 cold launches)" in decision.reason
    )
    # And they are kept the window from the last read that saw them needed (the 16, read
    # at 0 s), then go all at once
    history = emptied.history
    for seconds in (120, 599):
        held = _decide(seconds, _need(3, 13, T0 + timedelta(seconds=seconds)), history)
        assert held.decision.desired == 16, seconds
        history = held.history
    gone = _decide(600, _need(3, 13, T0 + timedelta(seconds=600)), history)
    assert gone.decision.desired == 3
    assert Limit.RECENTLY_NEEDED not in gone.decision.limited_by


def test_given_no_launch_time_then_the_nodes_stay_all_the_same_and_none_is_named() -> None:
    history = _workers_left(boot=None)
    emptied = _decide(60, _need(3, 13, T0 + timedelta(seconds=60)), history, boot=None)
    assert emptied.decision.desired == 16
    assert "within its 600s window (" not in emptied.decision.reason
    assert "re-acquiring" not in emptied.decision.reason


@pytest.mark.parametrize(
    ("window", "kept_until"),
    [
        (0, None),  # the user asked for nodes to go at once: they do
        # the window from the read that saw the 16 needed (at 0 s), as the window holds a
        # recommendation from its read
        (120, 120),
        (300, 300),
    ],
)
def test_the_keep_is_the_policys_scale_down_window(window: int, kept_until: int | None) -> None:
    the_policy = _queue_policy(window)
    history = _workers_left(the_policy=the_policy)
    for seconds in (60, 119, 120, 299, 300):
        at = T0 + timedelta(seconds=seconds)
        evaluation = _decide(seconds, _need(3, 13, at), history, the_policy=the_policy)
        history = evaluation.history
        kept = kept_until is not None and seconds < kept_until
        assert evaluation.decision.desired == (16 if kept else 3), (window, seconds)


def test_given_the_cluster_unread_then_an_old_read_holds_nothing_beyond_the_window() -> None:
    history = _workers_left()
    unread = MetricUnavailable(reason="Kubernetes API unreachable")
    # Within the window of the last read (16 needed at T0), nothing is shed on a guess
    assert _decide(599, unread, history).decision.desired == 16
    # Beyond it, the 16 read at T0 hold nothing: the queue's metric decides
    assert _decide(600, unread, history).decision.desired == 0


def test_a_gap_with_the_cluster_unread_ends_the_read_before_it() -> None:
    history = _workers_left()  # 16 needed at T0
    unread = MetricUnavailable(reason="Kubernetes API unreachable")
    gap = _decide(60, unread, history)
    later = _decide(200, unread, gap.history)
    assert later.decision.desired == 16
    # When read again, nothing needed, a window after the 16 were read: they hold nothing
    again = _decide(600, _need(0, 16, T0 + timedelta(seconds=600)), later.history)
    assert again.decision.desired == 0
    assert Limit.RECENTLY_NEEDED not in again.decision.limited_by


def test_a_keep_never_adds_a_node_and_never_holds_above_the_current_size() -> None:
    history = _workers_left()
    # Given the group already down to 10 (someone set it): no more than 10 are kept
    at = T0 + timedelta(seconds=60)
    evaluation = _decide(60, _need(3, 7, at), history, current=10)
    assert evaluation.decision.desired == 10
    # And a group the queue grows is not touched
    grown = _queue_asks(at, history, current=16, jobs=100, own=_need(3, 13, at))
    assert grown.decision.desired == 16 and Limit.RECENTLY_NEEDED not in grown.decision.limited_by


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_history_keeps_a_run_of_equal_reads_as_its_start_and_its_latest() -> None:
    history = History()
    for seconds, nodes in ((0, 16), (60, 16), (120, 16), (180, 3), (240, 3)):
        history = history.with_need(_at(seconds), nodes, keep_seconds=600)
    assert history.needs == (
        TimedRecommendation(at=_at(0), replicas=16),
        TimedRecommendation(at=_at(120), replicas=16),
        TimedRecommendation(at=_at(180), replicas=3),
        TimedRecommendation(at=_at(240), replicas=3),
    )
    # each read is in force until the next: 16 until 180 s
    long_ago = _at(-3600)
    assert history.needed_since(_at(179), long_ago) == 16
    assert history.needed_since(_at(180), long_ago) == 3
    # and counts only when it was read after `read_after`: the 16s' latest read, at 120 s
    assert history.needed_since(_at(0), _at(119)) == 16
    assert history.needed_since(_at(0), _at(120)) == 3
    # and the reads no longer in force a keep ago are dropped: the 16s, out of force
    # since 180 s; the run of 3s stays, as its start and its latest
    pruned = history.with_need(_at(400), 3, keep_seconds=100)
    assert pruned.needs == (
        TimedRecommendation(at=_at(180), replicas=3),
        TimedRecommendation(at=_at(400), replicas=3),
    )


def test_the_latest_read_counts_until_the_cluster_is_read_again_else_only_when_it_was_read() -> (
    None
):
    history = History().with_need(_at(0), 16, keep_seconds=600)
    long_ago = _at(-3600)
    assert history.needed_since(_at(10), long_ago) is None  # read at 0 s, not since
    assert history.needed_since(_at(10), long_ago, read_again=_at(60)) == 16  # until 60 s


def test_a_stored_history_round_trips_its_needs_and_one_stored_before_them_loads() -> None:
    history = History().with_need(_at(0), 16, keep_seconds=600)
    assert History.model_validate_json(history.model_dump_json()) == history
    assert History.model_validate_json('{"recommendations": [], "scale_events": []}') == History()


def test_the_plan_keeps_nodes_the_window_and_says_how_long_getting_one_back_takes() -> None:
    # Given a group whose last five cold launches took 150 s, four times, and 250 s once
    demand = DemandHistory(cold=(150.0, 150.0, 150.0, 150.0, 250.0))
    group = dataclasses.replace(
        GROUP, desired=16, max_size=16, in_service=16, protected_ids=frozenset()
    )
    history = _workers_left()
    state = GroupState("web", history=history, demand=demand)
    at = T0 + timedelta(seconds=60)
    planned = plan(
        facts(
            0,
            group=group,
            policy=QUEUE,
            state=state,
            now=at,
            readings={"jobs": MetricReading(value=0, at=at)},
            own_pending=_need(3, 13, at),
        )
    )
    # Then its 16 stay, and the reason says one p90 of its launches: 210 s
    assert planned.decision.desired == 16
    assert (
        "re-acquiring one takes 210s (p90 of the last 5 cold launches)" in planned.decision.reason
    )


@pytest.mark.parametrize(("consolidation", "floor"), [("WhenEmpty", 11), (None, 3)])
def test_a_policy_that_moves_no_pod_keeps_every_node_pods_run_on(
    consolidation: str | None, floor: int
) -> None:
    # Given 16 workers' nodes, 5 of them empty, whose pods would pack onto 3, and the
    # queue's metric asking for none
    pending: dict[str, object] = {"type": "PendingPods"}
    if consolidation:
        pending["pendingPods"] = {"consolidation": consolidation}
    workers = policy(
        queue_metric("jobs", per_node=5),
        pending,
        behavior={
            "scaleDown": {
                "stabilizationWindowSeconds": 0,
                "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}],
            }
        },
    )
    view = MetricReading(
        value=0, at=T0, empty_nodes=5, unneeded_nodes=5 if consolidation else 13, needed_nodes=3
    )
    decided = decide(
        node_group="workers-ng",
        policy=workers,
        size=GroupSize(current=16),
        readings={**readings(T0, jobs=0), "pending-pods": view},
        history=QUIET,
        now=T0,
        boot=None,
    )
    # Then a policy that sheds only empty nodes goes no lower than the 11 its workers run
    # on (another metric's scale-in would drain them); one that packs, to the 3 they need
    assert decided.decision.desired == floor
    assert Limit.PODS_NEED_NODES in decided.decision.limited_by


def test_a_decision_stored_under_the_limits_old_name_still_reads() -> None:
    # Given a decision the keep held, stored before the limit was renamed (2026-11-30)
    history = _workers_left()
    held = _decide(60, _need(3, 13, T0 + timedelta(seconds=60)), history).decision
    stored = held.model_dump_json().replace('"recently-needed"', '"reacquire-time"')
    stored = stored.replace('"kept_recently_needed"', '"kept_for_reacquire"')
    assert "reacquire-time" in stored
    # When it is read back, Then it says what it said
    read = Decision.model_validate_json(stored)
    assert Limit.RECENTLY_NEEDED in read.limited_by
    assert read.kept_recently_needed == held.kept_recently_needed != ""
    assert (read.desired, read.reason) == (held.desired, held.reason)


def test_a_scale_up_is_never_cut_to_a_size_the_pods_needed_before() -> None:
    # Given a group at 10 whose pods needed 16 nodes a minute ago, and a queue asking 12
    history = _workers_left()
    at = T0 + timedelta(seconds=60)
    grown = _queue_asks(at, history, current=10, jobs=60, own=_need(10, 0, at))
    # Then it grows to 12: the keep holds scale-ins only
    assert grown.decision.desired == 12
    assert Limit.RECENTLY_NEEDED not in grown.decision.limited_by


def test_the_last_node_the_pods_needed_stays_the_window_too() -> None:
    # Given one node its workers needed, and now none: the queue asks for none
    one = _decide(0, _need(1, 0, T0), QUIET, current=1)
    assert one.decision.desired == 1
    emptied = _decide(60, _need(0, 1, T0 + timedelta(seconds=60)), one.history, current=1)
    # Then it stays within the window, and goes after it
    assert emptied.decision.desired == 1
    gone = _decide(600, _need(0, 1, T0 + timedelta(seconds=600)), emptied.history, current=1)
    assert gone.decision.desired == 0


def _window_passed() -> History:
    """The 16 nodes of `_workers_left`, kept the window while 3 were needed: at 599 s."""
    history = _workers_left()
    for seconds in (60, 300, 599):
        history = _decide(seconds, _need(3, 13, T0 + timedelta(seconds=seconds)), history).history
    return history


def test_no_node_goes_while_the_demand_rises_though_the_window_has_passed() -> None:
    # Given the window passed as a new batch starts: 10 jobs queued where there were none
    history, at = _window_passed(), T0 + timedelta(seconds=600)
    rising = _queue_asks(at, history, current=16, jobs=10, own=_need(3, 13, at))
    # Then no node goes: one let go now would be bought back a boot later
    assert rising.decision.desired == 16
    assert Limit.RISING_DEMAND in rising.decision.limited_by
    assert "no node goes while its demand rises" in rising.decision.reason
    # and once the demand holds still (10 jobs again: the same 2 nodes), the nodes go
    later = at + timedelta(seconds=60)
    steady = _queue_asks(later, rising.history, current=16, jobs=10, own=_need(3, 13, later))
    assert steady.decision.desired == 3
    assert Limit.RISING_DEMAND not in steady.decision.limited_by


def test_a_rising_demand_holds_nothing_where_the_cluster_is_unread() -> None:
    # Given the same rise, the cluster unread (a queue policy alone: the HPA's semantics)
    at = T0 + timedelta(seconds=600)
    rising = _queue_asks(at, _window_passed(), current=16, jobs=10, own=None)
    # Then it scales in as before: to the 3 nodes the pods needed at the last read
    assert rising.decision.desired == 3
    assert Limit.RISING_DEMAND not in rising.decision.limited_by


def test_a_scale_down_window_of_0_sheds_at_once_though_the_demand_rises() -> None:
    # Given the queue policy with no window, its nodes idle, and a batch starting
    no_window = _queue_policy(0)
    history = _decide(0, _need(3, 13, T0), QUIET, the_policy=no_window).history
    at = T0 + timedelta(seconds=60)
    own = _need(3, 13, at)
    rising = _queue_asks(at, history, current=16, jobs=10, own=own, the_policy=no_window)
    # Then the nodes go as the user asked: none is held for the rise
    assert rising.decision.desired == 3
    assert Limit.RISING_DEMAND not in rising.decision.limited_by


def test_a_decision_a_later_release_stored_reads_without_its_new_limit() -> None:
    # Given a decision stored by a later release, naming a limit this one does not know
    history = _workers_left()
    held = _decide(60, _need(3, 13, T0 + timedelta(seconds=60)), history).decision
    stored = held.model_dump_json().replace('"recently-needed"', '"recently-needed","held-by-x"')
    assert "held-by-x" in stored
    # When it is read back (a rollback reads its state), Then the limits it knows stay
    read = Decision.model_validate_json(stored)
    assert read.limited_by == held.limited_by
    assert Limit.RECENTLY_NEEDED in read.limited_by
    # but what is no limit's name at all is still refused
    with pytest.raises(ValidationError, match="limited_by"):
        Decision.model_validate_json(stored.replace('"held-by-x"', '"Held By X!"'))

"""The planning step (`domain.scaling.plan.plan`): what an evaluation read in, one frozen `Plan`
out, nothing done. Cluster Autoscaler splits its scale-down the same way: a planner
(`core/scaledown/planner`) that only decides, and an actuator (`core/scaledown/actuation`)
that carries the decision out."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.recheck import SpareSeen
from nodescaler.domain.groups.node_group import LaunchFailure, NodeGroup, WarmPool
from nodescaler.domain.groups.optin import PauseDirection
from nodescaler.domain.scale_down.leaving import Removable
from nodescaler.domain.scale_up.backoff import Backoff, Provisioning
from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.group_state import GroupState, failure_key
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.pause import Pause
from nodescaler.domain.scaling.plan import Facts, plan
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable

from tests.builders import UNLIMITED, policy, queue_metric, value_metric
from tests.unit.test_forecast import MONDAY, office_hours, predictive, recorded
from tests.unit.test_named_forecast import REQUESTS

NOW = datetime(2026, 11, 26, 9, tzinfo=UTC)
IDS = ("i-0", "i-1", "i-2", "i-3")
WEB = policy(queue_metric("jobs", per_node=4), behavior=UNLIMITED, name="web")
EKS = NodeGroup(
    "web",
    4,
    0,
    10,
    4,
    eks_cluster="prod",
    eks_nodegroup="web",
    instance_ids=frozenset(IDS),
    protected_ids=frozenset({"i-3"}),
)


class Chooser:
    """The cluster's choice of instances, recording what it was asked."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def __call__(self, count: int) -> Removable:
        self.asked.append(count)
        return Removable(("i-1", "i-2")[:count], f"{count} of {count} asked: all empty")


def idle_facts(chooser: Chooser, **changes: object) -> Facts:
    """An idle queue (one job: one node) for a group of four, one empty node spare."""
    facts = Facts(
        EKS,
        WEB,
        GroupState("web", history=History().with_recommendation(NOW, 4, keep_seconds=0)),
        NOW,
        readings={"jobs": MetricReading(value=4, at=NOW, candidates=("web-1", "web-2"))},
        must_stay=frozenset({"i-0"}),
        choose_leaving=chooser,
    )
    return dataclasses.replace(facts, **changes)  # type: ignore[arg-type]


def test_given_what_was_read_when_planned_twice_then_the_same_frozen_plan_and_nothing_done() -> (
    None
):
    # Given an EKS group of four whose queue needs one node
    chooser = Chooser()
    facts = idle_facts(chooser)

    # When it is planned twice
    first, second = plan(facts), plan(facts)

    # Then both plans are the same, frozen, and the only thing asked was the cluster's
    # choice of the instances (from nodes it already listed): no port is even at hand
    assert first == second
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.leaving = ()  # type: ignore[misc]
    assert chooser.asked == [2, 2]
    assert facts == idle_facts(chooser)  # what was read is left as it was


def test_an_eks_scale_in_plan_names_who_leaves_what_is_marked_and_protected() -> None:
    # Given an EKS group of four whose queue needs one node, node 0 must stay
    facts = idle_facts(Chooser())

    # When planned
    planned = plan(facts)

    # Then the decision goes to two (i-0 and i-3 are protected), naming who leaves
    assert (planned.decision.current, planned.decision.desired) == (4, 2)
    assert planned.leaving == ("i-1", "i-2")
    # the nodes the reading found unneeded are the candidates to mark
    assert planned.candidates == {"web-1", "web-2"}
    # i-0 is protected as the cluster asks; i-3's protection is someone else's, untouched
    assert (planned.protection.add, planned.protection.release) == ({"i-0"}, frozenset())
    assert planned.protection.ours_after == {"i-0"}
    assert planned.state.protected == frozenset()  # ours as it stands, until acted on
    assert planned.announce == ()


def test_an_eks_scale_in_marks_the_nodes_that_go_once_their_jobs_end() -> None:
    # Given an EKS group of four whose queue needs one node; the cluster lets one go now,
    # and web-3, a queue's worker at its task on it, once the worker is done
    def chooser(count: int) -> Removable:
        return Removable(("i-1",), f"1 of {count} asked; 1 left while…", waiting=("web-3",))

    # When planned
    planned = plan(idle_facts(Chooser(), choose_leaving=chooser))
    # Then one leaves, and web-3 is marked with the reading's unneeded, so the queue's next
    # workers land on the nodes that stay and it empties
    assert (planned.decision.desired, planned.leaving) == (3, ("i-1",))
    assert planned.candidates == {"web-1", "web-2", "web-3"}


def test_the_plan_carries_the_buffers_room_only_where_a_reading_looked() -> None:
    # Given the queue's reading (it keeps no room) and a pending-pods reading that looked
    looked = MetricReading(value=0, at=NOW, rooms=("web-3",))
    readings = {"jobs": MetricReading(value=4, at=NOW), "pending-pods": looked}
    # When planned, Then the room is carried, to be marked
    assert plan(idle_facts(Chooser(), readings=readings)).rooms == {"web-3"}
    # while no reading looked (the group grows), its marks are left as they are (None)
    unlooked = {"jobs": MetricReading(value=4, at=NOW)}
    assert plan(idle_facts(Chooser(), readings=unlooked)).rooms is None
    # and a reading that looked and kept none clears them
    cleared = {
        "jobs": MetricReading(value=4, at=NOW),
        "pending-pods": looked.model_copy(update={"rooms": ()}),
    }
    assert plan(idle_facts(Chooser(), readings=cleared)).rooms == frozenset()
    # a group whose bounds are in doubt leaves its marks as they are
    doubtful = dataclasses.replace(EKS, bounds_doubt="its scalingConfig could not be read")
    assert plan(idle_facts(Chooser(), readings=readings, group=doubtful)).rooms is None


def test_the_plan_asks_to_look_again_when_the_pods_arriving_eat_the_buffers_room() -> None:
    # Given counts a minute apart lately, and the room beyond the buffer down from 8 pods
    # a minute ago to 2 now (6 a minute)
    counted = Arrivals(40, NOW - timedelta(minutes=1), 0.0, NOW - timedelta(hours=1))
    counted = dataclasses.replace(counted, longest_gap=timedelta(minutes=1))
    before = SpareSeen(8, NOW - timedelta(minutes=1))
    state = GroupState("web", arrivals=counted, spare_seen=before)
    pending = MetricReading(value=0, at=NOW, group_pods=46, buffer_spare=2)
    readings = {"jobs": MetricReading(value=16, at=NOW), "pending-pods": pending}
    # When planned, Then the third pod to come (30 s on) is when to look again, and this
    # count is the one the next evaluations measure from
    planned = plan(facts(state=state, readings=readings))
    assert planned.state.recheck == NOW + timedelta(seconds=30)
    assert planned.state.spare_seen == SpareSeen(2, NOW, 46, 6.0)
    # and with room for the minute's use, or no reading of it, the tick looks
    roomy = {**readings, "pending-pods": pending.model_copy(update={"buffer_spare": 6})}
    assert plan(facts(state=state, readings=roomy)).state.recheck is None
    unread = {"jobs": MetricReading(value=16, at=NOW)}
    assert plan(facts(state=state, readings=unread)).state.recheck is None
    # nor does a group at its maximum, which could buy nothing then (its count is kept)
    full = dataclasses.replace(GROUP, max_size=GROUP.desired)
    at_max = plan(facts(state=state, readings=readings, group=full)).state
    assert (at_max.recheck, at_max.spare_seen) == (None, SpareSeen(2, NOW, 46, 6.0))


def test_while_scale_in_is_paused_the_plan_marks_no_node_and_nothing_leaves() -> None:
    # Given the same group, its scale-in paused
    pause = Pause(direction=PauseDirection.SCALE_IN, by="tag nodescaler/paused")
    chooser = Chooser()

    # When planned
    planned = plan(idle_facts(chooser, pauses=(pause,)))

    # Then it stays at four: no candidate is marked, no instance chosen, none asked for
    assert planned.decision.desired == 4
    assert (planned.candidates, planned.leaving, chooser.asked) == (frozenset(), (), [])


def test_a_failed_launch_backs_the_group_off_and_the_plan_carries_the_event_to_tell() -> None:
    # Given a scale-up in flight whose launch failed
    state = GroupState("web", provisioning=Provisioning(since=NOW - timedelta(minutes=2), target=6))
    failure = LaunchFailure("act-1", NOW - timedelta(minutes=1), "InsufficientInstanceCapacity")

    # When planned
    planned = plan(idle_facts(Chooser(), state=state, launch_failures=(failure,)))

    # Then the state to record is backed off, its scale-up ended, and the backoff is one
    # event to tell once that state is written
    assert planned.state.backoff is not None and planned.state.provisioning is None
    assert planned.backoff_changed
    (event,) = planned.announce
    assert event.detail_type == "Node Group Backed Off"
    assert "InsufficientInstanceCapacity" in event.detail_json()


def test_an_eks_group_whose_scaling_config_is_unread_is_not_scaled_in_and_says_why() -> None:
    # Given the same group, but DescribeNodegroup refused: its bounds are not known as EKS's
    doubt = "EKS node group web of cluster prod could not be described (AccessDenied)"
    group = dataclasses.replace(EKS, bounds_doubt=doubt)
    chooser = Chooser()

    # When planned
    planned = plan(idle_facts(chooser, group=group))

    # Then it stays at four, nothing leaves or is marked, and the decision names the doubt
    assert (planned.decision.desired, planned.decision.would_desire) == (4, 2)
    assert (planned.candidates, planned.leaving) == (frozenset(), ())
    assert planned.decision.reason.startswith(f"{doubt}: would scale in 4 → 2")


POOLED = NodeGroup("web", 4, 0, 10, 4, warm_pool=WarmPool(3, 3, "Stopped"))


@pytest.mark.parametrize(
    ("group", "asked", "warm"),
    [
        (POOLED, 3, True),  # three kept warm cover three more
        (POOLED, 5, False),  # two of five boot cold: the scale-up waits for them
        (dataclasses.replace(POOLED, warm_pool=None), 2, False),
        (dataclasses.replace(POOLED, warm_pool=WarmPool(0, None, "Stopped")), 6, True),  # MaxSize
        (dataclasses.replace(POOLED, warm_pool=WarmPool(3, 3, "Stopped", problem="odd")), 1, False),
    ],
)
def test_a_scale_up_is_watched_as_warm_only_when_the_pool_covers_it(
    group: NodeGroup, asked: int, warm: bool
) -> None:
    # Given a group of four asked by its queue for `asked` more nodes
    jobs = MetricReading(value=4 * (4 + asked), at=NOW)
    # When planned
    planned = plan(Facts(group, WEB, GroupState("web"), NOW, readings={"jobs": jobs}))
    # Then the scale-up to watch says whether its warm pool covered it
    assert planned.grows
    assert planned.provisioning == Provisioning(since=NOW, target=4 + asked, warm=warm)


@pytest.mark.parametrize("warm", [True, False])
def test_a_scale_up_that_arrived_is_measured_among_the_launches_of_its_kind(warm: bool) -> None:
    # Given a scale-up to 4 asked for 70 s ago, from the warm pool or not, now in service
    asked = Provisioning(since=NOW - timedelta(seconds=70), target=4, warm=warm)
    jobs = MetricReading(value=16, at=NOW)
    facts = Facts(POOLED, WEB, GroupState("web", provisioning=asked), NOW, readings={"jobs": jobs})
    # When planned
    demand = plan(facts).state.demand
    # Then its time is kept with the launches of its kind, and in the running mean
    assert (demand.warm, demand.cold) == (((70.0,), ()) if warm else ((), (70.0,)))
    assert demand.lead_seconds == 70.0


# The plan's edges: what it carries from what was read into the decision (group bounds,
# in-service and launched counts, a running backoff, the cluster's ceiling, the policy
# version), the state it records (scale-up in flight, lead time, failures, demand,
# protection), the warm pool it sizes, and the events it announces.


GROUP = NodeGroup("web", 4, 0, 20, 4, instance_ids=frozenset(IDS), protected_ids=frozenset({"i-3"}))


def facts(jobs: float = 16, **changes: object) -> Facts:
    """A plain Auto Scaling group of four; `jobs` queued, four to a node."""
    made = Facts(
        GROUP, WEB, GroupState("web"), NOW, readings={"jobs": MetricReading(value=jobs, at=NOW)}
    )
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def test_the_groups_own_maximum_and_where_it_comes_from_bound_the_decision() -> None:
    group = dataclasses.replace(GROUP, max_size=6, bounds_from="EKS node group web")
    planned = plan(facts(40, group=group))
    assert planned.decision.desired == 6 and Limit.MAX in planned.decision.limited_by
    assert planned.decision.group_bounds == "EKS node group web"


def test_the_decision_counts_the_instances_in_service() -> None:
    assert plan(facts(group=dataclasses.replace(GROUP, in_service=3))).decision.in_service == 3


def test_while_backed_off_the_group_asks_for_no_more_than_it_launched() -> None:
    # Given a backoff running, six asked for and four launched, and the queue asking ten
    backoff = Backoff(until=NOW + timedelta(minutes=5), seconds=300, last_failure=NOW, reason="x")
    group = dataclasses.replace(GROUP, desired=6, launched=4)
    planned = plan(facts(40, group=group, state=GroupState("web", backoff=backoff)))
    # Then the group goes back to the four it launched, held by the backoff
    assert planned.decision.desired == 4 and Limit.BACKOFF in planned.decision.limited_by


def test_the_clusters_ceiling_caps_a_scale_up() -> None:
    planned = plan(facts(40, ceiling=Ceiling(7, "maximum of 7 nodes")))
    assert planned.decision.desired == 7 and Limit.CLUSTER_LIMIT in planned.decision.limited_by


def test_the_decision_names_the_policy_version_and_why_the_deployed_one_stood_in() -> None:
    plain = plan(facts())
    noted = plan(facts(policy_version=3, policy_note="stored v4 is invalid"))
    assert (plain.decision.policy_version, noted.decision.policy_version) == ("deployed", 3)
    assert noted.decision.reason == f"{plain.decision.reason} | stored v4 is invalid"


def test_a_resize_is_announced_and_a_steady_plan_announces_none() -> None:
    grown = plan(facts(40, cluster_name="prod"))
    assert grown.announce_resized is not None
    assert grown.announce_resized.detail_type == "Node Group Resized"
    assert plan(facts(16)).announce_resized is None


def test_the_plan_carries_the_history_with_its_recommendation_and_its_resize() -> None:
    grown = plan(facts(40))
    assert grown.history.recommendations[-1].replicas == 10
    assert grown.history.scale_events == ()
    (event,) = grown.resized_history.scale_events
    assert event.change == 6


def test_the_problems_read_are_carried_to_the_plan() -> None:
    assert plan(facts(problems=("tag nodescaler/x is unknown",))).problems == (
        "tag nodescaler/x is unknown",
    )


ASKED = Provisioning(since=NOW - timedelta(minutes=3), target=6)


def test_a_scale_up_still_within_its_time_stays_in_flight() -> None:
    group = dataclasses.replace(GROUP, desired=6, in_service=4)
    planned = plan(facts(24, group=group, state=GroupState("web", provisioning=ASKED)))
    assert planned.state.provisioning == ASKED and planned.state.backoff is None


def test_the_clusters_ready_nodes_count_before_the_instances_in_service() -> None:
    group = dataclasses.replace(GROUP, desired=6, in_service=6)
    state = GroupState("web", provisioning=ASKED)
    assert plan(facts(24, group=group, state=state, ready=4)).state.provisioning == ASKED


def test_a_scale_up_that_arrived_ends_and_measures_the_forecasts_lead_time() -> None:
    group = dataclasses.replace(GROUP, desired=6, in_service=6)
    planned = plan(facts(24, group=group, state=GroupState("web", provisioning=ASKED)))
    assert planned.state.provisioning is None
    assert planned.state.demand.lead_seconds == 180


def test_a_scale_up_overdue_backs_the_group_off_naming_what_was_not_ready() -> None:
    late = Provisioning(since=NOW - timedelta(minutes=20), target=6)
    group = dataclasses.replace(GROUP, desired=6, in_service=4)
    planned = plan(facts(24, group=group, state=GroupState("web", provisioning=late)))
    assert planned.state.provisioning is None and planned.state.backoff is not None
    assert planned.state.backoff.reason.startswith("2 of the instances asked for at ")
    assert planned.state.backoff.until == NOW + timedelta(minutes=5)


def test_a_failed_launch_within_a_running_backoff_moves_no_deadline_and_is_remembered() -> None:
    running = Backoff(
        until=NOW + timedelta(minutes=4), seconds=300, last_failure=NOW, reason="earlier"
    )
    failure = LaunchFailure("act-7", NOW, "InsufficientInstanceCapacity")
    state = GroupState("web", backoff=running)
    planned = plan(facts(state=state, launch_failures=(failure,)))
    assert planned.state.backoff is not None
    assert planned.state.backoff.until == running.until
    assert planned.state.backoff.reason == "InsufficientInstanceCapacity"
    assert planned.announce == ()  # the same incident: told once, when it started
    assert planned.state.seen(failure_key("act-7"))


def test_a_failing_metrics_run_is_carried_until_its_fallback_applies() -> None:
    # Given a metric with a fallback of 14 nodes after three failures in a row
    failing = value_metric("errors", 10) | {"fallback": {"replicas": 14, "failureThreshold": 3}}
    the_policy = policy(failing, queue_metric("jobs", per_node=4), behavior=UNLIMITED)
    down = MetricUnavailable(reason="no datapoint")
    current = facts(policy=the_policy)
    desired = []
    # When planned four times, each carrying on the state the last recorded
    for minute in range(4):
        current = dataclasses.replace(
            current,
            now=NOW + timedelta(minutes=minute),
            readings={"jobs": MetricReading(value=16, at=NOW), "errors": down},
        )
        planned = plan(current)
        assert "errors" in planned.state.failures.runs
        desired.append(planned.decision.desired)
        current = dataclasses.replace(current, state=planned.state)
    # Then the one after the third failure applies the fallback
    assert desired == [4, 4, 4, 14]


def test_demand_is_recorded_while_the_metrics_read_and_not_while_one_fails() -> None:
    read = plan(facts(40))
    assert read.decision.demand == 10
    assert read.state.demand == GroupState("web").demand.record(NOW, 10)
    failing = plan(facts(readings={"jobs": MetricUnavailable(reason="queue gone")}))
    assert failing.decision.demand is None
    assert failing.state.demand == GroupState("web").demand


def test_protection_kept_is_only_what_still_protects_the_groups_instances() -> None:
    # Given i-3 and i-9 protected by nodescaler before, i-9 now gone from the group
    state = GroupState("web", protected=frozenset({"i-3", "i-9"}))
    # When the cluster can't say what must stay, nothing changes
    unread = plan(facts(state=state))
    assert unread.state.protected == frozenset({"i-3"})
    assert (unread.protection.ours, unread.protection.ours_after) == ({"i-3"}, {"i-3"})
    # When it says only i-0 must stay, ours on i-3 is released
    told = plan(facts(state=state, must_stay=frozenset({"i-0"})))
    assert (told.protection.add, told.protection.release) == ({"i-0"}, {"i-3"})


def test_an_unread_cluster_chooses_no_instance_and_holds_the_scale_in_saying_why() -> None:
    planned = plan(idle_facts(Chooser(), choose_leaving=lambda count: None))
    assert (planned.decision.desired, planned.leaving) == (4, ())
    assert planned.decision.reason.endswith(" | the cluster cannot be read: no instance chosen")


def test_a_doubt_on_the_bounds_holds_only_a_scale_in_and_names_its_limit() -> None:
    doubt = "EKS node group web could not be described"
    group = dataclasses.replace(EKS, bounds_doubt=doubt)
    held = plan(idle_facts(Chooser(), group=group))
    assert Limit.BOUNDS_UNREAD in held.decision.limited_by
    steady = plan(
        idle_facts(Chooser(), group=group, readings={"jobs": MetricReading(value=16, at=NOW)})
    )
    assert steady.decision.desired == 4 and Limit.BOUNDS_UNREAD not in steady.decision.limited_by
    assert doubt not in steady.decision.reason


EARLY = MONDAY + timedelta(days=1, hours=8, minutes=40)  # Tuesday 08:40, the ramp at 09:00


POOL = WarmPool(min_size=0, max_prepared=None, pool_state="Stopped")


def warm_facts(pool: WarmPool | None) -> Facts:
    the_policy = policy(
        queue_metric("jobs", per_node=4),
        predictive("ForecastAndScale", warmPool=True),
        min_replicas=1,
        max_replicas=50,
    )
    group = NodeGroup("web", 2, 0, 50, 2, warm_pool=pool)
    state = GroupState("web", demand=recorded(1, office_hours))
    readings = {"jobs": MetricReading(value=8, at=EARLY)}
    return Facts(group, the_policy, state, EARLY, readings)


def test_the_plan_sizes_the_warm_pool_the_forecast_asks_for() -> None:
    planned = plan(warm_facts(POOL))
    note = "warm pool 8: forecast up to 10 in the next warm-up − 2 desired"
    assert (planned.warm_pool, planned.decision.warm_pool) == (8, 8)
    assert planned.decision.warm_pool_note == note
    assert planned.decision.reason.endswith(f" | {note}")


def test_a_warm_pool_already_that_size_is_left_as_it_is() -> None:
    planned = plan(warm_facts(WarmPool(min_size=8, max_prepared=8, pool_state="Stopped")))
    assert (planned.warm_pool, planned.decision.warm_pool) == (None, 8)


def test_a_group_without_a_warm_pool_is_told_and_none_is_set() -> None:
    planned = plan(warm_facts(None))
    assert planned.warm_pool is None
    assert planned.decision.warm_pool_note.startswith("the group has no warm pool to size")


def test_a_policy_without_a_warm_pool_forecast_says_nothing_of_one() -> None:
    planned = plan(facts())
    assert (planned.warm_pool, planned.decision.warm_pool_note) == (None, "")


def test_a_forecast_of_its_own_metric_says_why_that_metrics_history_is_missing() -> None:
    # Given a forecast from a CloudWatch metric of its own, whose history could not be read
    own = {"mode": "ForecastAndScale", "cloudWatch": {"metric": REQUESTS, "perNode": 50}}
    the_policy = policy(
        queue_metric("jobs", per_node=4), {"type": "Predictive", "name": "ahead", "predictive": own}
    )
    unread = MetricUnavailable(reason="GetMetricData throttled")
    # When planned
    planned = plan(facts(policy=the_policy, histories={"ahead": unread}))
    # Then its forecast names that reason
    (forecast,) = [m for m in planned.decision.metrics if m.name == "ahead"]
    assert forecast.detail.startswith("no forecast: GetMetricData throttled (")

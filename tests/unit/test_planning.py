"""The planning step (`domain.scaling.plan.plan`): what an evaluation read in, one frozen `Plan`
out, nothing done. Cluster Autoscaler splits its scale-down the same way: a planner
(`core/scaledown/planner`) that only decides, and an actuator (`core/scaledown/actuation`)
that carries the decision out."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.groups.node_group import LaunchFailure, NodeGroup, WarmPool
from nodescaler.domain.groups.optin import PauseDirection
from nodescaler.domain.scale_down.unneeded import Removable
from nodescaler.domain.scale_up.backoff import Provisioning
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.pause import Pause
from nodescaler.domain.scaling.plan import Facts, plan
from nodescaler.domain.scaling.readings import MetricReading

from tests.builders import UNLIMITED, policy, queue_metric

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

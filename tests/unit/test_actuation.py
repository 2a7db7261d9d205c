"""Plan, then act: the evaluator reads, plans (`domain.scaling.plan`, pure) and hands the plan to
its actuator (`service.actuation`). A dry run makes the same plan (asking for no look
again) and acts on none of it."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler.domain.ahead.arrivals import Arrivals
from nodescaler.domain.ahead.recheck import SpareSeen
from nodescaler.domain.groups.node_group import LaunchFailure, NodeGroup
from nodescaler.domain.policy import MetricBase, SqsQueueMetric
from nodescaler.domain.scale_down.leaving import Removable
from nodescaler.domain.scaling.group_state import GroupState
from nodescaler.domain.scaling.history import History, ScaleEvent
from nodescaler.domain.scaling.plan import ChooseLeaving, Plan
from nodescaler.domain.scaling.readings import MetricReading, Reading
from nodescaler.service import actuation, evaluation
from nodescaler.service.evaluation import ClusterSay, Evaluator, Outcome, Setup
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers

from tests.builders import UNLIMITED, VirtualClock, policy, queue_metric

NOW = datetime(2026, 11, 26, 9, tzinfo=UTC)
WEB = policy(queue_metric("jobs", per_node=4), behavior=UNLIMITED, name="web")
GROUP = NodeGroup(
    "web",
    4,
    0,
    10,
    4,
    tags={"nodescaler/enabled": "true", "nodescaler/policy": "web"},
    eks_cluster="prod",
    eks_nodegroup="web",
    instance_ids=frozenset({"i-0", "i-1", "i-2", "i-3"}),
)


class World:
    """The ports in memory, every call that changes something logged in order."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []
        self.saved: list[GroupState] = []

    # NodeGroups
    def get(self, name: str) -> NodeGroup | None:
        return GROUP if name == GROUP.name else None

    def failed_launches(self, group: NodeGroup, since: datetime) -> Sequence[LaunchFailure]:
        return ()

    def set_desired(self, group: NodeGroup, desired: int) -> None:
        self.log.append(("set_desired", desired))

    def protect(self, group: NodeGroup, instance_ids: frozenset[str], protected: bool) -> None:
        self.log.append(("protect", sorted(instance_ids), protected))

    def remove_instances(self, group: NodeGroup, instance_ids: Sequence[str]) -> None:
        self.log.append(("remove_instances", tuple(instance_ids)))

    def size_warm_pool(self, group: NodeGroup, size: int) -> None:
        self.log.append(("size_warm_pool", size))

    # StateStore
    def load(self, group: str) -> GroupState:
        return self.saved[-1] if self.saved else GroupState(group)

    def save(self, state: GroupState, **_: Any) -> GroupState:
        saved = dataclasses.replace(state, version=state.version + 1)
        self.saved.append(saved)
        self.log.append(("save", "acting" if saved.acting is not None else "recorded"))
        return saved

    # ClusterView: i-0's node must stay; web-1 and web-2 are what pending pods left unneeded
    def protected(self, group: NodeGroup, now: datetime) -> frozenset[str] | None:
        return frozenset({"i-0"})

    def ready_nodes(self, group: NodeGroup, now: datetime) -> tuple[datetime | None, ...] | None:
        return (None,) * 4  # four Ready, their times not told

    def leaving(self, group: NodeGroup, now: datetime) -> ChooseLeaving:
        return lambda count: Removable(("i-1", "i-2")[:count], "empty nodes")

    def mark_candidates(
        self,
        group: NodeGroup,
        candidates: frozenset[str],
        now: datetime,
        excess: int = 0,
        rooms: frozenset[str] | None = None,
    ) -> None:
        self.log.append(
            ("mark_candidates", sorted(candidates), excess, sorted(group.protected_ids))
        )

    def listed_since(self, at: datetime) -> None:
        pass

    def shed(self, group: str, count: int) -> None:
        self.log.append(("shed", group, count))

    def own_pending_pods(self, group: NodeGroup, now: datetime) -> Reading:
        return MetricReading(value=0, at=now)  # none of its pods waits

    # the queue's producer: one node's worth of jobs
    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        return MetricReading(value=4, at=now, candidates=("web-1", "web-2"))


def evaluated(
    dry_run: bool,
    monkeypatch: pytest.MonkeyPatch,
    world: World | None = None,
    drain_hooks: Any = None,
) -> tuple[World, list[Plan], Outcome]:
    """The group evaluated once, in a world of its own; the plans it made."""
    world, plans = world or World(), []

    def recorded(facts: Any) -> Plan:
        plans.append(made := planner(facts))
        return made

    planner = evaluation.plan
    monkeypatch.setattr(evaluation, "plan", recorded)
    evaluator = Evaluator(
        node_groups=world,  # type: ignore[arg-type]
        producers=Producers({SqsQueueMetric: world}),
        state=world,  # type: ignore[arg-type]
        policies=PolicyBook({"web": WEB}),
        clock=VirtualClock(NOW),
        setup=Setup(dry_run=dry_run),
        cluster=ClusterSay(world),
        drain_hooks=drain_hooks,
    )
    outcome = evaluator.evaluate("web", "m-0").outcome
    monkeypatch.setattr(evaluation, "plan", planner)
    return world, plans, outcome


def test_given_a_dry_run_then_the_same_plan_is_made_and_only_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an EKS group of four whose queue needs one node, i-0's node must stay
    # When it is evaluated in dry-run, and (in a world of its own) not
    dry, dry_plans, dry_outcome = evaluated(True, monkeypatch)
    acted, plans, outcome = evaluated(False, monkeypatch)

    # Then both made the same one plan: scale in to two, i-1 and i-2 leaving
    assert dry_plans == plans and len(plans) == 1
    assert (plans[0].decision.desired, plans[0].leaving) == (2, ("i-1", "i-2"))
    # the dry run recorded it and did nothing else: no protection, no mark, no resize
    assert (dry_outcome, dry.log) == (Outcome.DRY_RUN, [("save", "recorded")])
    assert dry.saved[-1].last_decision == plans[0].decision
    # the other acted on it: protection and marks first, then the resize claimed,
    # made and recorded (write, then act)
    assert outcome is Outcome.ACTED
    assert acted.log == [
        ("protect", ["i-0"], True),
        # the leaving two are named: no excess; i-0 as protected once applied
        ("mark_candidates", ["web-1", "web-2"], 0, ["i-0"]),
        ("save", "acting"),
        ("remove_instances", ("i-1", "i-2")),
        ("save", "recorded"),
        # and the view told the two go: other groups' scale-ins no longer count on them
        ("shed", "web", 2),
    ]


class SelfManaged(World):
    """The same group as a self-managed Auto Scaling group: resized, its termination policy
    chooses which instances go (nodescaler's own, `service.termination_policy`)."""

    def get(self, name: str) -> NodeGroup | None:
        return dataclasses.replace(GROUP, eks_cluster=None, eks_nodegroup=None)


def test_a_scale_in_left_to_the_termination_policy_marks_the_group_as_it_leaves_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a self-managed group of four whose queue needs one node
    world, plans, outcome = evaluated(False, monkeypatch, SelfManaged())
    # When it is resized to one (no instance named: its termination policy chooses)
    assert outcome is Outcome.ACTED and plans[0].leaving == ()
    assert ("set_desired", 1) in world.log
    # Then, before the resize, the three its termination policy lets go next are marked
    # with the candidates, so new pods steer clear of them (`awaiting_removal`)
    assert world.log[1] == ("mark_candidates", ["web-1", "web-2"], 3, ["i-0"])


class DrainHook:
    """The deployment's drain hook on the group: put when missing, or refused."""

    def __init__(self, world: World, refused: Exception | None = None) -> None:
        self.world, self.refused, self.carried = world, refused, False

    def keep(self, group: NodeGroup) -> bool:
        self.world.log.append(("keep_drain_hook", group.name))
        if self.refused is not None:
            raise self.refused
        put, self.carried = not self.carried, True
        return put


class Growing(SelfManaged):
    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        return MetricReading(value=40, at=now)  # ten nodes' worth of jobs


def test_a_scale_in_gives_a_self_managed_group_the_drain_hook_before_the_resize(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a self-managed group of four whose queue needs one node, in a deployment that
    # drains opted-in groups, the group not carrying the hook yet
    world = SelfManaged()
    _, plans, outcome = evaluated(False, monkeypatch, world, DrainHook(world))
    # Then the hook is put on it before the scale-in is claimed and made: its termination
    # policy, asked once the desired capacity drops, finds it and may take a node with pods
    assert outcome is Outcome.ACTED
    calls = [entry[0] for entry in world.log]
    assert calls.index("keep_drain_hook") < calls.index("save") < calls.index("set_desired")
    # and the decision recorded says so
    recorded = world.saved[-1].last_decision
    assert recorded is not None and recorded.desired == 1
    assert "drain hook put on the group" in recorded.reason
    assert "drain hook" not in plans[0].decision.reason  # the plan's own, before acting


def test_a_drain_hook_that_cannot_be_put_is_a_problem_and_the_scale_in_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the same scale-in, Auto Scaling refusing the hook (a role without the right)
    world = SelfManaged()
    refusal = RuntimeError("AccessDenied: autoscaling:PutLifecycleHook " + "x" * 2000)
    _, _, outcome = evaluated(False, monkeypatch, world, DrainHook(world, refusal))
    # Then the group still scales in (its termination policy then takes empty nodes only)
    assert outcome is Outcome.ACTED and ("set_desired", 1) in world.log
    # and the group's state names the problem, Auto Scaling's answer bounded
    problems = world.saved[-1].problems
    assert len(problems) == 1 and problems[0].startswith("drain hook: it could not be read")
    assert "AccessDenied" in problems[0] and len(problems[0]) < 700


@pytest.mark.parametrize(
    ("world_of", "dry_run"),
    [(World, False), (Growing, False), (SelfManaged, True)],
    ids=["eks-managed", "scale-up", "dry-run"],
)
def test_no_drain_hook_is_put_on_a_managed_group_for_a_scale_up_or_in_a_dry_run(
    world_of: type[World], dry_run: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an EKS managed group's scale-in (EKS drains its nodes), a scale-up, or a
    # self-managed group's scale-in in a dry run (which acts on nothing)
    world = world_of()
    _, _, outcome = evaluated(dry_run, monkeypatch, world, DrainHook(world))
    # Then the hook is never asked for
    assert outcome is (Outcome.DRY_RUN if dry_run else Outcome.ACTED)
    assert all(entry[0] != "keep_drain_hook" for entry in world.log)


def test_an_excess_nodescaler_did_not_ask_for_marks_nothing() -> None:
    # Given a self-managed group of four in service at a desired three (an instance
    # refresh launching before it terminates), whose latest change was a scale-up
    group = dataclasses.replace(GROUP, eks_cluster=None, eks_nodegroup=None, desired=3)
    up, down = ScaleEvent(at=NOW, change=+1), ScaleEvent(at=NOW, change=-1)

    def made(last: ScaleEvent | None, leaving: tuple[str, ...] = ()) -> Any:
        return types.SimpleNamespace(
            group=group,
            leaving=leaving,
            decision=types.SimpleNamespace(desired=3),
            resized_history=History(last_change=last),  # no scale event kept: all old
        )

    # Then none of its nodes is marked; after a scale-in of nodescaler's, the one over is,
    # however long ago it was (its termination policy waits for a Job to end: the scale
    # events, kept a rate period, have long gone)
    assert (actuation._awaiting(made(up)), actuation._awaiting(made(None))) == (0, 0)
    assert actuation._awaiting(made(down)) == 1
    # and none when the plan names the instances that go itself (an EKS managed group)
    assert actuation._awaiting(made(down, leaving=("i-3",))) == 0


class Buffered(World):
    """The same group, its buffer's room going: 8 pods beyond it a minute ago, 2 now (6 a
    minute: the third pod comes in 30 s); `tags` added to the group's own."""

    def __init__(self, **tags: str) -> None:
        super().__init__()
        self.tags = tags

    def get(self, name: str) -> NodeGroup | None:
        return dataclasses.replace(GROUP, tags={**GROUP.tags, **self.tags})

    def load(self, group: str) -> GroupState:
        if self.saved:
            return self.saved[-1]
        counted = Arrivals(40, NOW - timedelta(minutes=1), 0.0, NOW - timedelta(hours=1))
        counted = dataclasses.replace(counted, longest_gap=timedelta(minutes=1))
        before = SpareSeen(8, NOW - timedelta(minutes=1))
        return GroupState(group, arrivals=counted, spare_seen=before)

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        return MetricReading(value=4, at=now, group_pods=46, buffer_spare=2)


@pytest.mark.parametrize("by", ["setting", "tag"])
def test_a_dry_run_records_no_time_to_look_again_and_a_live_group_does(
    by: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the group's buffer room going, in dry-run by the deployment's setting or its tag
    tagged = Buffered(**{"nodescaler/dry-run": "true"}) if by == "tag" else Buffered()
    dry, _, dry_outcome = evaluated(by == "setting", monkeypatch, tagged)
    live, _, outcome = evaluated(False, monkeypatch, Buffered())
    # Then the live group's state says when to look again; the dry run's, which buys
    # nothing then, does not, and keeps the count its next evaluation measures from
    assert (outcome, live.saved[-1].recheck) == (Outcome.ACTED, NOW + timedelta(seconds=30))
    assert (dry_outcome, dry.saved[-1].recheck) == (Outcome.DRY_RUN, None)
    assert dry.saved[-1].spare_seen == live.saved[-1].spare_seen == SpareSeen(2, NOW, 46, 6.0)

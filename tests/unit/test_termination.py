"""The custom termination policy: which instances a scale-in takes, from the cluster; and
every request it cannot act on answered without a guess.

What Auto Scaling sends and does with the answer, per `Cause`: Amazon EC2 Auto Scaling User
Guide, "Create a custom termination policy with Lambda",
https://docs.aws.amazon.com/autoscaling/ec2/userguide/lambda-custom-termination-policy.html
(after an empty answer it asks again: for a scale-in while the group is above its desired
capacity, for an instance refresh for an hour and then the refresh fails, for a maximum
instance lifetime for as long as the instance is past it).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler.domain.cluster.snapshot import DisruptionBudget, Node, Pod, Resources, Snapshot
from nodescaler.domain.groups.node_group import (
    NodeGroup,
)
from nodescaler.domain.scale_down.leaving import least_bad
from nodescaler.domain.scale_down.pod_rules import DrainRules
from nodescaler.domain.scale_down.termination_policy import QUIET, Wait
from nodescaler.errors import (
    DrainHookUnreadError,
    KubernetesUnavailableError,
    MalformedEventError,
    StateUnavailableError,
)
from nodescaler.events.termination_policy import parse_termination_request
from nodescaler.service.termination_policy import TerminationChooser

from tests.builders import T0, VirtualClock

GIB = 2**30
IDS = [f"i-0000000000000000{n}" for n in range(6)]


def request(
    *offered: str, capacity: int = 1, group: str = "web", cause: Any = "SCALE_IN"
) -> dict[str, Any]:
    return {
        "AutoScalingGroupARN": f"arn:aws:autoscaling:eu-west-1:123456789012:autoScalingGroup:x:autoScalingGroupName/{group}",
        "AutoScalingGroupName": group,
        "CapacityToTerminate": [
            {
                "AvailabilityZone": "eu-west-1a",
                "Capacity": capacity,
                "InstanceMarketOption": "on-demand",
            }
        ],
        "Instances": [
            {
                "AvailabilityZone": "eu-west-1a",
                "InstanceId": i,
                "InstanceType": "m5.xlarge",
                "InstanceMarketOption": "on-demand",
            }
            for i in offered
        ],
        "Cause": cause,
        "HasMoreInstances": False,
    }


def node(index: int, *, ready: bool = True, **fields: Any) -> Node:
    return Node(
        f"node-{index}",
        "web",
        ready,
        True,
        Resources(4000, 16 * GIB, 110),
        provider_id=f"aws:///eu-west-1a/{IDS[index]}",
        **fields,
    )


def pod(name: str, on: int, cpu: int = 1000, **fields: Any) -> Pod:
    return Pod("default", name, f"node-{on}", Resources(cpu, GIB, 1), **fields)


class Groups:
    def discover(self) -> list[NodeGroup]:
        return [NodeGroup("web", 4, 0, 10, 4, instance_ids=frozenset(IDS))]


class Cluster:
    def __init__(self, nodes: list[Node], pods: list[Pod]) -> None:
        self.listed = Snapshot(tuple(nodes), tuple(pods))

    def snapshot(self) -> Snapshot:
        return self.listed


class Down:
    def snapshot(self) -> Snapshot:
        raise KubernetesUnavailableError("connection refused")


class Hooks:
    """Whether a group has the deployment's drain hook: `drains` for every group (None:
    Auto Scaling could not say)."""

    def __init__(self, drains: bool | None = True) -> None:
        self.answer = drains
        self.asked: list[str] = []

    def drains(self, group: str) -> bool:
        self.asked.append(group)
        if self.answer is None:
            raise DrainHookUnreadError(f"node group {group}: Throttling: Rate exceeded")
        return self.answer


def choose(
    cluster: Any, offered: list[str], capacity: int, group: str = "web", hooks: Any = None
) -> Any:
    parsed = parse_termination_request(request(*offered, capacity=capacity, group=group))
    chooser = TerminationChooser(Groups(), cluster, VirtualClock(), drain_hooks=hooks or Hooks())
    return chooser.choose(parsed)


@pytest.mark.parametrize(("drains", "why"), [(False, "no drain hook"), (None, "hook unread")])
def test_a_node_with_pods_to_move_stays_in_a_group_whose_nodes_are_not_drained(
    drains: bool | None, why: str
) -> None:
    # Without the deployment's terminate hook nothing evicts a node's pods before its
    # instance goes: they would end with it, past their budgets. Cluster Autoscaler evicts
    # before it deletes, so only nodes with nothing to move may go.
    nodes = [node(0), node(1), node(2), node(3, ready=False)]
    pods = [pod("busy", 0, 3000), pod("light", 1, 500), pod("agent", 2, daemon_set=True)]
    offered = IDS[:5]
    choice = choose(Cluster(nodes, pods), offered, capacity=4, hooks=Hooks(drains))
    assert choice.instance_ids == (IDS[3], IDS[4], IDS[2])
    assert choice.not_nodes == (IDS[4],)  # still named: launched, never registered
    assert choice.chosen and f"{IDS[1]} stays while its pods run: " in choice.reason
    assert why in choice.reason and "docs/deploy.md" in choice.reason
    # why it could not be read is kept apart: logged and counted (`report_termination`)
    unread = "node group web: Throttling: Rate exceeded" if drains is None else ""
    assert choice.hook_unread == unread
    # a group without the hook is told apart (`InstancesUndrained`): it sheds only empty nodes
    assert choice.undrained == ((IDS[1],) if drains is False else ())
    # with the hook the same ask takes the light node too
    hooked = choose(Cluster(nodes, pods), offered, capacity=4, hooks=Hooks(True))
    assert hooked.instance_ids == (IDS[3], IDS[4], IDS[2], IDS[1])
    assert "stays while its pods run" not in hooked.reason
    assert hooked.undrained == ()


def test_the_drain_hook_is_asked_only_when_a_node_with_pods_would_go() -> None:
    nodes = [node(0), node(1), node(2)]
    pods = [pod("busy", 0, 3000), pod("light", 1, 500), pod("agent", 2, daemon_set=True)]
    hooks = Hooks(False)
    assert choose(Cluster(nodes, pods), IDS[:3], capacity=1, hooks=hooks).instance_ids == (IDS[2],)
    assert hooks.asked == []  # the empty node alone was asked for: no call spent
    choose(Cluster(nodes, pods), IDS[:3], capacity=2, hooks=hooks)
    assert hooks.asked == ["web"]


def test_without_a_drain_hook_the_next_in_order_takes_the_busy_nodes_place() -> None:
    # The light node 0 comes first, then the dead node 1 (NotReady with pods bound: nothing
    # a drain could do for them). Without the hook node 0 stays, and node 1 goes in its
    # place: a dead instance must still be able to leave.
    nodes = [node(0), node(1, ready=False), node(2)]
    pods = [pod("light", 0, 500), pod("lost", 1, 500), pod("other", 2, 500)]
    hooks = Hooks(False)
    choice = choose(Cluster(nodes, pods), IDS[:3], capacity=1, hooks=hooks)
    assert hooks.asked == ["web"]  # the light node was the choice: the hook was asked
    assert choice.instance_ids == (IDS[1],)
    assert choice.reason.startswith("1 taken: ") and f"{IDS[0]} stays" in choice.reason
    hooked = choose(Cluster(nodes, pods), IDS[:3], capacity=1, hooks=Hooks(True))
    assert hooked.instance_ids == (IDS[0],)
    # asked for two: the empty node 3 and, in the light one's place, one dead node of two
    nodes = [node(0), node(1, ready=False), node(2, ready=False), node(3), node(4)]
    pods = [pod("light", 0, 500), pod("lost", 1, 500), pod("lost-too", 2, 500)]
    pods += [pod("other", 4, 500)]
    choice = choose(Cluster(nodes, pods), IDS[:5], capacity=2, hooks=Hooks(False))
    assert choice.instance_ids == (IDS[3], IDS[1])


def test_past_its_patience_a_refresh_takes_the_least_bad_even_without_a_drain_hook() -> None:
    # An operator's instance refresh is never refused for good (Auto Scaling fails it after
    # an hour of empty answers): without the hook its busy node waits the patience, then
    # goes undrained, as Auto Scaling's own policy would have taken it.
    nodes = [node(0), node(1)]
    pods = [pod("light", 0, 500), pod("other", 1, 500)]
    policy = Policy(Cluster(nodes, pods))
    policy.chooser = TerminationChooser(
        Groups(), Cluster(nodes, pods), policy.clock, policy.waits, drain_hooks=Hooks(False)
    )
    answers = policy.ask_every("INSTANCE_REFRESH", IDS[:2], minutes=5, for_minutes=30, whole=True)
    assert all(not answers[at].instance_ids for at in range(0, 30, 5))
    assert answers[30].forced and len(answers[30].instance_ids) == 1
    # undrained while it waits; the one that goes is not said to stay
    assert answers[0].undrained == (IDS[0],)
    assert not set(answers[30].undrained) & set(answers[30].instance_ids)


def test_never_ready_then_empty_then_cheapest_to_move_and_never_one_whose_pods_cannot() -> None:
    nodes = [node(0), node(1), node(2), node(3, ready=False)]
    pods = [
        pod("busy-a", 0, 3000),
        pod("light", 1, 500),
        pod("agent", 2, daemon_set=True),
    ]
    cluster = Cluster(nodes, pods)
    offered = IDS[:5]  # IDS[4] has no node at all: launched, never registered
    choice = choose(cluster, offered, capacity=4)
    # never Ready (3) and never a node (4) first, then the empty one (2), then the light one
    # (1, its pod fits on 0); 0's 3 cores have nowhere to go once 1 and 2 leave
    assert choice.instance_ids == (IDS[3], IDS[4], IDS[2], IDS[1])
    assert choice.chosen and choice.not_nodes == (IDS[4],)
    assert choose(cluster, offered, capacity=2).instance_ids == (IDS[3], IDS[4])


def test_a_node_a_job_runs_on_is_never_drained_on_a_scale_in_and_goes_once_it_ends() -> None:
    # Given node 0 running a Job's worker (a queue's, as KEDA's ScaledJob makes them), node
    # 1 two Deployment pods, and node 2 empty: all three pods fit on any one node
    nodes = [node(0), node(1), node(2)]
    worker = pod("worker", 0, 500, job=True)
    web = [pod("web-a", 1, 500), pod("web-b", 1, 500)]
    # When a scale-in asks for all three
    choice = choose(Cluster(nodes, [worker, *web]), IDS[:3], capacity=3)
    # Then the empty node and the Deployment's go; the worker's stays (moved, it would
    # start its task again), though its one pod is the cheapest to move
    assert choice.instance_ids == (IDS[2], IDS[1])
    # And with node 1 too busy to go, room for the worker on it, the worker's still stays
    busy = pod("busy", 1, 3000)
    assert choose(Cluster(nodes, [worker, busy]), IDS[:3], capacity=2).instance_ids == (IDS[2],)
    # And once its Job is done, its node goes as an empty one
    done = replace(worker, phase="Succeeded")
    assert choose(Cluster(nodes, [done]), IDS[:1], capacity=1).instance_ids == (IDS[0],)


@pytest.mark.parametrize(
    ("worker", "drained"),
    [
        (pod("worker", 0, 500, job=True), False),  # at its task
        (pod("worker", 0, 500, job=True, phase="Pending"), True),  # still starting
        (pod("worker", 0, 500, job=True, safe_to_evict=True), True),  # its owner's word
        (pod("worker", 0, 500), True),  # a Deployment's: it runs elsewhere the same
    ],
)
def test_a_job_at_its_task_waits_marked_and_a_restart_that_costs_nothing_is_drained(
    worker: Pod, drained: bool
) -> None:
    from nodescaler.domain.scale_down.leaving import awaiting_removal, removable

    # Given the worker on node 0 and node 1 too busy to go, with room for the worker
    nodes = [node(0), node(1)]
    snapshot = Snapshot(tuple(nodes), (worker, pod("busy", 1, 3000)))
    group = NodeGroup("web", 2, 0, 10, 2, instance_ids=frozenset(IDS[:2]))
    # When a scale-in asks for one
    found = removable(group, IDS[:2], 1, snapshot, now=T0)
    # Then node 0 is drained, or left while its Job runs, named, and marked meanwhile:
    # it, not node 1 (fewer pods to move, but its one never ends)
    assert found.instance_ids == ((IDS[0],) if drained else ())
    assert found.waiting == (() if drained else ("node-0",))
    assert ("left while their Jobs run, then taken: node-0" in found.reason) is not drained
    assert awaiting_removal(group, snapshot, 1) == {"node-0"}


def test_a_node_gone_not_ready_with_pods_on_it_is_not_taken_first_as_never_ready() -> None:
    # node 1 was Ready and went NotReady with a pod bound; node 2 is empty and Ready
    nodes = [node(0), node(1, ready=False), node(2)]
    cluster = Cluster(nodes, [pod("bound", 1), pod("busy", 0, 3500)])
    assert choose(cluster, IDS[:3], capacity=1).instance_ids == (IDS[2],)
    # but it can still leave, last: a dead instance must not stay forever
    assert choose(cluster, IDS[:3], capacity=2).instance_ids == (IDS[2], IDS[1])


def test_fewer_than_asked_when_the_pods_would_not_fit_elsewhere() -> None:
    cluster = Cluster([node(0), node(1)], [pod("a", 0, 1900), pod("b", 1, 1900), pod("c", 1, 1500)])
    choice = choose(cluster, IDS[:2], capacity=1)
    assert choice.instance_ids == ()  # the group waits and asks again
    assert "node-0 kept: pods-would-not-fit (default/a)" in choice.reason


def test_a_node_that_must_stay_is_never_chosen() -> None:
    cluster = Cluster(
        [node(0, scale_down_disabled=True), node(1)], [pod("pinned", 1, not_safe_to_evict=True)]
    )
    assert choose(cluster, IDS[:2], capacity=2).instance_ids == ()


@pytest.mark.parametrize(
    ("cluster", "group", "why"),
    [
        (Down(), "web", "the cluster cannot be read (connection refused): the group decides"),
        (None, "web", "no cluster to read: the group decides"),
        (Cluster([], []), "batch", "not an opted-in node group: the group decides"),
    ],
)
def test_what_it_cannot_tell_it_gives_back_to_the_group(cluster: Any, group: str, why: str) -> None:
    choice = choose(cluster, IDS[:3], capacity=1, group=group)
    assert (choice.instance_ids, choice.chosen, choice.reason) == (tuple(IDS[:3]), False, why)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda r: r.pop("AutoScalingGroupName"),
            "termination policy request: AutoScalingGroupName: Field required",
        ),
        (
            lambda r: r["Instances"][0].update(InstanceId="web-1"),
            "termination policy request for group 'web': Instances[0].InstanceId: String should match pattern",
        ),
        (
            lambda r: r["CapacityToTerminate"][0].update(Capacity="2"),
            "termination policy request for group 'web': CapacityToTerminate[0].Capacity: Input should be a valid integer",
        ),
    ],
)
def test_a_malformed_request_names_the_field(change: Any, message: str) -> None:
    malformed = request(IDS[0])
    change(malformed)
    with pytest.raises(MalformedEventError) as caught:
        parse_termination_request(malformed)
    assert str(caught.value).startswith(message)


def test_a_request_that_is_not_an_object_is_named() -> None:
    with pytest.raises(MalformedEventError, match="a JSON object, not list"):
        parse_termination_request([])


def test_nodes_with_pods_to_move_go_one_at_a_time_empty_ones_together() -> None:
    nodes = [node(0), node(1), node(2), node(3), node(4)]
    pods = [pod("a", 0, 500), pod("b", 1, 500)]  # 2, 3 and 4 empty
    choice = choose(Cluster(nodes, pods), IDS[:5], capacity=5)
    assert choice.instance_ids == (IDS[2], IDS[3], IDS[4], IDS[0])  # then 1, asked again


def test_an_eks_managed_groups_scale_in_asks_for_what_can_go_and_names_the_instances() -> None:
    from datetime import UTC, datetime

    from nodescaler.domain.scale_down.leaving import Removable
    from nodescaler.domain.scaling.decision import Decision
    from nodescaler.domain.scaling.plan import which_leave

    class Chosen:
        def __init__(self, found: Removable | None) -> None:
            self.found = found

        def removable(self, group: NodeGroup, count: int, now: datetime) -> Removable | None:
            return self.found

    eks = NodeGroup("web", 4, 0, 10, 4, eks_cluster="prod", eks_nodegroup="web")
    at = datetime(2026, 11, 23, 9, tzinfo=UTC)
    decision = Decision(
        node_group="web",
        policy="p",
        at=at,
        current=4,
        desired=1,
        in_service=4,
        min_replicas=0,
        max_replicas=10,
        recommendation=1,
        metrics=(),
        limited_by=(),
        reason="scale down 4 → 1",
    )

    def which_go(
        cluster: Any, group: NodeGroup = eks
    ) -> tuple[Decision, tuple[str, ...], frozenset[str]]:
        return which_leave(group, decision, lambda count: cluster.removable(group, count, at))

    # two go, and node-3, a Job at work on it, goes once the Job ends: marked meanwhile
    two = Removable((IDS[0], IDS[1]), "2 of 3 asked: ...", waiting=("node-3",))
    adjusted, removing, marked = which_go(Chosen(two))
    assert (adjusted.desired, removing, marked) == (2, (IDS[0], IDS[1]), {"node-3"})
    assert adjusted.reason == "scale down 4 → 1 | 2 of 3 asked: ..."
    held, none, unmarked = which_go(Chosen(None))  # the cluster cannot say: nothing leaves
    assert (held.desired, none, unmarked) == (4, (), frozenset())
    assert held.reason == "scale down 4 → 1 | the cluster cannot be read: no instance chosen"
    asg = NodeGroup("web", 4, 0, 10, 4)  # a plain ASG: its termination policy chooses
    assert which_go(Chosen(two), asg) == (decision, (), frozenset())


def test_an_instance_protected_from_scale_in_is_never_chosen_for_an_eks_group() -> None:
    from datetime import UTC, datetime

    from nodescaler.service.cluster_view import KubernetesClusterView

    nodes = [node(0), node(1), node(2)]
    cluster = KubernetesClusterView(Cluster(nodes, [pod("light", 0, 1500)]))
    group = NodeGroup(
        "web", 3, 0, 10, 3, instance_ids=frozenset(IDS[:3]), protected_ids=frozenset({IDS[2]})
    )
    found = cluster.removable(group, 2, datetime(2026, 11, 23, 9, tzinfo=UTC))
    # 2 is empty, but protected: the empty 1 goes, and 0, whose pod moves onto 2
    assert found is not None and found.instance_ids == (IDS[1], IDS[0])


def test_an_eks_groups_scale_in_takes_a_kube_system_agents_node_once_past_its_hour() -> None:
    from nodescaler.service.cluster_view import KubernetesClusterView

    # Given a kube-system agent no budget selects on node-0, created at T0, the cheapest
    # node to empty (its web pods weigh more)
    agent = Pod("kube-system", "agent", "node-0", Resources(100, GIB, 1), created=T0)
    pods = [agent, pod("web-1", 1), pod("web-2", 2)]
    cluster = KubernetesClusterView(Cluster([node(0), node(1), node(2)], pods))
    group = NodeGroup("web", 3, 0, 10, 3, instance_ids=frozenset(IDS[:3]))
    # When the evaluation asks for one at the agent's hour, and a second later
    at_hour = cluster.removable(group, 1, T0 + timedelta(hours=1))
    past = cluster.removable(group, 1, T0 + timedelta(hours=1, seconds=1))
    # Then node-0 is kept (and protected) at the hour, and goes first past it
    assert at_hour is not None and at_hour.instance_ids == (IDS[1],)
    assert "kube-system/agent: a kube-system pod no PodDisruptionBudget selects" in (at_hour.reason)
    assert cluster.protected(group, T0 + timedelta(hours=1)) == frozenset({IDS[0]})
    assert past is not None and past.instance_ids == (IDS[0],)
    assert cluster.protected(group, T0 + timedelta(hours=1, seconds=1)) == frozenset()


# --- causes other than a scale-in: chosen by the same rules, never refused for good ----------

REFRESH, LIFETIME, REBALANCE = "INSTANCE_REFRESH", "MAX_INSTANCE_LIFETIME", "REBALANCE"
CANNOT_WAIT = [REFRESH, LIFETIME, REBALANCE]


class Waits:
    """The TerminationWaits port in memory (tests/e2e/test_terminate_handler.py runs the
    state table's, over moto)."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str], Wait] = {}

    def load(self, group: str, cause: str) -> Wait | None:
        return self.kept.get((group, cause))

    def save(self, group: str, cause: str, wait: Wait) -> None:
        self.kept[(group, cause)] = wait

    def clear(self, group: str, cause: str) -> None:
        self.kept.pop((group, cause), None)


class Policy:
    """The termination policy as Auto Scaling asks it: one cause, on a virtual clock."""

    def __init__(self, cluster: Any, waits: Any = None) -> None:
        self.clock = VirtualClock()
        self.waits = waits if waits is not None else Waits()
        self.chooser = TerminationChooser(
            Groups(), cluster, self.clock, self.waits, drain_hooks=Hooks()
        )

    def ask(self, cause: Any, offered: list[str], capacity: int = 1) -> Any:
        parsed = parse_termination_request(request(*offered, capacity=capacity, cause=cause))
        return self.chooser.choose(parsed)

    def ask_every(
        self, cause: Any, offered: list[str], *, minutes: int, for_minutes: int, whole: bool = False
    ) -> dict[int, Any]:
        """Asked every `minutes` ("a short time", as Auto Scaling asks again after an empty
        answer) for `for_minutes`: minute → the instances answered (`whole`: the choice)."""
        answers = {}
        for at in range(0, for_minutes + 1, minutes):
            self.clock.at = T0 + timedelta(minutes=at)
            choice = self.ask(cause, offered)
            answers[at] = choice if whole else choice.instance_ids
        return answers


def blocked() -> Cluster:
    """Every offered node refused by the rules: node 0 pinned by a pod that may not be
    evicted, node 1's pod held by a budget allowing no disruption now."""
    nodes = [node(0), node(1), node(2)]
    pods = [
        pod("pinned", 0, 500, not_safe_to_evict=True),
        pod("guarded", 1, 500, labels={"app": "guarded"}),
        pod("busy", 2, 3000),
    ]
    budget = DisruptionBudget("default", "guard", {"app": "guarded"}, disruptions_allowed=0)
    cluster = Cluster(nodes, pods)
    cluster.listed = Snapshot(tuple(nodes), tuple(pods), (budget,))
    return cluster


@pytest.mark.parametrize(
    ("cause", "at_once", "at_28", "at_30", "at_40"),
    [
        # a scale-in is nodescaler's own: it waits as long as the pods need (unchanged)
        ("SCALE_IN", (), (), (), ()),
        # the others: none while the rules refuse all, then the least-bad (node 1: its pod
        # is held by a budget; node 0 is pinned by annotation), one an ask
        (REFRESH, (), (), (IDS[1],), (IDS[1],)),
        (LIFETIME, (), (), (IDS[1],), (IDS[1],)),
        (REBALANCE, (), (), (IDS[1],), (IDS[1],)),
    ],
)
def test_given_every_offered_node_refused_then_each_cause_waits_as_aws_lets_it(
    cause: str, at_once: tuple, at_28: tuple, at_30: tuple, at_40: tuple
) -> None:
    # Given a cluster whose offered nodes the rules all refuse
    policy = Policy(blocked())
    # When Auto Scaling asks every two minutes with this cause
    answers = policy.ask_every(cause, IDS[:2], minutes=2, for_minutes=40)
    # Then a scale-in is refused for as long as it asks; any other cause only until 30
    # minutes after its first ask, well inside the hour an instance refresh is given
    assert (answers[0], answers[28], answers[30], answers[40]) == (at_once, at_28, at_30, at_40)


@pytest.mark.parametrize("cause", ["SCALE_IN", *CANNOT_WAIT])
def test_given_a_node_the_rules_let_go_then_every_cause_takes_it_at_once(cause: str) -> None:
    # Given node 2 empty beside the refused nodes 0 and 1
    cluster = blocked()
    cluster.listed = Snapshot(
        (*cluster.listed.nodes, node(3)), cluster.listed.pods, cluster.listed.budgets
    )
    # When Auto Scaling asks with any cause
    choice = Policy(cluster).ask(cause, [IDS[0], IDS[1], IDS[3]])
    # Then the empty node goes at once, as on a scale-in, and nothing is forced
    assert (choice.instance_ids, choice.forced) == ((IDS[3],), False)


def test_an_instance_refresh_whose_instances_are_all_blocked_is_answered_within_its_hour() -> None:
    # Given an instance refresh whose offered nodes the rules all refuse
    policy = Policy(blocked())
    # When Auto Scaling asks every five minutes for the hour it gives a refresh
    answers = policy.ask_every(REFRESH, IDS[:3], minutes=5, for_minutes=60)
    # Then it is not answered none for good: from half an hour on, the least-bad node goes
    # (node 2: too busy to move by the rules, but no annotation or budget holds its pod)
    answered = [at for at, ids in answers.items() if ids]
    assert answered and answered[0] == 30 and answered[-1] == 60
    choice = policy.ask(REFRESH, IDS[:3])
    assert choice.forced and choice.instance_ids == (IDS[2],)
    assert "asked since 12:00:00Z, past its patience (12:30:00Z): the least-bad instance" in (
        choice.reason
    )


def test_while_it_waits_the_answer_says_until_when() -> None:
    policy = Policy(blocked())
    policy.ask(REFRESH, IDS[:2])
    policy.clock.advance(minutes=10)
    choice = policy.ask(REFRESH, IDS[:2])
    assert choice.instance_ids == () and not choice.forced
    assert choice.reason.startswith("INSTANCE_REFRESH: 0 of 1 asked")
    assert choice.reason.endswith(
        "none for now, asked since 12:00:00Z: the least-bad instance goes from 12:30:00Z"
    )


def test_a_wait_ends_when_a_node_goes_by_the_rules_or_the_asking_stops() -> None:
    cluster = blocked()
    policy = Policy(cluster)
    policy.ask_every(REFRESH, IDS[:2], minutes=2, for_minutes=20)
    # a node the rules let go ends the wait: the next refusal waits afresh
    free = Snapshot((*cluster.listed.nodes, node(3)), cluster.listed.pods, cluster.listed.budgets)
    refused, cluster.listed = cluster.listed, free
    assert policy.ask(REFRESH, [IDS[0], IDS[3]]).instance_ids == (IDS[3],)
    cluster.listed = refused
    policy.clock.advance(minutes=12)  # 32 minutes after the first ask
    assert policy.ask(REFRESH, IDS[:2]).instance_ids == ()
    # no ask for longer than 15 minutes (the refresh cancelled): a later one waits afresh
    policy.clock.advance(minutes=16)
    assert policy.ask(REFRESH, IDS[:2]).instance_ids == ()
    assert policy.waits.kept[("web", REFRESH)].since == policy.clock.now()


def test_each_cause_waits_on_its_own_clock() -> None:
    policy = Policy(blocked())
    policy.ask_every(REFRESH, IDS[:2], minutes=2, for_minutes=30)
    assert policy.ask(REBALANCE, IDS[:2]).instance_ids == ()  # its first ask
    assert policy.ask(REFRESH, IDS[:2]).instance_ids == (IDS[1],)


def test_the_least_bad_takes_what_no_rule_holds_then_budgets_then_annotations() -> None:
    nodes = [node(0), node(1), node(2), node(3)]
    pods = [
        pod("pinned", 0, 100, not_safe_to_evict=True),
        pod("guarded", 1, 100, labels={"app": "guarded"}),
        pod("two-a", 2, 100),
        pod("two-b", 2, 100),
        pod("one", 3, 3000),
    ]
    budget = DisruptionBudget("default", "guard", {"app": "guarded"}, disruptions_allowed=0)
    snapshot = Snapshot(tuple(nodes), tuple(pods), (budget,))
    web = Groups().discover()[0]
    # IDS[4] is no node at all; then 3 (one pod) before 2 (two), 1 (its budget), 0 (pinned)
    order = (IDS[4], IDS[3], IDS[2], IDS[1], IDS[0])
    assert least_bad(web, IDS[:5], snapshot, now=T0) == order
    # budgets unread: every node with pods to move counts as held by one
    unread = Snapshot(tuple(nodes), tuple(pods), None)
    assert least_bad(web, IDS[:4], unread, now=T0) == (IDS[1], IDS[3], IDS[2], IDS[0])


class Unreachable:
    def load(self, group: str, cause: str) -> Wait | None:
        raise StateUnavailableError("node group web: termination wait item: timed out")

    save = clear = load  # type: ignore[assignment]


def test_when_the_wait_cannot_be_kept_it_answers_none_for_now_and_says_why() -> None:
    # Given a state table that does not answer in time
    policy = Policy(blocked(), Unreachable())
    # When an instance refresh asks, well past any patience
    policy.clock.advance(hours=2)
    choice = policy.ask(REFRESH, IDS[:2])
    # Then no error escapes: none for now, and the reason is kept for the log
    assert choice.instance_ids == ()
    assert choice.unkept.startswith(
        "INSTANCE_REFRESH: none for now: how long it waited not kept (node group web:"
    )
    # and a node the rules let go still goes, the wait's end not kept said too
    cluster = blocked()
    cluster.listed = Snapshot((*cluster.listed.nodes, node(3)), (), ())
    freed = Policy(cluster, Unreachable()).ask(REFRESH, [IDS[3]])
    assert freed.instance_ids == (IDS[3],) and "its wait's end not kept" in freed.unkept


def test_a_scale_in_never_reads_or_writes_a_wait() -> None:
    policy = Policy(blocked(), Unreachable())
    choice = policy.ask("SCALE_IN", IDS[:2])
    assert (choice.instance_ids, choice.unkept, choice.problem) == ((), "", "")


@pytest.mark.parametrize(
    ("cause", "named"),
    [
        ("SCALE_OUT_OF_NOWHERE", "Cause 'SCALE_OUT_OF_NOWHERE'"),
        (7, "Cause '7'"),
        (None, "Cause 'None'"),
        ("", "no Cause"),
        ("\x1b[31mREFRESH" + "X" * 100, "Cause '?[31mREFRESH" + "X" * 52 + "'"),
    ],
    ids=["unknown", "a-number", "null", "empty", "terminal-escape-and-long"],
)
def test_a_cause_aws_does_not_document_is_named_and_answered_as_one_that_cannot_wait(
    cause: Any, named: str
) -> None:
    # Given a request whose Cause is none of the four AWS documents (the guide says only
    # that a larger answer goes to the group's next policy, not what an unknown cause does)
    policy = Policy(blocked())
    # When Auto Scaling asks with it, every two minutes for half an hour
    answers = policy.ask_every(cause, IDS[:2], minutes=2, for_minutes=30, whole=True)
    # Then the request is still answered (never refused whole), the cause named for the log
    first = answers[0]
    assert first.problem == (
        f"termination policy request for group 'web': {named}, not one AWS documents "
        "(SCALE_IN, INSTANCE_REFRESH, MAX_INSTANCE_LIFETIME, REBALANCE): answered as a "
        "cause that cannot wait"
    )
    # and as a cause that cannot wait: by the rules (none can go now), then the least-bad,
    # neither stalling what may be a rollout nor taking a node whose pods cannot move at once
    assert (first.instance_ids, answers[28].instance_ids) == ((), ())
    assert answers[30].instance_ids == (IDS[1],)


def test_a_request_without_a_cause_is_read_as_having_none() -> None:
    without = request(IDS[0])
    del without["Cause"]
    assert parse_termination_request(without).cause == ""


def test_given_a_bare_pod_and_an_emptydir_pod_when_asked_then_their_nodes_are_not_offered() -> None:
    # Cluster Autoscaler's FAQ: pods not backed by a controller, and pods with local
    # storage, prevent it from removing their node (simulator/drainability/rules/
    # replicated and localstorage)
    nodes = [node(0), node(1), node(2)]
    pods = [
        pod("debug", 0, 500, controlled=False),
        pod("cache", 1, 500, local_storage=True),
        pod("web", 2, 500),
    ]
    choice = choose(Cluster(nodes, pods), IDS[:3], 2)
    assert choice.instance_ids == (IDS[2],)  # web's pod moves; the others' nodes stay
    assert "node-0 kept: pods-may-not-move (default/debug: not managed by a controller" in (
        choice.reason
    )


def test_given_skip_nodes_with_local_storage_off_then_the_emptydir_pod_moves() -> None:
    nodes = [node(0), node(1), node(2)]
    pods = [pod("cache", 0, 500, local_storage=True), pod("web", 2, 500)]
    parsed = parse_termination_request(request(*IDS[:3], capacity=2))

    def chosen(rules: DrainRules) -> tuple[str, ...]:
        chooser = TerminationChooser(
            Groups(), Cluster(nodes, pods), VirtualClock(), rules=rules, drain_hooks=Hooks()
        )
        return chooser.choose(parsed).instance_ids

    assert chosen(DrainRules()) == (IDS[1], IDS[2])  # the empty node, then web's
    assert chosen(DrainRules(skip_nodes_with_local_storage=False)) == (IDS[1], IDS[0])


def test_given_a_kube_system_agent_then_its_node_is_offered_once_past_its_hour_by_the_clock() -> (
    None
):
    # --blocking-system-pod-distruption-timeout (1h), counted to the function's own clock
    nodes = [node(0), node(1), node(2)]  # node-2, not offered, has room for the agent
    agent = Pod("kube-system", "agent", "node-0", Resources(100, GIB, 1), created=T0)
    parsed = parse_termination_request(request(*IDS[:2], capacity=2))
    clock = VirtualClock(T0 + timedelta(hours=1))
    chooser = TerminationChooser(Groups(), Cluster(nodes, [agent]), clock, drain_hooks=Hooks())
    assert chooser.choose(parsed).instance_ids == (IDS[1],)  # exactly an hour: it stays
    clock.advance(seconds=1)
    assert chooser.choose(parsed).instance_ids == (IDS[1], IDS[0])


def test_given_a_pod_cluster_autoscaler_would_not_move_then_evaluate_protects_its_node() -> None:
    from datetime import UTC, datetime

    from nodescaler.service.cluster_view import KubernetesClusterView

    nodes = [node(0), node(1), node(2)]
    system = Pod("kube-system", "agent", "node-1", Resources(100, GIB, 1))
    cluster = KubernetesClusterView(
        Cluster(nodes, [pod("debug", 0, 500, controlled=False), system])
    )
    group = NodeGroup("web", 3, 0, 10, 3, instance_ids=frozenset(IDS[:3]))
    protected = cluster.protected(group, datetime(2026, 11, 23, 9, tzinfo=UTC))
    assert protected == frozenset({IDS[0], IDS[1]})


# At the boundaries: exactly at a limit, a clock's edge or a count's edge, each test on
# the side its name says.


T = datetime(2026, 3, 2, 12, tzinfo=UTC)


def test_an_ask_exactly_a_quiet_period_after_the_last_continues_the_wait() -> None:
    wait = Wait(T, T)
    assert wait.asked(T + QUIET) == Wait(T, T + QUIET)
    assert wait.asked(T + QUIET + timedelta(seconds=1)) == Wait(
        T + QUIET + timedelta(seconds=1), T + QUIET + timedelta(seconds=1)
    )


def test_an_ask_at_the_first_instant_continues_and_one_before_it_starts_afresh() -> None:
    wait = Wait(T, T + timedelta(minutes=1))
    assert wait.asked(T) == Wait(T, T)
    before = T - timedelta(seconds=1)
    assert wait.asked(before) == Wait(before, before)

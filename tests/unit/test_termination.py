"""The custom termination policy: which instances a scale-in takes, from the cluster; and
every request it cannot act on answered without a guess."""

from __future__ import annotations

from typing import Any

import pytest
from nodescaler.domain.cluster import Node, Pod, Resources, Snapshot
from nodescaler.domain.drainability import DrainRules
from nodescaler.domain.node_group import NodeGroup
from nodescaler.errors import KubernetesUnavailableError, MalformedEventError
from nodescaler.events.termination import parse_termination_request
from nodescaler.service.termination import TerminationChooser

from tests.builders import VirtualClock

GIB = 2**30
IDS = [f"i-0000000000000000{n}" for n in range(6)]


def request(*offered: str, capacity: int = 1, group: str = "web") -> dict[str, Any]:
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
        "Cause": "SCALE_IN",
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


def choose(cluster: Any, offered: list[str], capacity: int, group: str = "web") -> Any:
    parsed = parse_termination_request(request(*offered, capacity=capacity, group=group))
    return TerminationChooser(Groups(), cluster, VirtualClock()).choose(parsed)


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

    from nodescaler.domain.decision import Decision
    from nodescaler.domain.scale_down import Removable
    from nodescaler.service.evaluation import Evaluator

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

    def which_go(cluster: Any, group: NodeGroup = eks) -> tuple[Decision, tuple[str, ...]]:
        evaluator = Evaluator(None, None, None, None, None, cluster=cluster)  # type: ignore[arg-type]
        return evaluator._which_go(group, decision, at)

    two = Removable((IDS[0], IDS[1]), "2 of 3 asked: ...")
    adjusted, removing = which_go(Chosen(two))
    assert (adjusted.desired, removing) == (2, (IDS[0], IDS[1]))
    assert adjusted.reason == "scale down 4 → 1 | 2 of 3 asked: ..."
    held, none = which_go(Chosen(None))  # the cluster cannot say: nothing leaves
    assert (held.desired, none) == (4, ())
    asg = NodeGroup("web", 4, 0, 10, 4)  # a plain ASG: its termination policy chooses
    assert which_go(Chosen(two), asg) == (decision, ())


def test_an_instance_protected_from_scale_in_is_never_chosen_for_an_eks_group() -> None:
    from datetime import UTC, datetime

    from nodescaler.service.kubernetes_metrics import KubernetesMetrics

    nodes = [node(0), node(1), node(2)]
    cluster = KubernetesMetrics(Cluster(nodes, [pod("light", 0, 1500)]))
    group = NodeGroup(
        "web", 3, 0, 10, 3, instance_ids=frozenset(IDS[:3]), protected_ids=frozenset({IDS[2]})
    )
    found = cluster.removable(group, 2, datetime(2026, 11, 23, 9, tzinfo=UTC))
    # 2 is empty, but protected: the empty 1 goes, and 0, whose pod moves onto 2
    assert found is not None and found.instance_ids == (IDS[1], IDS[0])


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
        chooser = TerminationChooser(Groups(), Cluster(nodes, pods), VirtualClock(), rules)
        return chooser.choose(parsed).instance_ids

    assert chosen(DrainRules()) == (IDS[1], IDS[2])  # the empty node, then web's
    assert chosen(DrainRules(skip_nodes_with_local_storage=False)) == (IDS[1], IDS[0])


def test_given_a_pod_cluster_autoscaler_would_not_move_then_evaluate_protects_its_node() -> None:
    from datetime import UTC, datetime

    from nodescaler.service.kubernetes_metrics import KubernetesMetrics

    nodes = [node(0), node(1), node(2)]
    system = Pod("kube-system", "agent", "node-1", Resources(100, GIB, 1))
    cluster = KubernetesMetrics(Cluster(nodes, [pod("debug", 0, 500, controlled=False), system]))
    group = NodeGroup("web", 3, 0, 10, 3, instance_ids=frozenset(IDS[:3]))
    protected = cluster.protected(group, datetime(2026, 11, 23, 9, tzinfo=UTC))
    assert protected == frozenset({IDS[0], IDS[1]})

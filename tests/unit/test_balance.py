"""Balanced similar groups: which groups launch the same node, and how new nodes are split
among them (Cluster Autoscaler's --balance-similar-node-groups)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.cluster.instance_templates import InstanceShape
from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import (
    Node,
    Placement,
    Pod,
    Resources,
    Snapshot,
    Taint,
    Toleration,
)
from nodescaler.domain.groups.node_group import EKS_NODEGROUP_LABEL, NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.scale_down.marks import CANDIDATE_TAINT, ROOM_TAINT
from nodescaler.domain.scale_up.backoff import Backoff
from nodescaler.domain.scale_up.balance import even_split, similar
from nodescaler.domain.scale_up.expanders import (
    BalanceSimilarGroups,
    LeastWasteExpander,
    PriorityExpander,
)
from nodescaler.domain.scale_up.pending_pods_plan import Plan, plan
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler.service.pending_pods import PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import metric, policy

GIB = 2**30
ZONE = "topology.kubernetes.io/zone"
WEB = ("web-a", "web-b", "web-c")
CHAIN = [LeastWasteExpander(), BalanceSimilarGroups()]
# The chain chooses web-a, so a tie in the split goes to it: each case has one answer.
PREFERS_A = [PriorityExpander({10: ["web-a"], 1: [".*"]}), BalanceSimilarGroups()]


def template(group: str, zone: str = "eu-west-1a", **fields: object) -> NodeTemplate:
    base = NodeTemplate(group, Resources(4000, 16 * GIB, 110), {"tier": "web", ZONE: zone})
    return replace(base, **fields)  # type: ignore[arg-type]


def zones() -> dict[str, NodeTemplate]:
    return {g: template(g, f"eu-west-1{g[-1]}") for g in WEB}


def pods(count: int, *, cpu: int = 1000, tolerate: str = "", prefix: str = "web") -> list[Pod]:
    """One-core pods: four fill a node of `template`."""
    placement = Placement(tolerations=(Toleration(tolerate, "Exists"),)) if tolerate else None
    return [
        Pod(
            "default",
            f"{prefix}-{i}",
            None,
            Resources(cpu, GIB, 1),
            "Pending",
            unschedulable=True,
            placement=placement,
        )
        for i in range(count)
    ]


def grown(result: Plan, sizes: dict[str, int]) -> dict[str, int]:
    return {g: sizes.get(g, 0) + result.nodes.get(g, 0) for g in sorted({*sizes, *result.nodes})}


@pytest.mark.parametrize(
    ("case", "sizes", "room", "backed_off", "new", "expected"),
    [
        ("2/0/1 and 6 new level to 3/3/3", {"web-a": 2, "web-b": 0, "web-c": 1}, {}, (), 24,
         {"web-a": 3, "web-b": 3, "web-c": 3}),
        ("one at its maximum: the others take the rest", {"web-a": 2, "web-b": 0, "web-c": 1},
         {"web-b": 1}, (), 24, {"web-a": 4, "web-b": 1, "web-c": 4}),
        ("a group at its maximum takes none", {"web-a": 2, "web-b": 3, "web-c": 1},
         {"web-b": 0}, (), 24, {"web-a": 5, "web-b": 3, "web-c": 4}),
        ("the smallest first", {"web-a": 6, "web-b": 0, "web-c": 1}, {}, (), 12,
         {"web-a": 6, "web-b": 2, "web-c": 2}),
        ("one backed off takes none", {"web-a": 2, "web-b": 0, "web-c": 1}, {}, ("web-b",), 24,
         {"web-a": 5, "web-b": 0, "web-c": 4}),
        ("a plan's rounds count the nodes given before (web-a takes one a round)",
         {"web-a": 2, "web-b": 0, "web-c": 1}, {"web-a": 1}, (), 12,
         {"web-a": 2, "web-b": 2, "web-c": 2}),
        ("7 over three stays within one", {"web-a": 0, "web-b": 0, "web-c": 0}, {}, (), 28,
         {"web-a": 3, "web-b": 2, "web-c": 2}),
    ],
)  # fmt: skip
def test_similar_groups_in_three_zones_grow_to_sizes_within_one_of_each_other(
    case: str,
    sizes: dict[str, int],
    room: dict[str, int],
    backed_off: Sequence[str],
    new: int,
    expected: dict[str, int],
) -> None:
    """Given three groups of one shape in three zones, when `new` one-core pods (four a
    node) are planned with balance last in the chain, then the groups' sizes are as listed."""
    result = plan(
        pods(new), zones(), PREFERS_A, backed_off=frozenset(backed_off), room=room, sizes=sizes
    )
    after = grown(result, sizes)
    assert after == expected, case
    assert result.unplaced == []
    # each group takes the pods its new nodes hold: four a node
    assert {g: len(p) for g, p in result.pods.items() if p} == {
        g: 4 * n for g, n in result.nodes.items() if n
    }


def test_without_balance_the_chain_gives_every_new_node_to_the_one_group_it_chose() -> None:
    result = plan(pods(24), zones(), [LeastWasteExpander()], sizes={"web-a": 2, "web-c": 1})
    assert sorted(result.nodes.values()) == [6] and result.balanced == {}


def test_each_group_of_a_split_names_the_others_and_their_new_nodes() -> None:
    result = plan(pods(24), zones(), CHAIN, sizes={"web-a": 2, "web-b": 0, "web-c": 1})
    assert [result.balanced_with(g) for g in WEB] == [
        "balanced with web-b +3, web-c +2",
        "balanced with web-a +1, web-c +2",
        "balanced with web-a +1, web-b +3",
    ]
    assert plan(pods(4), {"web-a": template("web-a")}, CHAIN).balanced_with("web-a") == ""
    # a group that takes none of the split is not part of it
    uneven = plan(pods(12), zones(), CHAIN, sizes={"web-a": 6, "web-b": 0, "web-c": 1})
    assert [uneven.balanced_with(g) for g in WEB] == [
        "",
        "balanced with web-c +1",
        "balanced with web-b +2",
    ]


@pytest.mark.parametrize(
    ("case", "other", "is_similar"),
    [
        ("labels differing only by zone", template("b", "eu-west-1b"), True),
        ("different EKS node group, zone and hostname labels",
         template("b", "eu-west-1b", labels={"tier": "web", ZONE: "eu-west-1b",
                  EKS_NODEGROUP_LABEL: "web-b", "kubernetes.io/hostname": "ip-1"}), True),
        ("allocatable 4% apart", template("b", allocatable=Resources(3840, 16 * GIB, 110)), True),
        ("DaemonSets' share aside, the node registers the same",
         template("b", allocatable=Resources(3000, 15 * GIB, 100),
                  daemon_sets=Resources(1000, GIB, 10)), True),
        ("soft-tainted for scale-in", template("b", taints=(CANDIDATE_TAINT,)), True),
        ("kept as a buffer's room", template("b", taints=(ROOM_TAINT,)), True),
        ("allocatable CPU 10% apart", template("b", allocatable=Resources(3600, 16 * GIB, 110)),
         False),
        ("memory twice", template("b", allocatable=Resources(4000, 32 * GIB, 110)), False),
        ("pod slots apart", template("b", allocatable=Resources(4000, 16 * GIB, 58)), False),
        ("a GPU the other lacks", template("b", extended={"nvidia.com/gpu": 1}), False),
        ("a different taint", template("b", taints=(Taint("dedicated", "batch"),)), False),
        ("another label value", template("b", labels={"tier": "batch", ZONE: "a"}), False),
        ("a label the other lacks", template("b", labels={"tier": "web", ZONE: "a", "x": "1"}),
         False),
    ],
)  # fmt: skip
def test_similar_groups_launch_the_same_node_zones_and_names_aside(
    case: str, other: NodeTemplate, is_similar: bool
) -> None:
    assert similar(template("a"), other) is is_similar, case
    assert similar(other, template("a")) is is_similar, case  # either way round


def test_an_ignored_label_of_the_settings_makes_groups_similar_again() -> None:
    team = template("b", labels={"tier": "web", ZONE: "b", "team": "blue"})
    assert not similar(template("a"), team)
    assert similar(template("a"), team, frozenset({ZONE, "team"}))


@pytest.mark.parametrize(
    ("case", "other"),
    [
        ("a different taint the pods tolerate", template("web-b", taints=(Taint("spot"),))),
        ("a tenth less CPU", template("web-b", allocatable=Resources(3600, 16 * GIB, 110))),
    ],
)
def test_a_group_that_is_not_similar_takes_no_share_though_the_pods_fit_it(
    case: str, other: NodeTemplate
) -> None:
    templates = {"web-a": template("web-a"), "web-b": other}
    chain = [BalanceSimilarGroups()]
    for seed_pods in (8, 12, 16):  # whichever the random pick chooses, it takes all
        result = plan(pods(seed_pods, tolerate="spot"), templates, chain)
        assert len([n for n in result.nodes.values() if n]) == 1, case
        assert result.balanced == {}


def test_a_similar_group_that_cannot_take_all_the_chosen_pods_takes_no_share() -> None:
    """Cluster Autoscaler balances only among groups that take the same pending pods: web-b
    is chosen for pods of which some select its zone, so web-a and web-c (which could take
    the others) get none of its nodes."""
    selecting = [
        replace(p, placement=Placement(node_selector={ZONE: "eu-west-1b"})) for p in pods(4)
    ]
    plain = pods(4, cpu=900, prefix="plain")
    chain = [PriorityExpander({10: ["web-b"], 1: [".*"]}), BalanceSimilarGroups()]
    result = plan([*selecting, *plain], zones(), chain, sizes={"web-a": 0, "web-b": 5})
    assert dict(result.nodes) == {"web-b": 2}


@pytest.mark.parametrize(
    ("count", "sizes", "room", "first", "expected"),
    [
        (6, {"a": 2, "b": 0, "c": 1}, {}, "a", {"a": 1, "b": 3, "c": 2}),
        (1, {"a": 1, "b": 1}, {}, "b", {"a": 0, "b": 1}),  # a tie: the chain's choice
        (4, {"a": 0, "b": 0}, {"b": 1}, "a", {"a": 3, "b": 1}),
        (5, {"a": 0, "b": 0}, {"a": 1, "b": 2}, "a", {"a": 1, "b": 2}),  # none takes the rest
        (2, {"a": 9, "b": 0}, {"b": None}, "a", {"a": 0, "b": 2}),
    ],
)
def test_even_split_gives_each_node_to_the_smallest_group_with_room(
    count: int,
    sizes: dict[str, int],
    room: dict[str, int | None],
    first: str,
    expected: dict[str, int],
) -> None:
    assert even_split(count, sizes, room, first) == expected


# --- through the pending-pods plan, as each group's evaluation reads it -----------------

NOW = datetime(2026, 11, 23, 9, tzinfo=UTC)
PENDING = metric({"type": "PendingPods"})
ENABLED = {"nodescaler/enabled": "true", "nodescaler/policy": "web"}


class Groups:
    def __init__(self, groups: list[NodeGroup]) -> None:
        self.groups = groups

    def discover(self) -> list[NodeGroup]:
        return self.groups


class M5Xlarge:
    def instance_type(self, group: NodeGroup) -> str:
        return "m5.xlarge"

    def shape(self, instance_type: str) -> InstanceShape:
        return InstanceShape(instance_type, 4, 16384)

    def nodegroup_labels(self, group: NodeGroup) -> None:
        return None


class Backoffs:
    def __init__(self, **until: datetime) -> None:
        self.until = until

    def backoffs(self, groups: Sequence[str]) -> dict[str, Backoff]:
        return {
            g: Backoff(until=t, seconds=300, last_failure=t - timedelta(minutes=5), reason="none")
            for g in groups
            if (t := self.until.get(g)) is not None
        }


class Cluster:
    def __init__(self, snapshot: Snapshot) -> None:
        self.listed = snapshot

    def snapshot(self) -> Snapshot:
        return self.listed


def web_node(group: str, index: int) -> Node:
    """A live m5.xlarge of the group, as EKS registers it in the group's zone."""
    labels = {
        "tier": "web",
        ZONE: f"eu-west-1{group[-1]}",
        EKS_NODEGROUP_LABEL: group,
        "node.kubernetes.io/instance-type": "m5.xlarge",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
    }
    return Node(f"{group}-{index}", None, True, True, Resources(3920, 14 * GIB, 110), labels)


def evaluate_all(sizes: dict[str, int], backoffs: Backoffs | None = None) -> dict[str, str]:
    """Every group's pending-pods reading of one snapshot: 24 one-core pods pending, the
    groups' nodes all Ready (a group at zero read from its instance type and tags)."""
    groups = [
        NodeGroup(
            g,
            sizes[g],
            0,
            10,
            sizes[g],
            tags=ENABLED
            | {
                "k8s.io/cluster-autoscaler/node-template/label/tier": "web",
                f"k8s.io/cluster-autoscaler/node-template/label/{ZONE}": f"eu-west-1{g[-1]}",
            },
            eks_cluster="prod",
            eks_nodegroup=g,
        )
        for g in WEB
    ]
    nodes = tuple(web_node(g, i) for g in WEB for i in range(sizes[g]))
    planner = PendingPodsPlanner(
        Groups(groups),
        PolicyBook({"web": policy(PENDING, name="web")}, TagNames()),
        M5Xlarge(),
        CHAIN,
        backoffs=backoffs,
    )
    # 950m: four on a node, whose 3.92 cores EKS leaves of an m5.xlarge's four
    metrics = KubernetesClusterView(
        Cluster(Snapshot(nodes, tuple(pods(24, cpu=950)))), pending=planner
    )
    readings = {g.name: metrics.read(PENDING, g, NOW) for g in groups}
    assert all(isinstance(r, MetricReading) for r in readings.values())
    return {g: f"{r.value:g}: {r.detail}" for g, r in readings.items()}  # type: ignore[union-attr]


def test_through_the_pending_pods_plan_three_zones_grow_together() -> None:
    """Given web-a, web-b, web-c of one shape in three zones at 2, 0 and 1 nodes (web-b at
    zero, read from its instance type and node-template tags), when 24 one-core pods are
    pending (six nodes), then each group's evaluation asks for its share: 3, 3 and 3 nodes,
    and says whom it was balanced with."""
    readings = evaluate_all({"web-a": 2, "web-b": 0, "web-c": 1})
    assert readings == {
        "web-a": "1: 24 pending pods: +1 nodes here, +5 in other groups "
        "(balanced with web-b +3, web-c +2)",
        "web-b": "3: 24 pending pods: +3 nodes here, +3 in other groups "
        "(balanced with web-a +1, web-c +2)",
        "web-c": "2: 24 pending pods: +2 nodes here, +4 in other groups "
        "(balanced with web-a +1, web-b +3)",
    }


def test_through_the_pending_pods_plan_a_backed_off_zone_is_left_to_the_others() -> None:
    readings = evaluate_all(
        {"web-a": 2, "web-b": 0, "web-c": 1}, Backoffs(**{"web-b": NOW + timedelta(minutes=5)})
    )
    values = {g: int(r.split(":")[0]) for g, r in readings.items()}
    assert values["web-b"] == 0 and values["web-a"] + values["web-c"] == 6
    assert abs((2 + values["web-a"]) - (1 + values["web-c"])) <= 1


# Similar groups at the edges of similar: exactly 5 % apart, and GPUs compared by count.


def test_allocatable_exactly_five_percent_apart_is_similar() -> None:
    assert similar(template("a"), template("b", allocatable=Resources(3800, 16 * GIB, 110)))


def test_groups_with_gpus_are_similar_when_their_counts_are() -> None:
    four = template("a", extended={"nvidia.com/gpu": 4})
    assert similar(four, template("b", extended={"nvidia.com/gpu": 4}))
    assert not similar(four, template("b", extended={"nvidia.com/gpu": 8}))

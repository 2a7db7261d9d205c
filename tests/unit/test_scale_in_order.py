"""The order in which a scale-in (`removable`) and a cause that cannot wait (`least_bad`:
an instance refresh, a maximum lifetime) are offered a group's instances."""

from __future__ import annotations

from nodescaler.domain.cluster.snapshot import DisruptionBudget, Node, Pod, Resources, Snapshot
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.scale_down.leaving import least_bad, removable

from tests.builders import T0

GIB = 2**30
GONE = "i-0000000000000000f"  # an instance that is no node of the cluster
WEB = NodeGroup(
    "web", 3, 0, 10, 3, instance_ids=frozenset({"i-0000000000000000a", "i-0000000000000000b"})
)


def node(name: str, instance: str) -> Node:
    return Node(
        name,
        "web",
        True,
        True,
        Resources(4000, 16 * GIB, 110),
        provider_id=f"aws:///eu-west-1a/{instance}",
    )


def pod(name: str, on: str, cpu: int = 100, **fields: object) -> Pod:
    return Pod(fields.pop("namespace", "default"), name, on, Resources(cpu, GIB, 1), **fields)  # type: ignore[arg-type]


def test_given_an_empty_node_whose_name_sorts_first_an_instance_that_is_no_node_still_goes_first() -> (
    None
):
    # Given an empty node named "aaa" (sorting before any instance id) and an instance no
    # node stands for
    empty = node("aaa", "i-0000000000000000a")
    snapshot = Snapshot((empty,), (), ())
    # When both are offered, the empty node first
    order = least_bad(WEB, ["i-0000000000000000a", GONE], snapshot, now=T0)
    # Then the instance that is no node goes first: taking it harms no pod at all
    assert order == (GONE, "i-0000000000000000a")


def test_given_two_empty_nodes_the_one_with_the_smaller_name_goes_first() -> None:
    # Given two empty nodes, offered in the order b, a
    snapshot = Snapshot((node("b", "i-0000000000000000b"), node("a", "i-0000000000000000a")), ())
    # When ordered, Then the tie is broken by node name, whatever the offer's order
    order = least_bad(WEB, ["i-0000000000000000b", "i-0000000000000000a"], snapshot, now=T0)
    assert order == ("i-0000000000000000a", "i-0000000000000000b")


def test_given_a_budget_covering_a_system_pod_its_node_goes_before_one_a_pod_pins() -> None:
    # Given node "sys" running a heavy kube-system pod a budget covers (one may go now),
    # and node "pin" running a light pod annotated safe-to-evict=false
    sys_node = node("sys", "i-0000000000000000a")
    pin_node = node("pin", "i-0000000000000000b")
    pods = (
        pod("dns", "sys", 3000, namespace="kube-system", labels={"k8s-app": "dns"}),
        pod("pinned", "pin", 100, not_safe_to_evict=True),
    )
    budget = DisruptionBudget("kube-system", "dns", {"k8s-app": "dns"}, disruptions_allowed=1)
    snapshot = Snapshot((sys_node, pin_node), pods, (budget,))
    # When both are offered
    order = least_bad(WEB, ["i-0000000000000000b", "i-0000000000000000a"], snapshot, now=T0)
    # Then the node the budget lets go comes first although its pod is costlier to move:
    # the budget read makes the system pod movable (Cluster Autoscaler FAQ, "What types of
    # pods can prevent CA from removing a node?": kube-system pods without a PDB)
    assert order == ("i-0000000000000000a", "i-0000000000000000b")


def many(count: int) -> tuple[list[str], list[Node]]:
    ids = [f"i-{n:017x}" for n in range(count)]
    return ids, [node(f"n{n:02}", i) for n, i in enumerate(ids)]


def test_given_two_nodes_whose_pods_can_move_a_scale_in_takes_one_at_a_time() -> None:
    # Given two nodes of the group each with one small pod, and room for both pods on a
    # third node of another group
    ids, nodes = many(3)
    pods = (pod("p0", "n00"), pod("p1", "n01"))
    group = NodeGroup("web", 2, 0, 10, 2, instance_ids=frozenset(ids[:2]))
    # When a scale-in asks for two
    chosen = removable(group, ids[:2], 2, Snapshot(tuple(nodes), pods, ()), now=T0).instance_ids
    # Then it gets one: two drains side by side would move pods onto each other
    assert chosen == (ids[0],)


def test_given_a_scale_in_of_twelve_the_nodes_simulated_are_as_many_as_asked() -> None:
    # Given 12 nodes: 11 whose pod a budget holds, and the costliest whose pod may move
    ids, nodes = many(12)
    held = tuple(pod(f"p{n}", f"n{n:02}", labels={"app": "held"}) for n in range(11))
    free = pod("free", "n11", 200)
    budget = DisruptionBudget("default", "held", {"app": "held"}, disruptions_allowed=0)
    group = NodeGroup("web", 12, 0, 20, 12, instance_ids=frozenset(ids))
    # When a scale-in asks for 12 (more than the 10 a call simulates by default)
    snapshot = Snapshot(tuple(nodes), (*held, free), (budget,))
    chosen = removable(group, ids, 12, snapshot, now=T0).instance_ids
    # Then the 12th node is simulated too, and goes
    assert chosen == (ids[11],)

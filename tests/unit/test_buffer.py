"""Capacity buffers: room for N pods of one shape kept free in a group, planned by the
same packing as pending pods, and kept when the group sheds nodes."""

from __future__ import annotations

import pytest
from nodescaler.domain.ahead.group_buffers import buffer_pods, fit_buffer
from nodescaler.domain.cluster.predicates import NodeTemplate, room_of
from nodescaler.domain.cluster.snapshot import Node, Pod, Resources, Snapshot, Taint
from nodescaler.domain.policy import CapacityBuffer
from nodescaler.domain.scale_down.unneeded import BUFFER, unneeded_nodes
from pydantic import ValidationError

from tests.builders import T0

GIB = 2**30
TEMPLATE = NodeTemplate("web", Resources(4000, 16 * GIB, 110))


def buffer(pods: int, cpu: str = "1", memory: str = "2Gi", **fields: object) -> CapacityBuffer:
    return CapacityBuffer.model_validate(
        {"pods": pods, "requests": {"cpu": cpu, "memory": memory}, **fields}
    )


def node(name: str, *, group: str = "web", cpu: int = 4000, **fields: object) -> Node:
    return Node(name, group, True, True, Resources(cpu, 16 * GIB, 110), **fields)  # type: ignore[arg-type]


def pod(name: str, on: str | None, cpu: int = 1000) -> Pod:
    return Pod("default", name, on, Resources(cpu, GIB, 1), unschedulable=on is None)


def rooms(nodes: list[Node], pods: list[Pod]) -> dict[str, NodeTemplate]:
    return {n.name: room_of(n, [p for p in pods if p.node_name == n.name]) for n in nodes}


def test_given_room_on_the_ready_nodes_the_buffer_fits_and_asks_for_nothing() -> None:
    nodes = [node("a"), node("b")]
    pods = [pod("a1", "a"), pod("b1", "b")]  # 3 cores free on each
    fit = fit_buffer([buffer(6)], rooms(nodes, pods), TEMPLATE)
    assert (fit.fit_now, fit.nodes) == (6, 0)
    assert fit.describe() == "buffer: room for 6 × 1 cpu/2Gi: 6 of 6 fit now"


def test_the_buffer_counts_by_packing_not_by_a_sum_of_free_cpu() -> None:
    # 3 × 1.5 cores free: a sum says 4.5 cores for two 2-core pods; packing says one each
    nodes = [node(n) for n in "abc"]
    pods = [pod(f"{n}1", n, 2500) for n in "abc"]
    fit = fit_buffer([buffer(2, cpu="2")], rooms(nodes, pods), TEMPLATE)
    assert (fit.fit_now, fit.nodes) == (0, 1)
    assert fit.describe().endswith("0 of 2 fit now, +1 nodes for the rest")


def test_the_rest_of_the_buffer_is_packed_onto_new_nodes() -> None:
    fit = fit_buffer([buffer(10)], {}, TEMPLATE)  # a group at zero: 4 a node
    assert (fit.fit_now, fit.nodes) == (0, 3)


def test_nodes_on_their_way_hold_the_buffer_after_the_pending_pods_they_take() -> None:
    pending = [pod(f"p{i}", None) for i in range(3)]  # 3 cores of one coming node
    fit = fit_buffer([buffer(2)], {}, TEMPLATE, coming=1, coming_pods=pending)
    assert (fit.fit_now, fit.nodes) == (1, 1)
    fit = fit_buffer([buffer(2)], {}, TEMPLATE, coming=2, coming_pods=pending)
    assert (fit.fit_now, fit.nodes) == (2, 0)


def test_a_buffer_pod_no_node_of_the_group_can_hold_is_named() -> None:
    fit = fit_buffer([buffer(1, cpu="8")], {}, TEMPLATE)
    assert fit.problem == "a buffer pod needs more cpu than a node of the group has"
    tainted = NodeTemplate("gpu", Resources(4000, 16 * GIB, 110), taints=(Taint("gpu", "yes"),))
    assert "does not tolerate taint gpu=yes:NoSchedule" in str(
        fit_buffer([buffer(1)], {}, tainted).problem
    )
    tolerant = buffer(1, tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert fit_buffer([tolerant], {}, tainted).problem is None


def test_selectors_and_extended_resources_of_the_buffer_are_honoured() -> None:
    labelled = node("a", labels={"tier": "web"})
    plain = node("b")
    picky = buffer(4, nodeSelector={"tier": "web"})
    assert "nodeSelector tier=web" in str(fit_buffer([picky], {}, TEMPLATE).problem)
    web = NodeTemplate("web", Resources(4000, 16 * GIB, 110), labels={"tier": "web"})
    fit = fit_buffer([picky], rooms([labelled, plain], []), web)
    assert (fit.fit_now, fit.nodes) == (4, 0)
    fit = fit_buffer([picky], rooms([plain], []), web)  # room, but not where it may run
    assert (fit.fit_now, fit.nodes) == (0, 1)
    gpu = CapacityBuffer.model_validate({"pods": 2, "requests": {"cpu": "1", "nvidia.com/gpu": 1}})
    assert buffer_pods([gpu])[0].placement.extended_resources == {"nvidia.com/gpu": 1}  # type: ignore[union-attr]
    with_gpus = NodeTemplate("g", Resources(4000, 16 * GIB, 110), extended={"nvidia.com/gpu": 1})
    assert fit_buffer([gpu], {}, with_gpus).nodes == 2  # one GPU a node


def test_a_node_goes_only_if_the_buffer_still_fits_on_the_nodes_that_stay() -> None:
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod("a1", "a", 3000), pod("b1", "b", 3000)]  # c empty: 1 + 1 + 4 cores free
    snapshot = Snapshot(tuple(nodes), tuple(pods))
    assert unneeded_nodes(nodes, snapshot, now=T0).nodes == ("c",)
    spare = unneeded_nodes(nodes, snapshot, buffer=buffer_pods([buffer(3)]), now=T0)
    assert spare.nodes == ()
    assert [(k.node, k.why) for k in spare.kept] == [("c", BUFFER)]  # a, b: 75 % requested
    assert "c kept: capacity-buffer" in spare.describe()
    # room for two: the empty node still goes, the pods' 1 + 1 cores hold the buffer
    assert unneeded_nodes(nodes, snapshot, buffer=buffer_pods([buffer(2)]), now=T0).nodes == ("c",)


def test_only_the_groups_own_nodes_hold_its_buffer() -> None:
    nodes = [node("a"), node("other", group="batch")]
    snapshot = Snapshot(tuple(nodes), ())
    mine = [nodes[0]]
    assert unneeded_nodes(mine, snapshot, buffer=buffer_pods([buffer(1)]), now=T0).nodes == ()


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"pods": 0, "requests": {"cpu": "1"}}, "greater than or equal to 1"),
        ({"pods": "3", "requests": {"cpu": "1"}}, "valid integer"),
        ({"pods": 3, "requests": {"cpu": "one"}}, "cpu: 'one' is not a quantity"),
        ({"pods": 3, "requests": {"cpu": "-1"}}, "cpu: '-1' is negative"),
        ({"pods": 3, "requests": {"cpu": True}}, "requests.cpu"),
        ({"pods": 3, "requests": {"cpu": -1}}, "cpu: -1 is negative"),
        ({"pods": 3, "requests": {"memory": float("nan")}}, "memory: nan is not a quantity"),
        ({"pods": 3, "requests": {"memory": float("inf")}}, "memory: inf is not a quantity"),
        ({"pods": 3, "requests": {"disk": "1Gi"}}, "'disk': a buffer's pods request cpu"),
        ({"pods": 3, "requests": {"cpu": "0", "memory": 0}}, "requests nothing"),
        ({"pods": 3, "requests": {}}, "at least 1 item"),
        ({"pods": 3, "requests": {"cpu": "1"}, "tolerations": [{"operator": "Maybe"}]}, "Equal"),
        ({"pods": 3, "requests": {"cpu": "1"}, "spare": 2}, "Extra inputs are not permitted"),
    ],
)
def test_a_malformed_buffer_is_refused_naming_the_field(
    fields: dict[str, object], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        CapacityBuffer.model_validate(fields)


def test_nodes_for_counts_what_one_shape_leaves_over_and_what_the_sum_fills() -> None:
    from nodescaler.domain.cluster.predicates import nodes_for

    six_cores = [pod(f"p{i}", "a", 6000) for i in range(10)]  # two a 16-core node
    sixteen = NodeTemplate("web", Resources(16_000, 64 * GIB, 110))
    assert nodes_for(six_cores, sixteen) == 5  # the sum alone would say 4
    mixed = [pod(f"s{i}", "a", 1000) for i in range(20)] + [pod("b", "a", 15_000)]
    assert nodes_for(mixed, sixteen) == 3  # 35 cores: the sum decides
    assert nodes_for([], sixteen) == 0


def test_given_an_equal_toleration_with_key_and_value_the_buffer_fits_a_tainted_group() -> None:
    # Given a group whose nodes are tainted dedicated=batch:NoSchedule
    batch = Taint("dedicated", "batch")
    tainted = NodeTemplate("batch", Resources(4000, 16 * GIB, 110), taints=(batch,))
    equal = {"key": "dedicated", "operator": "Equal", "value": "batch"}
    # When the buffer tolerates exactly that taint, Then its pods fit
    fit = fit_buffer([buffer(1, tolerations=[{**equal, "effect": "NoSchedule"}])], {}, tainted)
    assert (fit.problem, fit.nodes) == (None, 1)
    # and when it tolerates the taint for another effect only, Then no node can hold it
    wrong = buffer(1, tolerations=[{**equal, "effect": "NoExecute"}])
    assert "does not tolerate taint dedicated=batch" in str(
        fit_buffer([wrong], {}, tainted).problem
    )


def test_given_a_buffer_pod_larger_in_memory_than_a_node_the_problem_says_so() -> None:
    # Given pods of 20Gi and nodes of 16Gi, When fitted
    fit = fit_buffer([buffer(3, memory="20Gi")], {}, TEMPLATE)
    # Then nothing fits and no node is asked for, and the summary names why
    assert (fit.pods, fit.fit_now, fit.nodes) == (3, 0, 0)
    assert fit.describe() == (
        "buffer: room for 3 × 1 cpu/20Gi: a buffer pod needs more memory than a node of the "
        "group has"
    )


def test_each_buffer_pod_takes_one_pod_slot_of_its_node() -> None:
    # Given nodes that run at most 3 pods, When a buffer of 4 small pods is fitted
    few_slots = NodeTemplate("web", Resources(4000, 16 * GIB, 3))
    fit = fit_buffer([buffer(4, cpu="100m", memory="128Mi")], {}, few_slots)
    # Then it needs two nodes: the pod slots run out before cpu or memory
    assert fit.nodes == 2


def test_the_buffer_pods_are_distinct_pods_of_the_buffer_namespace() -> None:
    # Given two buffers, When they become virtual pods
    pods = buffer_pods([buffer(2), buffer(1, cpu="2")])
    # Then each is its own pod in a namespace no real pod uses
    assert {(p.namespace, p.name) for p in pods} == {
        ("nodescaler-buffer", "buffer-0-0"),
        ("nodescaler-buffer", "buffer-0-1"),
        ("nodescaler-buffer", "buffer-1-0"),
    }


def test_the_summary_of_two_buffers_names_each() -> None:
    fit = fit_buffer([buffer(2), buffer(1, cpu="2")], {}, TEMPLATE)
    assert fit.text == "room for 2 × 1 cpu/2Gi, room for 1 × 2 cpu/2Gi"


def test_nodes_on_their_way_add_to_the_room_of_the_ready_nodes() -> None:
    # Given one Ready node with room for 3 and one node on its way with room for 4
    ready = rooms([node("a")], [pod("a1", "a")])
    # When a buffer of 7 is fitted, Then all 7 fit now: neither room is forgotten
    fit = fit_buffer([buffer(7)], ready, TEMPLATE, coming=1)
    assert (fit.fit_now, fit.nodes) == (7, 0)


def test_buffer_holds_only_while_all_its_pods_fit_the_rooms() -> None:
    from nodescaler.domain.ahead.group_buffers import buffer_holds

    # Given two nodes with 3 cores free each
    free = rooms([node("a"), node("b")], [pod("a1", "a"), pod("b1", "b")])
    # When the buffer asks for 6 single-core pods, Then it holds; for 7, it does not
    assert buffer_holds(buffer_pods([buffer(6)]), free)
    assert not buffer_holds(buffer_pods([buffer(7)]), free)


# At the edge: a buffer of extended resources names them.


def test_a_buffer_of_extended_resources_names_them() -> None:
    gpus = buffer(2, **{"requests": {"cpu": "1", "nvidia.com/gpu": "1"}})
    assert gpus.describe() == "room for 2 × 1 cpu/1 nvidia.com/gpu"

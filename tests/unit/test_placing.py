"""Moving pods onto the free room of existing nodes (`place`, `room_of`) and estimating
the new nodes pods need in one pass (`nodes_for`)."""

from __future__ import annotations

from nodescaler.domain.cluster.predicates import (
    NodeTemplate,
    nodes_and_share,
    nodes_for,
    place,
    room_of,
)
from nodescaler.domain.cluster.snapshot import Node, Placement, Pod, Resources

GIB = 2**30
GPU = "nvidia.com/gpu"
SIXTEEN = NodeTemplate("web", Resources(16_000, 16 * GIB, 110))


def pod(
    name: str, cpu: int = 100, memory: int = GIB, gpus: int | None = None, **fields: object
) -> Pod:
    placement = Placement(extended_resources={GPU: gpus}) if gpus is not None else None
    return Pod("default", name, None, Resources(cpu, memory, 1), placement=placement, **fields)  # type: ignore[arg-type]


def room(cpu: int, memory: int = 16 * GIB, gpus: int = 0) -> NodeTemplate:
    return NodeTemplate("web", Resources(cpu, memory, 110), extended={GPU: gpus} if gpus else {})


def test_given_rooms_of_unequal_size_a_pod_goes_to_the_one_with_most_room() -> None:
    # Given node a with 1 core free and b with 3, When one small pod is placed
    changed, stranded = place([pod("p")], {"a": room(1000), "b": room(3000)})
    # Then it lands on b, the emptier node, as the scheduler spreads by free room
    assert (list(changed), stranded) == (["b"], [])


def test_the_largest_pods_are_placed_first_so_both_fit() -> None:
    # Given rooms of 2 and 1 cores, When pods of 1.5 and 1 core are placed
    changed, stranded = place(
        [pod("small", 1000), pod("big", 1500)], {"x": room(2000), "y": room(1000)}
    )
    # Then both fit: the big one on x first, the small one on y
    assert stranded == []
    assert changed["y"].allocatable.cpu_millis == 0


def test_among_pods_of_equal_cpu_the_one_with_more_memory_is_placed_first() -> None:
    # Given x (more cpu, 7Gi free) and y (4Gi free), When pods of 6Gi and 4Gi are placed
    rooms = {"x": room(2000, 7 * GIB), "y": room(1000, 4 * GIB)}
    _, stranded = place([pod("four", memory=4 * GIB), pod("six", memory=6 * GIB)], rooms)
    # Then both fit: 6Gi on x, 4Gi on y
    assert stranded == []


def test_gpu_pods_use_up_the_gpus_of_the_nodes_they_are_placed_on() -> None:
    # Given one node with 2 GPUs and one with 1, When four one-GPU pods are placed
    rooms = {"a": room(4000, gpus=2), "b": room(3000, gpus=1)}
    changed, stranded = place([pod(f"g{n}", gpus=1) for n in range(4)], rooms)
    # Then three fit, one a GPU, and the fourth has nowhere to go
    assert len(stranded) == 1
    assert {k: r.extended[GPU] for k, r in changed.items()} == {"a": 0, "b": 0}


def test_a_pod_asking_for_no_gpu_gives_its_node_none() -> None:
    # Given a node without GPUs, When a pod requesting 0 GPUs (large) and one requesting 1
    # are placed
    changed, stranded = place([pod("none", 2000, gpus=0), pod("one", gpus=1)], {"a": room(4000)})
    # Then the GPU pod is stranded: the first pod did not give the node a GPU
    assert [p.name for p in stranded] == ["one"]
    assert changed["a"].extended == {GPU: 0}


def node(gpus: int = 0, group: str | None = "web") -> Node:
    extended = {GPU: gpus} if gpus else {}
    return Node("a", group, True, True, Resources(4000, 16 * GIB, 110), extended=extended)  # type: ignore[arg-type]


def test_the_room_of_a_node_is_what_its_running_pods_leave_finished_ones_take_nothing() -> None:
    # Given a node whose first pod has finished and whose second runs, with a GPU of two
    pods = [pod("done", 1000, phase="Succeeded"), pod("runs", 1000, gpus=1)]
    # When its room is read
    free = room_of(node(gpus=2), pods)
    # Then only the running pod's core and GPU are taken, and the room names its node
    assert (free.allocatable.cpu_millis, free.extended) == (3000, {GPU: 1})
    assert free.source == "node a"


def test_a_pod_asking_for_no_gpu_leaves_a_node_without_gpus_without_any() -> None:
    free = room_of(node(), [pod("none", gpus=0)])
    assert free.extended == {GPU: 0}
    assert place([pod("one", gpus=1)], {"a": free})[1] != []


def test_the_room_of_a_node_of_no_group_belongs_to_no_group() -> None:
    assert room_of(node(group=None), []).group == ""


def test_nodes_for_counts_memory_summed_over_shapes() -> None:
    # Given two shapes of 5 pods × 3Gi each: one node each alone, 30Gi together
    pods = [pod(f"a{n}", 100, 3 * GIB) for n in range(5)] + [
        pod(f"b{n}", 200, 3 * GIB) for n in range(5)
    ]
    # When counted on 16Gi nodes, Then two nodes
    assert nodes_for(pods, SIXTEEN) == 2


def test_nodes_for_counts_pod_slots_summed_over_shapes() -> None:
    ten_slots = NodeTemplate("web", Resources(16_000, 16 * GIB, 10))
    pods = [pod(f"a{n}", 100) for n in range(6)] + [pod(f"b{n}", 200) for n in range(6)]
    assert nodes_for(pods, ten_slots) == 2


def test_nodes_for_counts_the_memory_one_shape_leaves_over() -> None:
    # Given 3 pods of 9Gi: one a 16Gi node, though their sum (27Gi) says two
    assert nodes_for([pod(f"p{n}", 100, 9 * GIB) for n in range(3)], SIXTEEN) == 3


def test_the_share_is_the_need_before_it_rounds_up_to_whole_nodes() -> None:
    # Given 60 pods of two cores on 16-core nodes: seven and a half nodes' worth
    pods = [pod(f"p{n}", 2_000) for n in range(60)]
    assert nodes_and_share(pods, SIXTEEN) == (nodes_for(pods, SIXTEEN), 7.5) == (8, 7.5)
    # a shape that leaves room over counts by its own packing: 3 of 9Gi, one a node
    three = [pod(f"m{n}", 100, 9 * GIB) for n in range(3)]
    assert nodes_and_share(three, SIXTEEN)[1] == 3.0
    assert nodes_and_share([], SIXTEEN)[1] == 0.0


def test_nodes_for_rounds_a_shapes_count_up_to_whole_nodes() -> None:
    # Given 5 pods of 6 cores: two a 16-core node, so three nodes (not 2.5)
    count = nodes_for([pod(f"p{n}", 6000) for n in range(5)], SIXTEEN)
    assert (count, type(count)) == (3, int)


def test_nodes_for_sizes_pods_requesting_only_memory_or_only_cpu() -> None:
    # Given pods with no cpu request, and pods with no memory request
    memory_only = [pod(f"m{n}", 0, 4 * GIB) for n in range(8)]
    cpu_only = [pod(f"c{n}", 4000, 0) for n in range(8)]
    # When counted, Then each set needs two 16-core/16Gi nodes
    assert (nodes_for(memory_only, SIXTEEN), nodes_for(cpu_only, SIXTEEN)) == (2, 2)


def test_nodes_for_a_template_with_no_memory_known_counts_a_node_a_pod() -> None:
    # Given a group at zero whose instance type leaves no memory after EKS's reserve
    # (`template_from_instance_type` floors it at 0), When 3 pods are counted
    no_memory = NodeTemplate("tiny", Resources(2000, 0, 4))
    # Then the estimate is a node a pod, not a division by zero
    assert nodes_for([pod(f"p{n}") for n in range(3)], no_memory) == 3

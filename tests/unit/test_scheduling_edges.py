"""The scheduling edges: which live node a group's template copies (and what its DaemonSets
take), packing when extended resources differ or the nodes run out, a node with no pod
slot left, and a group whose EKS node group names only labels."""

from __future__ import annotations

from nodescaler.domain.cluster.predicates import (
    InstanceShape,
    NodegroupLabels,
    NodeTemplate,
    live_template,
    nodes_for,
    nodes_needed,
    pack,
    template_from_instance_type,
    why_not,
)
from nodescaler.domain.cluster.snapshot import Node, Placement, Pod, Resources
from nodescaler.domain.groups.node_group import NodeGroup

GIB = 2**30
GPU, FPGA = "nvidia.com/gpu", "example.com/fpga"


def node(name: str, instance: str, *, ready: bool = True, schedulable: bool = True) -> Node:
    return Node(
        name,
        "web",
        ready,
        schedulable,
        Resources(4000, 16 * GIB, 110),
        labels={"kubernetes.io/hostname": name, "team": "web"},
        provider_id=f"aws:///us-east-1a/{instance}",
        extended={GPU: 1},
    )


def pod(name: str, requests: Resources, **kinds: object) -> Pod:
    return Pod("kube-system", name, "d-live", requests, **kinds)  # type: ignore[arg-type]


def test_a_live_template_copies_the_first_ready_schedulable_node_of_the_group() -> None:
    # Given, by name: a node not ready, one cordoned, one of another group, then two live
    group = NodeGroup("web", 2, 0, 5, 2, instance_ids=frozenset({"i-1", "i-2", "i-4", "i-5"}))
    nodes = [
        node("e-live", "i-5"),
        node("a-not-ready", "i-1", ready=False),
        node("b-cordoned", "i-2", schedulable=False),
        node("c-other-group", "i-3"),
        node("d-live", "i-4"),
    ]
    # and on d-live: a DaemonSet pod, a finished DaemonSet pod, and an application pod
    daemon = Resources(200, GIB, 1)
    pods = {
        "d-live": [
            pod("agent", daemon, daemon_set=True),
            pod("done", Resources(300, GIB, 1), daemon_set=True, phase="Succeeded"),
            pod("app", Resources(1000, GIB, 1)),
        ],
        "e-live": [pod("other-agent", Resources(900, GIB, 1), daemon_set=True)],
    }
    # When its template is made
    template = live_template(group, nodes, pods)
    # Then it is d-live, less the running DaemonSet pod's requests alone
    assert template == NodeTemplate(
        "web",
        Resources(3800, 15 * GIB, 109),
        {"team": "web"},
        (),
        "node d-live",
        {GPU: 1},
        daemon_sets=daemon,
    )


def test_a_group_with_no_live_node_has_no_live_template() -> None:
    group = NodeGroup("web", 1, 0, 5, 1, instance_ids=frozenset({"i-1"}))
    assert live_template(group, [node("a", "i-1", ready=False)], {}) is None


def test_a_pod_not_asking_for_an_extended_resource_leaves_it_to_the_next() -> None:
    # Given a node with two GPUs and one FPGA: a pod asking a GPU, then one asking the FPGA
    template = NodeTemplate("ml", Resources(8000, 32 * GIB, 110), extended={GPU: 2, FPGA: 1})
    pods = [
        Pod(
            "ml",
            "gpu",
            None,
            Resources(2000, GIB, 1),
            placement=Placement(extended_resources={GPU: 1}),
        ),
        Pod(
            "ml",
            "fpga",
            None,
            Resources(1000, GIB, 1),
            placement=Placement(extended_resources={FPGA: 1}),
        ),
    ]
    # Then both share one node: the GPU pod took no FPGA
    assert nodes_needed(pods, template) == 1


def test_pods_asking_zero_of_a_resource_the_node_lacks_pack_as_if_they_asked_none() -> None:
    template = NodeTemplate("web", Resources(8000, 32 * GIB, 110))
    zero = Placement(extended_resources={GPU: 0})
    pods = [Pod("web", f"p{i}", None, Resources(1000, GIB, 1), placement=zero) for i in range(3)]
    assert all(why_not(p, template) is None for p in pods)
    assert nodes_needed(pods, template) == 1


def test_with_the_nodes_used_up_a_smaller_pod_still_takes_the_room_left() -> None:
    # Given one node of 4 cores at most, and pods of 3, 2 and 1 cores
    template = NodeTemplate("web", Resources(4000, 32 * GIB, 110))
    big, middle, small = (
        Pod("web", name, None, Resources(cpu, GIB, 1))
        for name, cpu in (("big", 3000), ("middle", 2000), ("small", 1000))
    )
    # Then the 2-core pod is left out, and the 1-core pod goes beside the 3-core one
    assert pack([small, middle, big], template, max_nodes=1) == (1, (big, small))


def test_a_node_holding_one_pod_takes_one_pod_whatever_their_shapes() -> None:
    template = NodeTemplate("web", Resources(64000, 256 * GIB, 1))
    pods = [
        Pod("web", "a", None, Resources(100, GIB, 1)),
        Pod("web", "b", None, Resources(200, GIB, 1)),
    ]
    assert nodes_for(pods, template) == 2


def test_a_node_with_no_pod_slot_left_says_so() -> None:
    full = NodeTemplate("web", Resources(4000, 16 * GIB, 0))
    pending = Pod("web", "p", None, Resources(100, GIB, 1))
    assert why_not(pending, full) == "needs more pods than a node of the group has"


def test_an_eks_node_group_naming_only_labels_is_named_as_a_source() -> None:
    template = template_from_instance_type(
        "ml", InstanceShape("g5.xlarge", 4, 16384), {}, {}, NodegroupLabels({"team": "ml"})
    )
    assert template.source == "instance type g5.xlarge, its EKS node group and its tags"
    assert template.labels["team"] == "ml"

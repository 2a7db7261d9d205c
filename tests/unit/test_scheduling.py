"""Would a pending pod fit a new node of the group? One table per predicate, then packing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from nodescaler.domain.cluster.instance_templates import (
    InstanceShape,
    NodegroupLabels,
    reserved_cpu_millis,
    template_from_instance_type,
)
from nodescaler.domain.cluster.predicates import (
    NodeTemplate,
    live_template,
    nodes_for,
    nodes_needed,
    pack,
    pending,
    place,
    room_of,
    why_not,
)
from nodescaler.domain.cluster.snapshot import (
    Node,
    Placement,
    Pod,
    Requirement,
    Resources,
    Taint,
    Toleration,
)
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.errors import QuantityError

GIB = 2**30
TEMPLATE = NodeTemplate(
    "gpu",
    Resources(16000, 20 * GIB, 110),
    labels={"node.kubernetes.io/instance-type": "g5.4xlarge", "gpu": "a10", "cores": "16"},
    taints=(Taint("nvidia.com/gpu", "true", "NoSchedule"), Taint("soft", "", "PreferNoSchedule")),
)
TOLERATES_GPU = (Toleration("nvidia.com/gpu", "Exists"),)


def pending_pod(cpu: int = 1000, memory: int = GIB, **placement: object) -> Pod:
    defaults: dict[str, object] = {"tolerations": TOLERATES_GPU}
    return Pod(
        "default",
        "p",
        None,
        Resources(cpu, memory, 1),
        phase="Pending",
        unschedulable=True,
        placement=Placement(**(defaults | placement)),  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("pod", "reason"),
    [
        (pending_pod(), None),
        (pending_pod(cpu=17000), "needs more cpu than a node of the group has"),
        (pending_pod(memory=21 * GIB), "needs more memory than a node of the group has"),
    ],
)
def test_resources(pod: Pod, reason: str | None) -> None:
    assert why_not(pod, TEMPLATE) == reason


@pytest.mark.parametrize(
    ("selector", "fits"),
    [({}, True), ({"gpu": "a10"}, True), ({"gpu": "h100"}, False), ({"zone": "a"}, False)],
)
def test_node_selector(selector: dict[str, str], fits: bool) -> None:
    assert (why_not(pending_pod(node_selector=selector), TEMPLATE) is None) is fits


@pytest.mark.parametrize(
    ("requirement", "fits"),
    [
        (Requirement("gpu", "In", ("a10", "a100")), True),
        (Requirement("gpu", "In", ("h100",)), False),
        (Requirement("gpu", "NotIn", ("h100",)), True),
        (Requirement("gpu", "NotIn", ("a10",)), False),
        (Requirement("gpu", "Exists"), True),
        (Requirement("spot", "Exists"), False),
        (Requirement("spot", "DoesNotExist"), True),
        (Requirement("gpu", "DoesNotExist"), False),
        (Requirement("cores", "Gt", ("8",)), True),
        (Requirement("cores", "Gt", ("16",)), False),
        (Requirement("cores", "Lt", ("32",)), True),
        (Requirement("cores", "Lt", ("16",)), False),
        (Requirement("gpu", "Gt", ("1",)), False),  # not a number: no match
    ],
)
def test_required_node_affinity_operators(requirement: Requirement, fits: bool) -> None:
    pod = pending_pod(required_terms=((requirement,),))
    assert (why_not(pod, TEMPLATE) is None) is fits


def test_affinity_terms_are_ored_and_their_requirements_anded() -> None:
    no = (Requirement("gpu", "In", ("h100",)),)
    yes = (Requirement("gpu", "In", ("a10",)), Requirement("cores", "Gt", ("4",)))
    half = (Requirement("gpu", "In", ("a10",)), Requirement("spot", "Exists"))
    assert why_not(pending_pod(required_terms=(no, yes)), TEMPLATE) is None
    assert why_not(pending_pod(required_terms=(no, half)), TEMPLATE) == (
        "required node affinity does not match"
    )


@pytest.mark.parametrize(
    ("tolerations", "fits"),
    [
        ((), False),
        ((Toleration("nvidia.com/gpu", "Exists"),), True),
        ((Toleration("nvidia.com/gpu", "Equal", "true"),), True),
        ((Toleration("nvidia.com/gpu", "Equal", "false"),), False),
        ((Toleration("nvidia.com/gpu", "Exists", effect="NoExecute"),), False),
        ((Toleration("", "Exists"),), True),  # tolerates everything
    ],
)
def test_taints_and_tolerations(tolerations: tuple[Toleration, ...], fits: bool) -> None:
    pod = pending_pod(tolerations=tolerations)
    result = why_not(pod, TEMPLATE)
    assert (result is None) is fits
    if not fits:
        assert result == "does not tolerate taint nvidia.com/gpu=true:NoSchedule"


def test_first_fit_decreasing_packs_big_pods_first() -> None:
    template = NodeTemplate("ng", Resources(4000, 16 * GIB, 110))
    pods = [pending_pod(cpu=c) for c in (3000, 1000, 3000, 1000, 2000, 2000)]  # 12 cores
    assert nodes_needed(pods, template) == 3
    small = [pending_pod(cpu=100, memory=2**20) for _ in range(50)]
    assert nodes_needed(small, template) == 2  # 5 cores at 4 a node
    slots = NodeTemplate("ng", Resources(64000, 256 * GIB, 10))
    assert nodes_needed([pending_pod(cpu=10) for _ in range(25)], slots) == 3  # 10 pods a node


def test_pods_that_may_share_no_node_take_a_new_node_each_and_others_fill_the_room() -> None:
    # Given five replicas spread one a node (or asking one host port), and small pods
    template = NodeTemplate("ng", Resources(16000, 64 * GIB, 110))
    for key in ("anti-affinity default/zk", "host port TCP/9100"):
        spread = [pending_pod(cpu=500, apart=frozenset({key})) for _ in range(5)]
        small = [pending_pod(cpu=500) for _ in range(10)]
        # Then they need five nodes, which the others share, where without it one would do
        assert nodes_needed(spread, template) == 5
        assert nodes_needed([*spread, *small], template) == 5
        assert nodes_for([*spread, *small], template) == 5
        assert nodes_needed([replace(p, placement=Placement()) for p in spread], template) == 1
        # and a node holding one already takes none of them
        held = replace(template, holding=frozenset({key}))
        assert why_not(spread[0], held) == f"may not share a node with the pods there ({key})"
        assert why_not(small[0], held) is None


def test_expendable_pods_below_the_cutoff_wait() -> None:
    keep = Pod("d", "a", None, Resources(), unschedulable=True, priority=-10)
    drop = Pod("d", "b", None, Resources(), unschedulable=True, priority=-11)
    bound = Pod("d", "c", "n1", Resources())
    assert pending([keep, drop, bound], expendable_priority_cutoff=-10) == [keep]


def test_a_daemon_sets_pod_waiting_for_its_node_asks_no_new_node() -> None:
    # Cluster Autoscaler's filter_out_daemon_sets: it is made for one node, full now
    agent = Pod("kube-system", "agent", None, Resources(), unschedulable=True, daemon_set=True)
    web = Pod("d", "web", None, Resources(), unschedulable=True)
    assert pending([agent, web], expendable_priority_cutoff=-10) == [web]


def test_a_template_from_a_live_node_drops_its_name_and_daemon_set_share() -> None:
    node = Node(
        "ip-1",
        "ng",
        ready=True,
        schedulable=True,
        allocatable=Resources(4000, 16 * GIB, 110),
        labels={"kubernetes.io/hostname": "ip-1", "team": "web"},
        taints=(Taint("dedicated", "web", "NoSchedule"),),
        extended={"nvidia.com/gpu": 1},
    )
    template = NodeTemplate.from_node("web-asg", node, daemon_sets=Resources(500, GIB, 3))
    assert template == NodeTemplate(
        "web-asg",
        Resources(3500, 15 * GIB, 107),
        {"team": "web"},
        (Taint("dedicated", "web", "NoSchedule"),),
        "node ip-1",
        {"nvidia.com/gpu": 1},
        daemon_sets=Resources(500, GIB, 3),  # kept: similar groups compare what nodes register
    )


def test_a_template_for_a_group_at_zero_comes_from_its_instance_type_and_tags() -> None:
    tags = {
        "k8s.io/cluster-autoscaler/node-template/label/workload": "batch",
        "k8s.io/cluster-autoscaler/node-template/taint/dedicated": "batch:NoSchedule",
        "k8s.io/cluster-autoscaler/node-template/resources/pods": "58",
        "unrelated": "x",
    }
    template = template_from_instance_type(
        "batch-ng",
        InstanceShape("m6g.4xlarge", 16, 65536, "arm64"),
        tags,
        {"eks.amazonaws.com/nodegroup": "batch"},
    )
    assert template.labels == {
        "node.kubernetes.io/instance-type": "m6g.4xlarge",
        "kubernetes.io/arch": "arm64",
        "kubernetes.io/os": "linux",
        "eks.amazonaws.com/nodegroup": "batch",
        "workload": "batch",
    }
    assert template.taints == (Taint("dedicated", "batch", "NoSchedule"),)
    # 16 cores less EKS's kube-reserved; 64 GiB less 255 + 11 × 58 MiB and 100 MiB eviction
    assert template.allocatable == Resources(16000 - 110, (65536 - 893 - 100) * 2**20, 58)
    assert reserved_cpu_millis(1) == 60 and reserved_cpu_millis(4) == 80


def test_a_managed_node_groups_labels_and_taints_yield_to_tags_of_the_same_key() -> None:
    # Given EKS says accelerator=a10 with a NoSchedule GPU taint and a "team" taint, and the
    # ASG's node-template tags say accelerator=t4 and NoExecute for the GPU taint
    managed = NodegroupLabels(
        {"accelerator": "a10", "zone-class": "fast"},
        (Taint("nvidia.com/gpu", "true", "NoSchedule"), Taint("team", "ml", "NoSchedule")),
    )
    tags = {
        "k8s.io/cluster-autoscaler/node-template/label/accelerator": "t4",
        "k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu": "true:NoExecute",
    }
    template = template_from_instance_type(
        "gpu", InstanceShape("g5.xlarge", 4, 16384), tags, {}, managed
    )
    # Then each tag wins its key, and what only EKS says is kept (Cluster Autoscaler's
    # managed node group cache: the ASG tag's value is kept for a duplicate key)
    assert (template.labels["accelerator"], template.labels["zone-class"]) == ("t4", "fast")
    assert sorted(template.taints, key=lambda t: t.key) == [
        Taint("nvidia.com/gpu", "true", "NoExecute"),
        Taint("team", "ml", "NoSchedule"),
    ]
    assert template.source == "instance type g5.xlarge, its EKS node group and its tags"


def test_a_malformed_template_tag_is_refused() -> None:
    with pytest.raises(QuantityError):
        template_from_instance_type(
            "ng",
            InstanceShape("m5.large", 2, 8192),
            {"k8s.io/cluster-autoscaler/node-template/resources/memory": "lots"},
            {},
        )


def gpu_pod(gpus: int = 1) -> Pod:
    return Pod(
        "ml",
        "train",
        None,
        Resources(1000, GIB, 1),
        unschedulable=True,
        placement=Placement(tolerations=TOLERATES_GPU, extended_resources={"nvidia.com/gpu": gpus}),
    )


def test_a_pod_needing_a_gpu_fits_only_a_node_that_has_one() -> None:
    assert why_not(gpu_pod(), TEMPLATE) == "needs more nvidia.com/gpu than a node of the group has"
    with_gpus = NodeTemplate(
        "gpu",
        TEMPLATE.allocatable,
        TEMPLATE.labels,
        TEMPLATE.taints,
        extended={"nvidia.com/gpu": 4},
    )
    assert why_not(gpu_pod(4), with_gpus) is None
    assert (
        why_not(gpu_pod(5), with_gpus) == "needs more nvidia.com/gpu than a node of the group has"
    )


def test_packing_counts_gpus_too() -> None:
    two_gpus = NodeTemplate("gpu", Resources(64000, 256 * GIB, 110), extended={"nvidia.com/gpu": 2})
    assert nodes_needed([gpu_pod() for _ in range(5)], two_gpus) == 3  # cpu would fit one


def test_a_gpu_instance_type_at_zero_offers_its_gpus_and_tags_can_add_resources() -> None:
    template = template_from_instance_type(
        "gpu-ng",
        InstanceShape("g5.xlarge", 4, 16384, "amd64", nvidia_gpus=1),
        {"k8s.io/cluster-autoscaler/node-template/resources/example.com/fpga": "2"},
        {},
    )
    assert template.extended == {"nvidia.com/gpu": 1, "example.com/fpga": 2}


def test_pods_whose_requests_cannot_be_read_are_not_planned_for() -> None:
    broken = Pod("d", "x", None, Resources(pods=1), unschedulable=True, problem="bad quantity")
    assert pending([broken], expendable_priority_cutoff=-10) == []


TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template/"


def test_resource_tags_override_what_the_instance_type_gives_and_name_the_source() -> None:
    template = template_from_instance_type(
        "ng",
        InstanceShape("m5.large", 2, 8192),
        {
            f"{TEMPLATE_TAG}resources/cpu": "1500m",
            f"{TEMPLATE_TAG}resources/memory": "4Gi",
            f"{TEMPLATE_TAG}resources/ephemeral-storage": "20Gi",  # standard: not extended
            f"{TEMPLATE_TAG}resources/hugepages-2Mi": "8",
        },
        {},
    )
    assert template.allocatable == Resources(1500, 4 * GIB, 110)
    assert template.extended == {}
    assert template.source == "instance type m5.large and its tags"
    assert (template.group, template.labels["kubernetes.io/arch"]) == ("ng", "amd64")


def test_without_tags_a_small_instance_has_the_default_pods_and_never_negative_memory() -> None:
    small = template_from_instance_type("ng", InstanceShape("t4g.nano", 2, 512, "arm64"), {}, {})
    # 2 cores less 70m kube-reserved; 512 MiB is less than 255 + 11 × 110 + 100 MiB
    assert small.allocatable == Resources(2000 - 70, 0, 110)
    assert small.taints == () and small.extended == {}
    large = template_from_instance_type("ng", InstanceShape("m5.large", 2, 8192), {}, {})
    assert large.allocatable.memory_bytes == (8192 - 255 - 1210 - 100) * 2**20


@pytest.mark.parametrize(
    ("value", "taint"),
    [
        ("batch:NoExecute", Taint("gpu", "batch", "NoExecute")),
        ("batch:", Taint("gpu", "batch", "NoSchedule")),
        ("batch", Taint("gpu", "batch", "NoSchedule")),
        (":PreferNoSchedule", Taint("gpu", "", "PreferNoSchedule")),
    ],
)
def test_a_taint_tag_is_value_colon_effect_no_schedule_when_it_names_none(
    value: str, taint: Taint
) -> None:
    tags = {f"{TEMPLATE_TAG}taint/gpu": value}
    template = template_from_instance_type("ng", InstanceShape("m5.large", 2, 8192), tags, {})
    assert template.taints == (taint,)


def test_a_malformed_resource_tag_is_refused_naming_the_tag() -> None:
    with pytest.raises(QuantityError, match=f"^tag {TEMPLATE_TAG}resources/cpu: "):
        template_from_instance_type(
            "ng", InstanceShape("m5.large", 2, 8192), {f"{TEMPLATE_TAG}resources/cpu": "x"}, {}
        )


def test_resources_add_subtract_never_below_zero_cover_and_take_the_larger() -> None:
    a, b = Resources(1000, 4 * GIB, 3), Resources(250, 8 * GIB, 1)
    assert a + b == Resources(1250, 12 * GIB, 4)
    assert a - b == Resources(750, 0, 2)
    assert b - a == Resources(0, 4 * GIB, 0)
    assert a.max(b) == b.max(a) == Resources(1000, 8 * GIB, 3)
    assert a.covers(Resources(1000, 4 * GIB, 3)) and not a.covers(b)
    assert not a.covers(Resources(1001, 0, 0)) and not a.covers(Resources(0, 0, 4))


# The scheduling edges: which live node a group's template copies (and what its DaemonSets
# take), packing when extended resources differ or the nodes run out, a node with no pod
# slot left, and a group whose EKS node group names only labels.


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


@pytest.mark.parametrize(
    "state",
    [
        Taint("node.kubernetes.io/memory-pressure", "", "NoSchedule"),
        Taint("node.kubernetes.io/disk-pressure", "", "NoSchedule"),
        Taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule"),
        Taint("NodeWithImpairedVolumes", "true", "NoSchedule"),
        Taint("ToBeDeletedByClusterAutoscaler", "1700000000", "NoSchedule"),
        Taint("status-taint.cluster-autoscaler.kubernetes.io/gpu-health", "", "NoSchedule"),
        Taint("node.cilium.io/agent-not-ready", "true", "NoExecute"),
        Taint("startup-taint.cluster-autoscaler.kubernetes.io/init", "", "NoSchedule"),
    ],
)
def test_a_live_template_leaves_out_the_taints_of_its_nodes_state(state: Taint) -> None:
    # Given the group's only live node, under pressure (or being deleted, or starting), and
    # dedicated to web as every node of the group
    group = NodeGroup("web", 1, 0, 5, 1, instance_ids=frozenset({"i-1"}))
    dedicated = Taint("dedicated", "web", "NoSchedule")
    nodes = [
        Node(
            "a",
            None,
            ready=True,
            schedulable=True,
            allocatable=Resources(4000, 16 * GIB, 110),
            taints=(dedicated, state),
            provider_id="aws:///eu-west-1a/i-1",
        )
    ]
    # When its template is made
    template = live_template(group, nodes, {})
    # Then a new node of the group has the group's taint and not the node's state: a pod
    # tolerating the group's taint fits it
    assert template is not None
    assert template.taints == (dedicated,)
    web = pending_pod(tolerations=(Toleration("dedicated", "Equal", "web"),))
    assert why_not(web, template) is None
    assert why_not(pending_pod(tolerations=()), template) == (
        "does not tolerate taint dedicated=web:NoSchedule"
    )


def test_a_live_template_is_taken_from_a_node_without_a_taint_its_peers_lack() -> None:
    # Given the group's first node by name still tainted by an agent of the operator's own
    # (not named in STARTUP_TAINTS), its second not, and a soft taint on the third
    group = NodeGroup("web", 3, 0, 5, 3, instance_ids=frozenset({"i-1", "i-2", "i-3"}))
    starting = replace(node("a", "i-1"), taints=(Taint("example.com/agent-not-ready"),))
    soft = replace(node("b", "i-3"), taints=(Taint("soft", "", "PreferNoSchedule"),))
    # When its template is made, then it is the untainted node's, and the group takes pods
    template = live_template(group, [starting, soft, node("c", "i-2")], {})
    assert template is not None and template.source == "node b"
    assert why_not(pending_pod(tolerations=()), template) is None


def test_a_live_template_holds_its_daemon_sets_host_ports() -> None:
    # Given the group's node running node-exporter, a DaemonSet's pod on host port 9100
    group = NodeGroup("web", 1, 0, 5, 1, instance_ids=frozenset({"i-1"}))
    port = frozenset({"host port TCP/9100"})
    exporter = pod("exporter", Resources(100, GIB, 1), daemon_set=True)
    exporter = replace(exporter, node_name="a", placement=Placement(apart=port))
    template = live_template(group, [node("a", "i-1")], {"a": [exporter]})
    # Then a new node of the group holds that port too: a pod asking it fits none
    assert template is not None and template.holding == port
    assert why_not(pending_pod(apart=port), template) is not None
    assert why_not(pending_pod(), template) is None


def test_the_taints_of_a_nodes_state_do_not_count_against_it_as_the_template() -> None:
    # Given a node under memory and disk pressure, and one with an agent's own taint
    group = NodeGroup("web", 2, 0, 5, 2, instance_ids=frozenset({"i-1", "i-2"}))
    pressed = replace(
        node("a", "i-1"),
        taints=(
            Taint("node.kubernetes.io/memory-pressure"),
            Taint("node.kubernetes.io/disk-pressure"),
        ),
    )
    agent = replace(node("b", "i-2"), taints=(Taint("example.com/agent-not-ready"),))
    # Then the template is the pressed node's, less its state: pods fit it
    template = live_template(group, [pressed, agent], {})
    assert template is not None and template.source == "node a"
    assert why_not(pending_pod(tolerations=()), template) is None


def test_a_node_holds_every_key_of_the_pods_on_it_packed_moved_or_running() -> None:
    # Given pods holding two keys, small enough to share a node but for their keys
    a, b = frozenset({"host port TCP/80"}), frozenset({"host port TCP/443"})
    a1, b1, a2 = (pending_pod(cpu=100, apart=k) for k in (a, b, a))
    template = NodeTemplate("ng", Resources(4000, 16 * GIB, 110))
    # Then packed: a1 and b1 share the first node, a2 needs the second
    assert nodes_needed([a1, b1, a2], template) == 2
    # a node running both holds both
    on_node = [replace(p, node_name="n1", phase="Running") for p in (a1, b1)]
    live = Node("n1", "ng", True, True, Resources(4000, 16 * GIB, 110))
    assert room_of(live, on_node).holding == a | b
    # and moved onto a room one after the other, the room holds both: a2 goes elsewhere
    rooms, stranded = place([a1, b1, a2], {"n2": template})
    assert rooms["n2"].holding == a | b and stranded == [a2]

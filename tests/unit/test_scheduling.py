"""Would a pending pod fit a new node of the group? One table per predicate, then packing."""

from __future__ import annotations

import pytest
from nodescaler.domain.cluster.predicates import (
    InstanceShape,
    NodegroupLabels,
    NodeTemplate,
    nodes_needed,
    pending,
    reserved_cpu_millis,
    template_from_instance_type,
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


def test_expendable_pods_below_the_cutoff_wait() -> None:
    keep = Pod("d", "a", None, Resources(), unschedulable=True, priority=-10)
    drop = Pod("d", "b", None, Resources(), unschedulable=True, priority=-11)
    bound = Pod("d", "c", "n1", Resources())
    assert pending([keep, drop, bound], expendable_priority_cutoff=-10) == [keep]


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

"""The cluster's CapacityBuffer objects (autoscaling.x-k8s.io/v1alpha1, as Cluster
Autoscaler 1.34 and Karpenter 1.14 read them: kubernetes/autoscaler
cluster-autoscaler/apis/capacitybuffer) read into virtual pods, or named and ignored."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from nodescaler.adapters.k8s.conversion import node_from_json, pod_from_json
from nodescaler.domain.ahead.capacity_buffers import (
    ClusterBuffer,
    Workload,
    describe,
    describe_all,
    read_buffer,
    with_buffers,
    within,
)
from nodescaler.domain.cluster.snapshot import Pod, Resources, Snapshot

from tests.kube import node, pod

TEMPLATE = pod_from_json(
    {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
    }
)
TEMPLATES = {("shop", "web"): TEMPLATE}


def buffer(spec: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling.x-k8s.io/v1alpha1",
        "kind": "CapacityBuffer",
        "metadata": {"name": "headroom", "namespace": "shop"},
        "spec": spec,
    } | top


def test_given_a_template_and_replicas_when_read_then_that_many_pods_of_its_shape() -> None:
    read = read_buffer(buffer({"podTemplateRef": {"name": "web"}, "replicas": 4}), TEMPLATES)
    assert read.problem is None
    assert [p.name for p in read.pods] == [f"headroom-buffer-{n}" for n in range(4)]
    assert {(p.namespace, p.requests.cpu_millis, p.controlled) for p in read.pods} == {
        ("shop", 1000, True)
    }


def test_given_limits_below_the_replicas_when_read_then_the_limits_cap_the_pods() -> None:
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 10, "limits": {"cpu": "3"}}
    assert len(read_buffer(buffer(spec), TEMPLATES).pods) == 3


def test_given_limits_alone_when_read_then_as_many_pods_as_they_hold() -> None:
    spec = {"podTemplateRef": {"name": "web"}, "limits": {"cpu": "8", "memory": "5Gi"}}
    assert len(read_buffer(buffer(spec), TEMPLATES).pods) == 5


GPU_TEMPLATE = pod_from_json(
    {
        "metadata": {"name": "train", "namespace": "shop"},
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}},
            ]
        },
    }
)


def test_given_a_limit_on_a_resource_the_pods_do_not_request_then_the_replicas_stand() -> None:
    # Given replicas and a limit on GPUs only, for pods that request none (it was named
    # malformed, "requests no cpu or memory": doubt that held every group's scale-in)
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 3, "limits": {"nvidia.com/gpu": "4"}}
    read = read_buffer(buffer(spec), TEMPLATES)
    # Then the limit holds any number of them: the replicas are the pods
    assert (read.problem, len(read.pods)) == (None, 3)


def test_given_a_limit_on_an_extended_resource_the_pods_request_then_it_caps_them() -> None:
    spec = {"podTemplateRef": {"name": "train"}, "replicas": 10, "limits": {"nvidia.com/gpu": 7}}
    read = read_buffer(buffer(spec), {("shop", "train"): GPU_TEMPLATE})
    assert (read.problem, len(read.pods)) == (None, 3)  # 7 GPUs hold three pods of 2


@pytest.mark.parametrize(
    ("obj", "named"),
    [
        (
            buffer({"podTemplateRef": {"name": "web"}, "replicas": 2, "percentage": 10}),
            "spec.replicas and spec.percentage are both set: give one",
        ),
        (
            buffer({"podTemplateRef": {"name": "web"}}),
            "neither spec.replicas nor spec.percentage nor spec.limits is set",
        ),
        (
            buffer({"podTemplateRef": {"name": "gone"}, "replicas": 2}),
            "PodTemplate shop/gone does not exist",
        ),
        (
            buffer({"podTemplateRef": {"name": "web"}, "replicas": -1}),
            "spec.replicas: -1 is not a whole number from 0 to 2147483647",
        ),
        (
            buffer({"podTemplateRef": {"name": "web"}, "limits": {"cpu": "-2"}}),
            "spec.limits.cpu: '-2' is negative",
        ),
        (
            buffer({"podTemplateRef": {"name": "web"}, "replicas": 1}, apiVersion="x/v9"),
            "apiVersion x/v9 is not one nodescaler reads (autoscaling.x-k8s.io/v1alpha1)",
        ),
        (
            buffer({"replicas": 1}),
            "spec.podTemplateRef.name is not set",
        ),
        (
            buffer({"scalableRef": {"apiGroup": "apps", "kind": "StatefulSet", "name": "db"}}),
            "spec.scalableRef: 'StatefulSet': nodescaler reads an apps Deployment only",
        ),
        (
            buffer({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "x"}}),
            "Deployment shop/x does not exist",
        ),
    ],
)
def test_given_a_malformed_buffer_when_read_then_it_is_named_and_has_no_pods(
    obj: dict[str, Any], named: str
) -> None:
    read = read_buffer(obj, TEMPLATES)
    assert (read.problem, read.pods) == (named, ())
    assert describe(read, {}) == f"CapacityBuffer shop/headroom ignored: {named}"


def test_given_free_room_for_one_when_settled_then_one_is_bound_and_the_rest_pending() -> None:
    """Given a Ready 2-cpu node with 1 cpu used and a buffer of 3 × 1 cpu, when the buffers
    are settled, then one buffer pod takes the free cpu and two are pending."""
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 3}
    listed = Snapshot(
        (node_from_json(node("n-1", cpu="2", memory="8Gi")),),
        (pod_from_json(pod("app", "n-1", cpu="1")),),
        buffers=(read_buffer(buffer(spec), TEMPLATES),),
    )
    settled = with_buffers(listed)
    virtual = [p for p in settled.pods if p.name.startswith("headroom-")]
    assert sorted((p.node_name or "", p.unschedulable) for p in virtual) == [
        ("", True),
        ("", True),
        ("n-1", False),
    ]
    assert describe(settled.buffers[0], {"ng-a": virtual[1:]}) == (
        "CapacityBuffer shop/headroom: 3 pods, 1 in free room, 2 pending (ng-a 2)"
    )


def test_given_another_provisioning_strategy_when_read_then_ignored_but_not_malformed() -> None:
    """A strategy nodescaler does not provision is valid: named, no pods, and no doubt."""
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 2, "provisioningStrategy": "x/other"}
    read = read_buffer(buffer(spec), TEMPLATES)
    assert (read.problem, read.pods) == (None, ())
    assert describe(read, {}) == (
        "CapacityBuffer shop/headroom ignored: provisioningStrategy x/other is not "
        "buffer.x-k8s.io/active-capacity"
    )


WEB = {("shop", "web"): Workload(10, TEMPLATE)}


@pytest.mark.parametrize(
    ("amount", "pods"),
    [
        ({"percentage": 20}, 2),
        ({"percentage": 5}, 1),
        ({"percentage": 25}, 3),
        ({"replicas": 4}, 4),
    ],
)
def test_given_a_deployment_of_10_when_a_buffer_scales_it_then_its_share_rounded_up(
    amount: dict[str, int], pods: int
) -> None:
    """CA's API: a percentage of the scalableRef's replicas, rounded up, at least 1."""
    ref = {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}}
    read = read_buffer(buffer(ref | amount), {}, WEB)
    assert (read.problem, len(read.pods)) == (None, pods)
    assert {p.requests.cpu_millis for p in read.pods} == {1000}


# --- one namespace's buffer is outside text: named, never an error that fails a group ------

LARGEST = "is more than Kubernetes' largest quantity (9223372036854775807)"
ZERO = pod_from_json(
    {"metadata": {"name": "zero", "namespace": "shop"}, "spec": {"containers": [{}]}}
)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"limits": {"cpu": "1e30"}}, f"spec.limits.cpu: '1e30' {LARGEST}"),
        ({"replicas": 3, "limits": {"cpu": "1e30"}}, f"spec.limits.cpu: '1e30' {LARGEST}"),
        ({"limits": {"memory": "1e999999"}}, f"spec.limits.memory: '1e999999' {LARGEST}"),
        ({"limits": {"memory": "1e99999999999Ki"}}, "spec.limits.memory: '1e99999999999Ki' is"),
        ({"limits": {"cpu": "NaN"}}, "spec.limits.cpu: 'NaN' is not a quantity"),
        ({"limits": {"cpu": "Infinity"}}, "spec.limits.cpu: 'Infinity' is not a quantity"),
        ({"limits": {"cpu": float("inf")}}, "spec.limits.cpu: inf is not a quantity"),
        ({"limits": {"cpu": "-1e-3"}}, "spec.limits.cpu: '-1e-3' is negative"),
        ({"limits": {"cpu": True}}, "spec.limits.cpu: True is not a quantity: a bool"),
        ({"limits": {"cpu": [1]}}, "spec.limits.cpu: [1] is not a quantity: a list"),
        ({"limits": {"cpu": None}}, "spec.limits.cpu: None is not a quantity: a NoneType"),
        ({"limits": "8"}, "spec.limits is not a map of resources"),
        ({"replicas": 10**30}, "spec.replicas: a number of 100 bits is not a whole number"),
        ({"replicas": 2**31}, "spec.replicas: 2147483648 is not a whole number from 0 to"),
        ({"replicas": True}, "spec.replicas: True is not a whole number from 0 to 2147483647"),
        ({"replicas": 1.5}, "spec.replicas: 1.5 is not a whole number from 0 to 2147483647"),
        ({"replicas": "3"}, "spec.replicas: '3' is not a whole number from 0 to 2147483647"),
    ],
)
def test_given_a_quantity_or_count_no_buffer_can_hold_when_read_then_that_buffer_names_it(
    spec: dict[str, Any], named: str
) -> None:
    # Given a team's buffer of the 1-cpu template with a value nodescaler cannot use
    obj = buffer({"podTemplateRef": {"name": "web"}} | spec)
    # When read (once: decimal.DivisionImpossible, failing the evaluation three times)
    read = read_buffer(obj, TEMPLATES)
    # Then the buffer is ignored, its namespace/name and field named: doubt, no pods
    assert read.pods == ()
    assert read.problem is not None and read.problem.startswith(named)
    assert describe(read, {}).startswith(f"CapacityBuffer shop/headroom ignored: {named}")


def test_given_a_percentage_beyond_an_int32_when_read_then_the_buffer_names_it() -> None:
    ref = {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}}
    read = read_buffer(buffer(ref | {"percentage": 10**12}), {}, WEB)
    assert (
        read.problem == "spec.percentage: 1000000000000 is not a whole number from 0 to 2147483647"
    )


def test_given_limits_on_a_template_that_requests_nothing_when_read_then_named() -> None:
    # Given a PodTemplate whose containers request no cpu and no memory: limits hold any number
    spec = {"podTemplateRef": {"name": "zero"}, "limits": {"cpu": "4"}}
    read = read_buffer(buffer(spec), {("shop", "zero"): ZERO})
    assert read.problem == (
        "spec.limits limit nothing the pod template requests, and neither spec.replicas "
        "nor spec.percentage is set"
    )


def test_given_a_tiny_limit_when_read_then_it_holds_no_pod_and_is_no_problem() -> None:
    spec = {"podTemplateRef": {"name": "web"}, "limits": {"cpu": "1e-999999999"}}
    read = read_buffer(buffer(spec), TEMPLATES)
    assert (read.problem, read.pods) == (None, ())


def test_given_a_buffer_asking_more_than_a_buffer_may_hold_when_read_then_capped_and_named() -> (
    None
):
    # Given a buffer of 10,000 pods, and at most 50 a buffer
    spec = {"podTemplateRef": {"name": "web"}, "replicas": 10_000}
    read = read_buffer(buffer(spec), TEMPLATES, most=50)
    # Then it holds 50, no problem (it still counts), and the decision says the cap bound
    assert (read.problem, len(read.pods)) == (None, 50)
    assert describe(read, {}) == (
        "CapacityBuffer shop/headroom: 50 pods (capped: 10,000 asked, at most 50 a buffer), "
        "0 in free room, 50 pending"
    )


def test_given_huge_limits_alone_when_read_then_capped_not_expanded() -> None:
    spec = {"podTemplateRef": {"name": "web"}, "limits": {"cpu": "9e18"}}
    read = read_buffer(buffer(spec), TEMPLATES, most=10)
    assert len(read.pods) == 10
    assert read.capped == "9,000,000,000,000,000,000 asked, at most 10 a buffer"


def _asking(name: str, pods: int) -> ClusterBuffer:
    return read_buffer(
        buffer(
            {"podTemplateRef": {"name": "web"}, "replicas": pods},
            metadata={"name": name, "namespace": "shop"},
        ),
        TEMPLATES,
        most=10_000,
    )


def test_given_buffers_asking_more_than_all_may_hold_then_shared_fairly_and_named() -> None:
    # Given three buffers asking 10, 1,000 and 5,000 pods, and 600 for all of them
    small, large, huge = _asking("small", 10), _asking("large", 1_000), _asking("huge", 5_000)
    # When capped together
    kept = within((huge, small, large), 600)
    # Then the small one keeps all it asks, the others share the rest equally, in their order
    assert [(b.name, len(b.pods)) for b in kept] == [("huge", 295), ("small", 10), ("large", 295)]
    assert kept[0].capped == "5,000 asked, all buffers together hold at most 600"
    assert kept[1].capped is None


def test_given_many_buffers_when_described_then_five_clauses_and_how_many_more() -> None:
    many = [_asking(f"b{n}", 1) for n in range(40)]
    broken = read_buffer(
        buffer({"podTemplateRef": {"name": "web"}, "limits": {"cpu": "1e30"}}), TEMPLATES
    )
    said = describe_all([*many, broken], {})
    assert said.startswith("CapacityBuffer shop/headroom ignored: spec.limits.cpu: '1e30'")
    assert said.endswith("; and 36 more CapacityBuffers")
    assert said.count("CapacityBuffer ") == 5


values = st.one_of(
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
    st.from_regex(r"-?[0-9]{1,30}(\.[0-9]{0,5})?(e-?[0-9]{1,12})?(m|Ki|Ei|n)?", fullmatch=True),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@given(
    spec=st.fixed_dictionaries(
        {},
        optional={
            "replicas": values,
            "percentage": values,
            "limits": values | st.dictionaries(st.sampled_from(["cpu", "memory", "gpu"]), values),
        },
    ),
    ref=st.sampled_from(["template", "deployment", "zero"]),
)
def test_any_buffer_is_read_into_at_most_its_cap_of_pods_or_its_problem_is_named(
    spec: dict[str, Any], ref: str
) -> None:
    refs = {
        "template": {"podTemplateRef": {"name": "web"}},
        "deployment": {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}},
        "zero": {"podTemplateRef": {"name": "zero"}},
    }
    templates = TEMPLATES | {("shop", "zero"): ZERO}
    read = read_buffer(buffer(refs[ref] | spec), templates, WEB, most=20)
    assert read.namespace == "shop" and read.name == "headroom"
    assert (read.problem is None) or (read.pods == () and read.problem)
    assert len(read.pods) <= 20
    assert not read.problem or not read.problem.startswith("unreadable")


def test_a_problem_quoting_the_buffers_own_text_is_bounded_and_inert() -> None:
    # Given a buffer whose PodTemplate name is a terminal escape and 2,000 characters
    hostile = "\x1b[31m" + "x" * 2000
    read = read_buffer(buffer({"podTemplateRef": {"name": hostile}}), TEMPLATES, WEB)
    # Then its problem names the template, cut, with no control character
    assert read.problem is not None and read.problem.startswith("PodTemplate shop/")
    assert "\x1b" not in read.problem and len(read.problem) <= 340


# CapacityBuffers at their edges: what a settled buffer pod is (bound and running, or
# pending), which nodes take them, counts at the int32's ends and a percentage's rounding,
# every malformed field named with the buffer's own text bounded, and how the decision
# describes several buffers.


INT32 = 2**31 - 1


ACROSS = "is not a whole number from 0 to 2147483647"


DEPLOYMENT = {"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "web"}}


BY_TEMPLATE = {"podTemplateRef": {"name": "web"}}


def settled(*nodes: dict[str, Any], replicas: int = 2, pods: tuple[Pod, ...] = ()) -> list[Pod]:
    spec = BY_TEMPLATE | {"replicas": replicas}
    listed = Snapshot(
        tuple(node_from_json(n) for n in nodes),
        pods,
        buffers=(read_buffer(buffer(spec), TEMPLATES),),
    )
    return [p for p in with_buffers(listed).pods if p.name.startswith("headroom-")]


def test_a_buffer_pod_in_free_room_runs_there_and_the_rest_are_pending() -> None:
    # Given an empty Ready node with room for one 1-cpu pod, and a buffer of two
    bound, waiting = settled(node("n-1", cpu="1", memory="8Gi"))
    assert (bound.node_name, bound.phase, bound.unschedulable) == ("n-1", "Running", False)
    assert (waiting.node_name, waiting.phase, waiting.unschedulable) == (None, "Pending", True)


def test_a_template_naming_a_node_binds_no_buffer_pod_to_it() -> None:
    templates = {("shop", "web"): replace(TEMPLATE, node_name="elsewhere")}
    read = read_buffer(buffer(BY_TEMPLATE | {"replicas": 1}), templates)
    (virtual,) = with_buffers(Snapshot((), (), buffers=(read,))).pods
    assert (virtual.node_name, virtual.phase) == (None, "Pending")


def test_a_cordoned_node_takes_no_buffer_pod() -> None:
    pods = settled(node("n-1", cpu="8", unschedulable=True))
    assert [(p.node_name, p.phase) for p in pods] == [(None, "Pending"), (None, "Pending")]


def test_a_deployment_at_zero_asks_one_pod_whatever_its_percentage() -> None:
    workloads = {("shop", "web"): Workload(0, TEMPLATE)}
    read = read_buffer(buffer(DEPLOYMENT | {"percentage": 250}), {}, workloads)
    assert (read.problem, len(read.pods)) == (None, 1)


def test_a_hundred_percent_of_a_deployment_is_all_its_replicas() -> None:
    workloads = {("shop", "web"): Workload(1000, TEMPLATE)}
    read = read_buffer(buffer(DEPLOYMENT | {"percentage": 100}), {}, workloads, most=10_000)
    assert len(read.pods) == 1000


def test_counts_at_the_int32s_ends_are_read_and_beyond_them_quoted_by_size() -> None:
    none = read_buffer(buffer(BY_TEMPLATE | {"replicas": 0}), TEMPLATES)
    assert (none.problem, none.pods) == (None, ())
    largest = read_buffer(buffer(BY_TEMPLATE | {"replicas": INT32}), TEMPLATES, most=5)
    assert (largest.problem, len(largest.pods)) == (None, 5)
    at_64 = read_buffer(buffer(BY_TEMPLATE | {"replicas": 2**63}), TEMPLATES)
    assert at_64.problem == f"spec.replicas: 9223372036854775808 {ACROSS}"
    at_65 = read_buffer(buffer(BY_TEMPLATE | {"replicas": 2**64}), TEMPLATES)
    assert at_65.problem == f"spec.replicas: a number of 65 bits {ACROSS}"


def test_a_long_count_is_quoted_cut_at_sixty_characters() -> None:
    read = read_buffer(buffer(BY_TEMPLATE | {"replicas": "9" * 100}), TEMPLATES)
    assert read.problem == f"spec.replicas: '{'9' * 59}… (cut, 102 characters) {ACROSS}"


def test_a_long_resource_name_is_quoted_cut_at_sixty_three_characters() -> None:
    read = read_buffer(buffer(BY_TEMPLATE | {"limits": {"r" * 100: "lots"}}), TEMPLATES)
    assert (
        read.problem == f"spec.limits.{'r' * 63}… (cut, 100 characters): 'lots' is not a quantity"
    )


def test_limits_count_a_template_of_no_placement() -> None:
    plain = Pod("shop", "web", None, Resources(1000, 2**30, 1))
    spec = BY_TEMPLATE | {"limits": {"cpu": "3"}}
    read = read_buffer(buffer(spec), {("shop", "web"): plain})
    assert (read.problem, len(read.pods)) == (None, 3)


def test_a_buffer_with_no_api_version_is_read_as_the_one_nodescaler_reads() -> None:
    obj = buffer(BY_TEMPLATE | {"replicas": 2})
    del obj["apiVersion"]
    assert len(read_buffer(obj, TEMPLATES).pods) == 2


def test_a_buffer_with_unreadable_metadata_is_read_in_the_default_namespace_as_unnamed() -> None:
    read = read_buffer(
        buffer(BY_TEMPLATE | {"replicas": 1}, metadata="oops"), {("default", "web"): TEMPLATE}
    )
    assert (read.namespace, read.name, read.problem, len(read.pods)) == ("default", "?", None, 1)


def test_a_long_namespace_and_name_are_cut_to_what_kubernetes_allows() -> None:
    metadata = {"namespace": "n" * 100, "name": "b" * 300}
    read = read_buffer(buffer(BY_TEMPLATE | {"replicas": 1}, metadata=metadata), TEMPLATES)
    assert read.namespace == "n" * 63 + "… (cut, 100 characters)"
    assert read.name == "b" * 253 + "… (cut, 300 characters)"


def test_what_is_not_an_object_is_named_and_quoted_bounded() -> None:
    read = read_buffer("x" * 100, TEMPLATES)  # type: ignore[arg-type]
    assert (read.namespace, read.name, read.pods) == ("?", "?", ())
    assert read.problem == "not an object: '" + "x" * 59 + "… (cut, 102 characters)"


def test_a_problem_is_kept_to_three_hundred_characters_not_two_hundred() -> None:
    read = read_buffer(buffer({"podTemplateRef": {"name": "y" * 250}, "replicas": 1}), TEMPLATES)
    assert read.problem == f"PodTemplate shop/{'y' * 250} does not exist"


class Unforeseen(dict):  # type: ignore[type-arg]
    """A spec whose reading fails in a way no rule foresaw."""

    def get(self, key: object, default: object = None) -> object:
        if key == "limits":
            raise RuntimeError("no such thing")
        return super().get(key, default)


def test_a_buffer_failing_as_no_rule_foresaw_is_named_unreadable() -> None:
    read = read_buffer(buffer(Unforeseen(BY_TEMPLATE | {"replicas": 1})), TEMPLATES)
    assert (read.namespace, read.name) == ("shop", "headroom")
    assert (read.problem, read.pods) == ("unreadable: no such thing", ())


def test_each_malformed_reference_is_named() -> None:
    broken = replace(TEMPLATE, problem="resources.requests: 'x' is not a quantity")
    cases = [
        (
            buffer(BY_TEMPLATE | DEPLOYMENT),
            "spec.podTemplateRef and spec.scalableRef are both set: give one",
        ),
        (
            buffer(BY_TEMPLATE | {"percentage": 10}),
            "spec.percentage applies to a scalableRef only",
        ),
        (
            buffer({"scalableRef": "web"}),
            "spec.scalableRef: 'web': nodescaler reads an apps Deployment only",
        ),
    ]
    for obj, named in cases:
        assert read_buffer(obj, TEMPLATES).problem == named
    by_template = read_buffer(buffer(BY_TEMPLATE | {"replicas": 1}), {("shop", "web"): broken})
    assert by_template.problem == f"PodTemplate shop/web: {broken.problem}"
    workloads = {("shop", "web"): Workload(3, broken)}
    by_deployment = read_buffer(buffer(DEPLOYMENT | {"replicas": 1}), {}, workloads)
    assert by_deployment.problem == f"Deployment shop/web: {broken.problem}"


def asking(name: str, replicas: int, most: int = 10_000) -> Any:
    metadata = {"name": name, "namespace": "shop"}
    spec = BY_TEMPLATE | {"replicas": replicas}
    return read_buffer(buffer(spec, metadata=metadata), TEMPLATES, most=most)


def test_buffers_within_what_all_may_hold_are_kept_as_they_are() -> None:
    small = asking("small", 3)
    assert within((small,), 100) == (small,)


def test_a_buffer_capped_twice_names_both_caps() -> None:
    capped, other = asking("big", 100, most=50), asking("other", 50)
    kept = within((capped, other), 30)
    assert kept[0].capped == "100 asked, at most 50 a buffer; all buffers together hold at most 30"


def test_buffer_pods_pending_in_two_groups_are_named_by_group() -> None:
    read = asking("headroom", 2)
    other = pod_from_json(pod("app", namespace="shop"))
    taken = {"ng-a": [read.pods[0], other], "ng-b": [read.pods[1]]}
    assert describe(read, taken) == (
        "CapacityBuffer shop/headroom: 2 pods, 0 in free room, 2 pending (ng-a 1, ng-b 1)"
    )


def test_five_buffers_are_all_described_and_a_sixth_is_counted() -> None:
    five = [asking(f"b{n}", 1) for n in range(5)]
    assert not describe_all(five, {}).endswith("more CapacityBuffers")
    assert describe_all([*five, asking("b5", 1)], {}).endswith("; and 1 more CapacityBuffers")


def test_a_capped_buffer_is_described_before_the_others() -> None:
    plain, capped = asking("plain", 1), asking("capped", 20, most=10)
    assert describe_all([plain, capped], {}, shown=1) == (
        "CapacityBuffer shop/capped: 10 pods (capped: 20 asked, at most 10 a buffer), "
        "0 in free room, 10 pending; and 1 more CapacityBuffers"
    )

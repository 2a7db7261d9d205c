"""CapacityBuffers at their edges: what a settled buffer pod is (bound and running, or
pending), which nodes take them, counts at the int32's ends and a percentage's rounding,
every malformed field named with the buffer's own text bounded, and how the decision
describes several buffers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nodescaler.adapters.k8s.conversion import node_from_json, pod_from_json
from nodescaler.domain.ahead.capacity_buffers import (
    Workload,
    describe,
    describe_all,
    read_buffer,
    with_buffers,
    within,
)
from nodescaler.domain.cluster.snapshot import Pod, Resources, Snapshot

from tests.kube import node, pod
from tests.unit.test_cluster_buffers import TEMPLATE, TEMPLATES, buffer

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

"""The figures a sandbox run is judged by, on hand-made timelines whose answer is known."""

from __future__ import annotations

from nodescaler_sandbox.figures import (
    NEVER_SCHEDULED,
    PodRecord,
    ScaleUp,
    demand_to_scale_request,
    fit_no_group,
    percentile,
    pod_waits,
)

GROUPS = ["cpu-ng", "gpu-ng"]


def test_another_groups_scale_up_does_not_answer_a_pod_it_cannot_take() -> None:
    gpu_pod = PodRecord(
        "trainer", 0, unschedulable=0, bound=32, group="gpu-ng", takers=frozenset({"gpu-ng"})
    )
    cpu_pod = PodRecord(
        "web", 0, unschedulable=0, bound=3, group="cpu-ng", takers=frozenset({"cpu-ng"})
    )
    scale_ups = [ScaleUp(0, "cpu-ng"), ScaleUp(29, "gpu-ng")]
    assert demand_to_scale_request([gpu_pod, cpu_pod], scale_ups, GROUPS, end=60) == {
        "cpu-ng": 0,
        "gpu-ng": 29,  # the pod waited 29 minutes for its group, whatever cpu-ng did
    }


def test_a_pod_that_finds_room_without_a_scale_up_is_answered_when_it_binds() -> None:
    pod = PodRecord("web", 5, unschedulable=5, bound=12, takers=frozenset({"cpu-ng"}))
    assert demand_to_scale_request([pod], [], GROUPS, end=60)["cpu-ng"] == 7


def test_a_pod_never_answered_waits_to_the_end_of_the_run() -> None:
    pod = PodRecord("web", 0, unschedulable=10, takers=frozenset({"cpu-ng", "gpu-ng"}))
    earlier = [ScaleUp(5, "cpu-ng")]  # before the pod needed a node: no answer
    assert demand_to_scale_request([pod], earlier, GROUPS, end=60) == {"cpu-ng": 50, "gpu-ng": 50}


def test_only_pods_that_waited_count_and_each_under_the_group_it_bound_to() -> None:
    pods = [
        PodRecord("a", 0, unschedulable=0, bound=2, group="cpu-ng"),
        PodRecord("b", 0, unschedulable=0, bound=4, group="cpu-ng"),
        PodRecord("c", 10, unschedulable=10, bound=40, group="gpu-ng"),
        PodRecord("d", 50, unschedulable=50),  # never bound: waits to the end
        PodRecord("e", 0, unschedulable=0, gone=6),  # removed while it waited
        PodRecord("quick", 0, bound=0, group="cpu-ng"),  # found room at once: no wait
    ]
    waits = pod_waits(pods, end=60)
    assert waits["overall"] == {"pods": 5, "p50": 6.0, "p99": 30.0, "max": 30.0}
    assert waits["cpu-ng"] == {"pods": 2, "p50": 2.0, "p99": 4.0, "max": 4.0}
    assert waits["gpu-ng"]["max"] == 30.0
    assert waits[NEVER_SCHEDULED] == {"pods": 2, "p50": 6.0, "p99": 10.0, "max": 10.0}


def test_no_pod_waited_reads_as_no_figure_not_zero() -> None:
    assert pod_waits([PodRecord("quick", 0, bound=0)], end=10)["overall"] == {
        "pods": 0,
        "p50": None,
        "p99": None,
        "max": None,
    }


def test_percentiles_are_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile([7], 0.99) == 7


def test_pods_no_group_could_take_are_named() -> None:
    pods = [
        PodRecord("huge", 0, unschedulable=0),
        PodRecord("fits", 0, unschedulable=0, takers=frozenset({"cpu-ng"})),
        PodRecord("never-waited", 0, bound=0),
    ]
    assert fit_no_group(pods) == ["huge"]

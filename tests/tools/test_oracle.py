"""The limit a run is compared against (`oracle_node_hours`), on hand-made timelines
whose answer is known: the pods of each minute packed by the sandbox's own placement
rule onto the fewest nodes first-fit decreasing finds."""

from __future__ import annotations

from typing import Any

from nodescaler_sandbox.cluster import Room
from nodescaler_sandbox.oracle import Shape, oracle_node_hours, step_of

GIB = 2**30


def node(cpu: str, memory: str, **extra: Any) -> Room:
    """An empty node of a group, as the sandbox's cluster makes it."""
    return Room.of(
        {
            "metadata": {"labels": extra.get("labels", {})},
            "spec": {"taints": extra.get("taints", [])},
            "status": {
                "allocatable": {"cpu": cpu, "memory": memory} | extra.get("extended", {}),
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )


def pod(cpu: str, memory: str, **spec: Any) -> Shape:
    requests = {"cpu": cpu, "memory": memory} | spec.pop("extended", {})
    return Shape.of({"spec": {"containers": [{"resources": {"requests": requests}}], **spec}})


def minutes(n: int, *pods: Shape) -> list[Any]:
    return [step_of(pods)] * n


def test_three_pods_of_half_a_node_for_two_hours_take_four_node_hours() -> None:
    # Given 3 pods each asking half a node, for 120 minutes
    steps = minutes(120, *[pod("2", "4Gi")] * 3)
    # When the oracle packs them: two to a node, the third on a second node
    figures = oracle_node_hours(steps, {"web-ng": node("4", "8Gi")})
    # Then 2 nodes × 2 hours
    assert figures == {"oracle_node_hours": 4.0, "oracle_pods_left_out": 0}


def test_memory_fills_a_node_before_cpu_does() -> None:
    # Given 4 pods of little CPU and half a node's memory each, for an hour
    steps = minutes(60, *[pod("100m", "4Gi")] * 4)
    # Then two pods a node: two nodes
    assert oracle_node_hours(steps, {"ng": node("4", "8Gi")})["oracle_node_hours"] == 2.0


def test_capacity_follows_the_pods_minute_by_minute() -> None:
    # Given one pod for 30 minutes, then five (a node holds four), then none
    one, five = minutes(30, pod("1", "1Gi")), minutes(30, *[pod("1", "1Gi")] * 5)
    steps = one + five + minutes(60)
    # Then one node for half an hour, two for the next, none after
    assert oracle_node_hours(steps, {"ng": node("4", "8Gi")})["oracle_node_hours"] == 1.5


def test_the_larger_group_is_chosen_first_as_a_node_costs_one_whatever_its_size() -> None:
    # Given a group of 2-core nodes and one of 8-core nodes, and 8 one-core pods
    groups = {"small-ng": node("2", "4Gi"), "large-ng": node("8", "16Gi")}
    steps = minutes(60, *[pod("1", "1Gi")] * 8)
    # Then one large node holds them all, for an hour
    assert oracle_node_hours(steps, groups)["oracle_node_hours"] == 1.0


def test_a_pod_goes_only_where_the_sandbox_scheduler_would_put_it() -> None:
    # Given a GPU group tainted for GPU pods and a CPU group; a GPU pod and a CPU pod
    taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
    groups = {
        "gpu-ng": node("32", "64Gi", extended={"nvidia.com/gpu": "4"}, taints=[taint]),
        "cpu-ng": node("4", "8Gi"),
    }
    gpu_pod = pod(
        "1",
        "1Gi",
        extended={"nvidia.com/gpu": "1"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    steps = minutes(60, gpu_pod, pod("1", "1Gi"))
    # Then the CPU pod cannot share the GPU node (its taint), though the GPU node is larger:
    # two nodes
    assert oracle_node_hours(steps, groups)["oracle_node_hours"] == 2.0


def test_pods_that_fit_no_group_are_left_out_and_counted() -> None:
    # Given a pod larger than any node, beside one that fits, for an hour
    steps = minutes(60, pod("64", "1Gi"), pod("1", "1Gi"))
    figures = oracle_node_hours(steps, {"ng": node("4", "8Gi")})
    # Then the one that fits takes a node, the other is left out and said so
    assert figures == {"oracle_node_hours": 1.0, "oracle_pods_left_out": 1}


def test_first_fit_decreasing_fills_part_filled_nodes_before_opening_new_ones() -> None:
    # Given nodes of 10 cores and pods of 4, 3 and 2 cores (5, 4 and 3 of them)
    pods = [pod("4", "1Gi")] * 5 + [pod("3", "1Gi")] * 4 + [pod("2", "1Gi")] * 3
    # When packed largest first: 4+4 | 4+4 | 4+3+3 | 3+3 ... then each 2 into the first
    # node with room: 4+4+2 | 4+4+2 | 4+3+3 | 3+3+2
    steps = minutes(60, *pods)
    # Then four nodes
    assert oracle_node_hours(steps, {"ng": node("10", "64Gi")})["oracle_node_hours"] == 4.0


def test_the_greedy_is_an_upper_bound_on_the_fewest_nodes() -> None:
    # Given nodes of 10 cores and pods of 4, 4, 3, 3, 3, 3 cores: two nodes hold them
    # (4+3+3 twice), but first-fit decreasing puts 4+4 together and needs three
    pods = [pod("4", "1Gi")] * 2 + [pod("3", "1Gi")] * 4
    steps = minutes(60, *pods)
    # Then the oracle says three node-hours: a limit from above, never below the optimum
    assert oracle_node_hours(steps, {"ng": node("10", "64Gi")})["oracle_node_hours"] == 3.0


def test_a_shorter_step_counts_its_share_of_an_hour() -> None:
    # Given one pod for 360 steps of 10 seconds
    steps = minutes(360, pod("1", "1Gi"))
    figures = oracle_node_hours(steps, {"ng": node("4", "8Gi")}, step_seconds=10)
    # Then one node for an hour
    assert figures["oracle_node_hours"] == 1.0


def test_a_runs_limit_is_judged_from_the_step_of_judged_from_on_its_step() -> None:
    from pathlib import Path

    from nodescaler_sandbox import runner
    from nodescaler_sandbox.scenario_file import load_scenario

    # Given a 61-minute run of 10-second steps judged from minute 1, one pod all along
    path = Path(__file__).parents[2] / "scenarios" / "4-launch-failure.yaml"
    scenario = load_scenario(path).model_copy(
        update={"minutes": 61, "judged_from": 1, "step_seconds": 10}
    )
    run = runner.Run(runner.NODESCALER, steps=minutes(61 * 6 + 1, pod("1", "1Gi")))
    run.templates = {"ng": node("4", "8Gi")}
    # Then the judged hour is the 361 steps from 00:01:00 on (not from the second step)
    assert runner._oracle(scenario, [run])["oracle_node_hours"] == round(361 * 10 / 3600, 2)

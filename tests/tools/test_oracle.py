"""What a run is compared against, on hand-made timelines whose answer is known: the
bound no controller can beat (`oracle_node_hours`, from the scenario's demand), and the
heuristic beside it (`packed_node_hours`): the pods of each minute packed by the
sandbox's own placement rule onto the nodes first-fit decreasing finds."""

from __future__ import annotations

from typing import Any

from nodescaler_sandbox.cluster import Room
from nodescaler_sandbox.demand import demand
from nodescaler_sandbox.oracle import (
    Bounds,
    Shape,
    lower_bound,
    oracle_node_hours,
    packed_node_hours,
    step_of,
)

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
    figures = packed_node_hours(steps, {"web-ng": node("4", "8Gi")})
    # Then 2 nodes × 2 hours
    assert figures == {"packed_node_hours": 4.0, "packed_pods_left_out": 0}


def test_memory_fills_a_node_before_cpu_does() -> None:
    # Given 4 pods of little CPU and half a node's memory each, for an hour
    steps = minutes(60, *[pod("100m", "4Gi")] * 4)
    # Then two pods a node: two nodes
    assert packed_node_hours(steps, {"ng": node("4", "8Gi")})["packed_node_hours"] == 2.0


def test_replicas_spread_one_a_node_take_a_node_each_in_the_bound_too() -> None:
    # Given 4 small replicas with a required anti-affinity to their own, and 4 small pods
    own = {"labelSelector": {"matchLabels": {"app": "zk"}}, "topologyKey": "kubernetes.io/hostname"}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own]}}
    spread = pod("100m", "1Gi", affinity=anti)
    steps = minutes(60, *[spread] * 4, *[pod("100m", "1Gi")] * 4)
    # Then four nodes an hour (the small pods beside them), where packing alone says one
    assert packed_node_hours(steps, {"ng": node("4", "16Gi")})["packed_node_hours"] == 4.0
    bound = oracle_node_hours(steps, {"ng": node("4", "16Gi")}, Bounds({}))
    assert bound["oracle_node_hours"] == 4.0
    assert packed_node_hours(minutes(60, *[pod("100m", "1Gi")] * 8), {"ng": node("4", "16Gi")}) == {
        "packed_node_hours": 1.0,
        "packed_pods_left_out": 0,
    }


def test_capacity_follows_the_pods_minute_by_minute() -> None:
    # Given one pod for 30 minutes, then five (a node holds four), then none
    one, five = minutes(30, pod("1", "1Gi")), minutes(30, *[pod("1", "1Gi")] * 5)
    steps = one + five + minutes(60)
    # Then one node for half an hour, two for the next, none after
    assert packed_node_hours(steps, {"ng": node("4", "8Gi")})["packed_node_hours"] == 1.5


def test_the_larger_group_is_chosen_first_as_a_node_costs_one_whatever_its_size() -> None:
    # Given a group of 2-core nodes and one of 8-core nodes, and 8 one-core pods
    groups = {"small-ng": node("2", "4Gi"), "large-ng": node("8", "16Gi")}
    steps = minutes(60, *[pod("1", "1Gi")] * 8)
    # Then one large node holds them all, for an hour
    assert packed_node_hours(steps, groups)["packed_node_hours"] == 1.0


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
    assert packed_node_hours(steps, groups)["packed_node_hours"] == 2.0


def test_pods_that_fit_no_group_are_left_out_and_counted() -> None:
    # Given a pod larger than any node, beside one that fits, for an hour
    steps = minutes(60, pod("64", "1Gi"), pod("1", "1Gi"))
    figures = packed_node_hours(steps, {"ng": node("4", "8Gi")})
    # Then the one that fits takes a node, the other is left out and said so
    assert figures == {"packed_node_hours": 1.0, "packed_pods_left_out": 1}


def test_first_fit_decreasing_fills_part_filled_nodes_before_opening_new_ones() -> None:
    # Given nodes of 10 cores and pods of 4, 3 and 2 cores (5, 4 and 3 of them)
    pods = [pod("4", "1Gi")] * 5 + [pod("3", "1Gi")] * 4 + [pod("2", "1Gi")] * 3
    # When packed largest first: 4+4 | 4+4 | 4+3+3 | 3+3 ... then each 2 into the first
    # node with room: 4+4+2 | 4+4+2 | 4+3+3 | 3+3+2
    steps = minutes(60, *pods)
    # Then four nodes
    assert packed_node_hours(steps, {"ng": node("10", "64Gi")})["packed_node_hours"] == 4.0


def test_the_greedy_is_an_upper_bound_on_the_fewest_nodes() -> None:
    # Given nodes of 10 cores and pods of 4, 4, 3, 3, 3, 3 cores: two nodes hold them
    # (4+3+3 twice), but first-fit decreasing puts 4+4 together and needs three
    pods = [pod("4", "1Gi")] * 2 + [pod("3", "1Gi")] * 4
    steps = minutes(60, *pods)
    # Then the oracle says three node-hours: a limit from above, never below the optimum
    assert packed_node_hours(steps, {"ng": node("10", "64Gi")})["packed_node_hours"] == 3.0


def test_a_shorter_step_counts_its_share_of_an_hour() -> None:
    # Given one pod for 360 steps of 10 seconds
    steps = minutes(360, pod("1", "1Gi"))
    figures = packed_node_hours(steps, {"ng": node("4", "8Gi")}, step_seconds=10)
    # Then one node for an hour
    assert figures["packed_node_hours"] == 1.0


def test_a_runs_limit_is_judged_from_the_step_of_judged_from_on_its_step() -> None:
    from pathlib import Path

    from nodescaler_sandbox import oracle_bounds, runner
    from nodescaler_sandbox.observation import Run
    from nodescaler_sandbox.scenario_file import load_scenario

    # Given a 61-minute run of 10-second steps judged from minute 1, one pod all along
    path = Path(__file__).parents[2] / "scenarios" / "4-launch-failure.yaml"
    scenario = load_scenario(path).model_copy(
        update={"minutes": 61, "judged_from": 1, "step_seconds": 10}
    )
    run = Run(runner.NODESCALER, steps=minutes(61 * 6 + 1, pod("1", "1Gi")))
    run.templates = {"ng": node("4", "8Gi")}
    # Then the judged hour is the 361 steps from 00:01:00 on (not from the second step)
    figures = oracle_bounds.bound(scenario, [run])
    assert figures["packed_node_hours"] == round(361 * 10 / 3600, 2)
    # ... and the bound counts the same steps of the scenario's own demand
    judged = list(demand(scenario))[6:]
    assert len(judged) == 360
    bounds = Bounds({g.name: (g.min, g.max) for g in scenario.groups})
    assert (
        figures["oracle_node_hours"]
        == oracle_node_hours(judged, run.templates, bounds, 10)["oracle_node_hours"]
    )


# --- the bound: oracle.lower_bound, each step's demand over a node's allocatable --------

NO_BOUNDS = Bounds({})


def test_the_bound_is_the_largest_resource_share_rounded_up() -> None:
    # Given 3 pods of 2 cores and 1 GiB on nodes of 4 cores and 8 GiB: CPU decides, 6/4
    assert (
        lower_bound(step_of([pod("2", "1Gi")] * 3), {"ng": node("4", "8Gi")}, NO_BOUNDS).nodes == 2
    )
    # Given 3 pods of 1 core and 6 GiB: memory decides, 18/8
    assert (
        lower_bound(step_of([pod("1", "6Gi")] * 3), {"ng": node("4", "8Gi")}, NO_BOUNDS).nodes == 3
    )


def test_the_bound_held_for_an_hour_is_its_nodes_in_node_hours() -> None:
    steps = minutes(60, *[pod("2", "1Gi")] * 3)
    figures = oracle_node_hours(steps, {"ng": node("4", "8Gi")}, NO_BOUNDS)
    assert figures == {"oracle_node_hours": 2.0, "oracle_pods_left_out": 0}


def test_a_pod_that_can_use_two_groups_is_counted_on_the_roomiest() -> None:
    # Given 8 pods of 2 cores that fit a 16-core node or a 4-core one: one 16-core node
    # holds them all, so the bound is 1, not the 4 small nodes they would fill
    groups = {"big": node("16", "64Gi"), "small": node("4", "16Gi")}
    assert lower_bound(step_of([pod("2", "1Gi")] * 8), groups, NO_BOUNDS).nodes == 1
    # Given also 4 pods only the small group takes (its label): each resource's requests,
    # each pod's over its roomiest group's node, 8 x 2/16 + 4 x 2/4 = 3, which one big node
    # and two small ones achieve
    small_only = pod("2", "1Gi", nodeSelector={"size": "small"})
    groups["small"] = node("4", "16Gi", labels={"size": "small"})
    step = step_of([pod("2", "1Gi")] * 8 + [small_only] * 4)
    assert lower_bound(step, groups, NO_BOUNDS).nodes == 3


def test_the_bound_keeps_each_groups_minimum_and_maximum_and_the_node_limit() -> None:
    groups = {"ng": node("4", "8Gi")}
    assert lower_bound(step_of([]), groups, Bounds({"ng": (3, 10)})).nodes == 3
    many = step_of([pod("2", "1Gi")] * 40)  # 20 nodes' worth
    assert lower_bound(many, groups, Bounds({"ng": (0, 10)})).nodes == 10
    assert lower_bound(many, groups, Bounds({"ng": (0, 50)}, nodes=12)).nodes == 12


def test_the_bound_counts_gpus_and_leaves_out_pods_no_group_fits() -> None:
    gpus = {"gpu": node("8", "64Gi", extended={"nvidia.com/gpu": "1"})}
    step = step_of([pod("1", "1Gi", extended={"nvidia.com/gpu": "1"})] * 3 + [pod("16", "1Gi")])
    bound = lower_bound(step, gpus, NO_BOUNDS)
    assert (bound.nodes, bound.left_out) == (3, 1)


# --- the demand the bound reads: demand.demand ------------------------------------------


def test_a_queues_workers_are_the_tasks_sent_at_their_latest_less_those_done_at_earliest() -> None:
    from nodescaler_sandbox.scenario_file import Scenario

    # Given 10 tasks sent in minute 0, 2 minutes each, at most 4 workers, 10-s steps
    scenario = Scenario.model_validate(
        {
            "name": "queue",
            "minutes": 8,
            "groups": [{"name": "ng", "policy": "batch", "max": 5, "instanceType": "m5.xlarge"}],
            "queues": [{"name": "q", "tasks": {0: 10}, "taskMinutes": 2, "maxWorkers": 4}],
        }
    )
    workers = [sum(n for _, n in step) for step in demand(scenario)]
    # Then none before KEDA's first poll after the minute's last step (a task may come at
    # 00:50, its worker is made at the poll of 01:00), 4 while 10 are waiting or worked,
    # 4 at the earliest done at 2 minutes, 4 more at 4, the last 2 at 6
    assert workers[:6] == [0] * 6
    assert workers[6:24] == [4] * 18
    assert workers[24:36] == [2] * 12
    assert workers[36:] == [0] * 12
    # Given no node for them before minute 2 (none at the start, none booted before), the
    # first 4 are done at 4 minutes at the earliest, the next at 6, the last 2 at 8
    late = [sum(n for _, n in step) for step in demand(scenario, {"q": 120})]
    assert late[6:36] == [4] * 30
    assert late[36:] == [2] * 12


def test_a_deployment_changing_within_a_minute_counts_the_lesser_of_its_two_values() -> None:
    from nodescaler_sandbox.scenario_file import Scenario

    scenario = Scenario.model_validate(
        {
            "name": "steps",
            "minutes": 3,
            "groups": [{"name": "ng", "policy": "batch", "max": 5, "instanceType": "m5.xlarge"}],
            "deployments": [{"name": "web", "replicas": {0: 2, 1: 6, 2: 1}}],
        }
    )
    pods = [sum(n for _, n in step) for step in demand(scenario)]
    assert pods == [2] * 6 + [2] * 6 + [1] * 6


def test_a_pod_counts_once_a_node_could_have_booted_for_it() -> None:
    from nodescaler_sandbox.demand import shape_of
    from nodescaler_sandbox.scenario_file import Scenario

    # Given 2 pods, rising to 6 within minute 3, falling to 1 within minute 8, and a node
    # booting in 2 minutes
    scenario = Scenario.model_validate(
        {
            "name": "rise",
            "minutes": 10,
            "groups": [{"name": "ng", "policy": "batch", "max": 5, "instanceType": "m5.xlarge"}],
            "deployments": [{"name": "web", "replicas": {0: 2, 2: 2, 3: 6, 7: 6, 8: 1}}],
        }
    )
    web = shape_of(scenario.deployments[0])
    at_once = [sum(n for _, n in step) for step in demand(scenario)]
    booted = [sum(n for _, n in step) for step in demand(scenario, settle={web: 120})]
    # Then without a boot to wait for, the rise counts from the minute after its own
    assert at_once == [2] * 24 + [6] * 24 + [1] * 12
    # And with one, two minutes later (a node asked for within minute 3 is Ready within
    # minute 5 at the latest), and the fall as at once: a controller answering each pod
    # within a boot holds no fewer
    assert booted == [2] * 36 + [6] * 12 + [1] * 12


def _traced(tmp_path: Any, **traces: Any) -> Any:
    """A scenario of 10 minutes at 10-s steps on one group, with the given traces beside it."""
    from nodescaler_sandbox.scenario_file import Scenario

    return Scenario.model_validate(
        {
            "name": "traced",
            "minutes": 10,
            "groups": [{"name": "ng", "policy": "batch", "max": 9, "instanceType": "m5.xlarge"}],
            "path": tmp_path / "traced.yaml",
            **traces,
        }
    )


def test_a_pod_traces_job_counts_from_its_step_and_boot_until_it_could_be_done(
    tmp_path: Any,
) -> None:
    from nodescaler_sandbox.demand import trace_shape
    from nodescaler_sandbox.traces import PodRow

    # Given a job arriving at 15 s running 100 s once Ready 20 s after it starts, a service
    # arriving at 30 s deleted at 200 s, and an expendable pod (priority -11)
    (tmp_path / "pods.csv").write_text(
        "arrival_s,cpu,memory,run_s,delete_s,priority\n"
        "15,1,1Gi,100,,0\n30,2,1Gi,,200,0\n40,1,1Gi,,,-11\n"
    )
    scenario = _traced(tmp_path, podTraces=[{"file": "pods.csv", "readyAfterSeconds": 20}])
    counted = [dict(step) for step in demand(scenario)]
    job = trace_shape(PodRow(0, 0, {"cpu": "1", "memory": "1Gi"}))
    service = trace_shape(PodRow(0, 0, {"cpu": "2", "memory": "1Gi"}))
    # Then the job counts from its step (20 s) until 20 + 20 + 100 s, the service from
    # its step (30 s) until its deletion, and the expendable pod never
    assert [c.get(job, 0) for c in counted[:16]] == [0, 0] + [1] * 12 + [0, 0]
    assert [c.get(service, 0) for c in counted[:22]] == [0] * 3 + [1] * 17 + [0, 0]
    assert all(sum(c.values()) <= 2 for c in counted)
    # And with a boot of 60 s, each counts a boot later, and ends as before
    settled = [dict(step) for step in demand(scenario, settle={job: 60, service: 60})]
    assert [c.get(job, 0) for c in settled[:16]] == [0] * 8 + [1] * 6 + [0, 0]
    assert [c.get(service, 0) for c in settled[:22]] == [0] * 9 + [1] * 11 + [0, 0]


def test_a_request_traces_workers_follow_the_messages_its_workers_could_leave(
    tmp_path: Any,
) -> None:
    # Given 12 requests of 60 s at second 0, 5 messages a worker (KEDA's), at most 2
    # workers, Ready from second 30
    (tmp_path / "requests.csv").write_text("arrival_s,service_s\n" + "0,60\n" * 12)
    trace = {
        "name": "llm",
        "file": "requests.csv",
        "maxWorkers": 2,
        "worker": {"readyAfterSeconds": 30},
    }
    scenario = _traced(tmp_path, requestTraces=[trace])
    workers = [sum(n for _, n in step) for step in demand(scenario, {"llm": 0})]
    # Then the 2 workers take 2 requests a minute from second 30: 12 messages, 10 at 90 s,
    # 8 at 150 s, ... 0 at 390 s: 2 workers until 5 messages are left (270 s: 3 of 5, a
    # worker), held 5 minutes after by KEDA's stabilization: 2 until 570 s
    assert workers[:57] == [2] * 57
    assert workers[57:] == [1] * 3
    # And none before a node could hold one (the group has none before second 120)
    late = [sum(n for _, n in step) for step in demand(scenario, {"llm": 120})]
    assert late[:12] == [0] * 12
    assert late[12] == 2


def test_a_request_traces_new_workers_count_once_their_node_could_have_booted(
    tmp_path: Any,
) -> None:
    from nodescaler_sandbox.demand import shape_of

    # Given 5 long requests at second 0 and 10 more at 200: 1 worker, then 3 (the most)
    (tmp_path / "requests.csv").write_text(
        "arrival_s,service_s\n" + "0,900\n" * 5 + "200,900\n" * 10
    )
    trace = {"name": "llm", "file": "requests.csv", "maxWorkers": 3}
    scenario = _traced(tmp_path, requestTraces=[trace])
    at_once = [sum(n for _, n in step) for step in demand(scenario)]
    assert at_once[:21] == [1] * 20 + [3]
    # Then with a minute's boot, the 2 new ones count a minute later
    shape = shape_of(scenario.request_traces[0].worker)
    booted = [sum(n for _, n in step) for step in demand(scenario, settle={shape: 60})]
    assert booted[:27] == [1] * 26 + [3]


def test_a_deployments_replicas_spread_one_a_node_are_kept_apart_in_the_demand() -> None:
    from nodescaler_sandbox.cluster import apart_keys
    from nodescaler_sandbox.demand import shape_of
    from nodescaler_sandbox.scenario_file import DeploymentSpec

    def shape(name: str, spread: bool) -> Shape:
        spec = {"name": name, "replicas": {0: 3}, "onePerNode": spread}
        return shape_of(DeploymentSpec.model_validate(spec))

    # each deployment spread one a node apart from its own replicas, not another's
    zk, kafka = apart_keys(shape("zk", True).spec), apart_keys(shape("kafka", True).spec)
    assert zk and kafka and zk != kafka
    assert apart_keys(shape("web", False).spec) == []

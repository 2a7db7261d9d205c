"""The scenarios `make demo` runs, shortened, through the sandbox: moto's server and the
loopback API server started on loopback, the real handlers deciding on a virtual clock,
and the Cluster Autoscaler baseline scaling the same world."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from nodescaler_cli.main import main
from nodescaler_sandbox import runner as scenarios
from nodescaler_sandbox.sandbox import sandbox
from nodescaler_sandbox.scenario_file import Scenario, load_scenario
from nodescaler_sandbox.world import World

from tests.sandbox.conftest import (
    BASELINE,
    BOTH,
    NODESCALER,
    ONLY_OURS,
    SCENARIOS,
    SandboxRuns,
    run,
    scenario,
)

pytestmark = pytest.mark.slow  # moto's server and the API server, the runs each checks


def test_the_queue_burst_scales_out_at_once_and_back_to_zero(sandbox_runs: SandboxRuns) -> None:
    burst = scenario("queue-burst")
    queue = burst.queues[0].model_copy(update={"tasks": {0: 400}, "max_workers": 400})
    shortened = burst.model_copy(update={"minutes": 26, "queues": [queue]})
    summary, lines, folder = run(sandbox_runs, shortened, chart=True)
    ours = summary[NODESCALER]
    assert ours["peak_desired"] == {"gpu-training-ng": 100}  # 400 tasks, 4 a node
    assert ours["final_desired"] == {"gpu-training-ng": 0}
    # The tasks arrive within the first minute: the tick at 00:00 sees the first 54 and
    # asks 14 nodes, the fast path each 10 s the rest as they come, all 400 at 00:00:50;
    # then 3 minutes' boot, and 10 a task
    assert ours["minutes_to_empty_queues"] == 13.833
    assert ours["longest_demand_to_scale_request_minutes"] == {"gpu-training-ng": 0}
    # up a step at a time, down once: with launches timed to the second (each node a boot
    # after its request took effect, 1.7 s after the tick for the first 14), the 14 empty
    # nodes 00:22's tick let go before go with the rest at 00:23; before the first
    # scale-in the drain hook is put on the group, and the drain completes each of the
    # 100 instances' lifecycle actions
    assert ours["aws_write_calls"] == {"gpu-training-ng": 7 + 1 + 100}
    # every worker waited for its node's boot, no more (those KEDA made at its polls of
    # 00:30 and 01:00 less: their nodes were already booting)
    assert ours["pod_wait_minutes"]["gpu-training-ng"] == {
        "pods": 400,
        "p50": 2.8,
        "p99": 3.0,
        "max": 3.0,
    }
    assert any(line.startswith("00:00 | gpu-training-ng |") and "0 → 14" in line for line in lines)
    assert any(
        line.startswith("00:00:50 | gpu-training-ng |") and "83 → 100" in line for line in lines
    )
    written = json.loads((folder / "summary.json").read_text())
    assert written == summary
    assert summary[BASELINE]["peak_desired"] == {"gpu-training-ng": 100}
    # The bound: the 400 workers, 4 a node, on 100 nodes from the first boot (minute 3: the
    # group starts empty) until their 10-minute tasks are done: 100 × 10 / 60
    assert (summary["step_seconds"], summary["oracle_node_hours"]) == (10, 16.67)
    # Four workers fill a node for the 10 minutes of their tasks (from minute 3 to 13):
    # the rest of what each run paid for is idle
    for figures in (ours, summary[BASELINE]):
        assert figures["idle_node_hours"] == round(figures["node_hours"] - 100 * 10 / 60, 2)
    for output in (
        "timeline.txt",
        "timeline.json",
        "pods.json",
        "chart.png",
        "logs-nodescaler.jsonl",
    ):
        assert (folder / output).stat().st_size > 0


def shorter_ramp(policy: str) -> Scenario:
    """The capacity-reservation load in an hour, its group under `policy`."""
    ramp = scenario("capacity-reservation")
    api = ramp.deployments[0].model_copy(update={"replicas": {0: 9, 15: 80, 35: 80, 45: 9}})
    group = ramp.groups[0].model_copy(update={"policy": policy})
    return ramp.model_copy(update={"minutes": 60, "deployments": [api], "groups": [group]})


def test_the_reservation_stays_in_a_band_around_its_target(sandbox_runs: SandboxRuns) -> None:
    ran = run(sandbox_runs, shorter_ramp("microservices"))
    summary = ran.summary
    ours = summary[NODESCALER]

    def held(run: str) -> list[float]:  # CPU requested while the 80 pods hold steady
        return [r["cpu_requested_pct"] for r in ran.timeline(run) if 20 <= r["minute"] <= 35]

    assert all(45 <= pct <= 65 for pct in held(NODESCALER)), held(NODESCALER)  # target 60 %
    assert ours["final_desired"] == {"microservices-ng": 1}
    # The headroom is what it buys: the reactive baseline packs its nodes full, and pods
    # wait for nodes more often.
    assert min(held(BASELINE)) > 90
    assert ours["unschedulable_pod_minutes"] < summary[BASELINE]["unschedulable_pod_minutes"]


def test_a_buffer_lets_a_ramps_pods_start_without_waiting_for_a_node(
    sandbox_runs: SandboxRuns,
) -> None:
    ran = run(sandbox_runs, shorter_ramp("web"))  # room for 16 one-core pods
    summary = ran.summary
    ours, theirs = summary[NODESCALER], summary[BASELINE]
    timeline = {controller: ran.timeline(controller) for controller in BOTH}
    # once the first nodes are up, the ramp's pods hardly wait: the buffer is there first
    # (pods arriving between two ticks may outrun it for a step: under a pod-minute in all)
    late = [r["pending_pods"] for r in timeline[NODESCALER] if r["minute"] >= 6]
    assert sum(late) * summary["step_seconds"] / 60 < 1
    assert any(r["pending_pods"] > 0 for r in timeline[BASELINE] if r["minute"] >= 6)
    assert ours["unschedulable_pod_minutes"] * 2 <= theirs["unschedulable_pod_minutes"]
    # and the buffer stays when the load is gone: 9 pods and room for 16 need two nodes
    assert ours["final_desired"] == {"microservices-ng": 2}


def test_a_launch_failure_moves_the_pods_to_the_next_group_in_the_same_minute(
    sandbox_runs: SandboxRuns,
) -> None:
    summary, lines, _ = run(sandbox_runs, scenario("launch-failure", minutes=12))
    ours = summary[NODESCALER]
    # Spot fails at once, and again when new work comes after its 5-minute backoff
    assert ours["launch_failures_at_minute"] == [0.0, 8 + 5 / 6]  # in the new pods' step
    assert ours["final_desired"] == {"spot-ng": 0, "on-demand-ng": 3}
    first = [line for line in lines if line.startswith("00:00 | on-demand-ng")]
    assert first and "0 → 2" in first[0]  # on-demand took the 6 pods in minute 0
    assert ours["unschedulable_pod_minutes"] <= 24  # pods wait only for their nodes to boot
    # The baseline learns of the failure from the group's scaling activities at its next
    # scan, a minute on in the sandbox: its pods wait that minute longer.
    assert summary[BASELINE]["unschedulable_pod_minutes"] > ours["unschedulable_pod_minutes"]
    # We answer each pod within a boot, so we hold no fewer node-hours than the bound (the
    # new work at +8 min counts once a node could have booted for it); the baseline's
    # minute more of waiting is what takes it below (0.33 against 0.35 when written), by
    # no more than its pods' waits beyond the boot could save: no run is below that
    assert ours["node_hours"] >= summary["oracle_node_hours"]
    for side in (NODESCALER, BASELINE):
        assert summary[side]["node_hours"] >= summary[side]["oracle_node_hours_given_waits"]


def test_a_scale_in_drains_only_as_far_as_the_disruption_budget_allows(
    sandbox_runs: SandboxRuns,
) -> None:
    # The group from zero: the scale-out's nodes join at one second and the scheduler
    # spreads the web pods over them. (From its minimum of 1, the node it starts with joins
    # first, launches being timed to the second, and takes them all: the scale-in then
    # takes nodes empty of pods, with no drain for the budget to hold back.)
    web = scenario("pdb-scale-in", minutes=32)
    from_zero = web.model_copy(update={"groups": [web.groups[0].model_copy(update={"min": 0})]})
    summary = run(sandbox_runs, from_zero, ONLY_OURS).summary
    ours = summary[NODESCALER]
    assert ours["disruption_budget_short_minutes"] == 0
    assert ours["evictions_refused_by_budget"] > 0  # the budget held evictions back
    assert ours["drains"] and {d["outcome"] for d in ours["drains"]} == {"drained"}
    assert ours["final_desired"] == {"web-ng": 2}  # 8 web pods and room for 16 more
    assert ours["pods_killed_with_their_instance"] == 0
    # Every write the product made: the scale-out and the scale-in, each drain's lifecycle
    # action completed and the heartbeats of those that took over a minute (the sandbox
    # answers those for moto, after counting).
    assert ours["aws_write_calls"]["web-ng"] > 2 + len(ours["drains"])


def test_only_the_products_writes_are_counted_never_the_sandboxs_setup(tmp_path: Path) -> None:
    web = scenario("pdb-scale-in")  # its group has the drain hook
    with sandbox(web.policies_path, tmp_path, boot=timedelta(minutes=1)) as running:
        World(web, running, hooks=True)  # groups, launch configurations, the hook
        assert running.writes == {}
        with pytest.raises(ClientError, match="No active Lifecycle Action"):  # as AWS answers
            running.clients.autoscaling.record_lifecycle_action_heartbeat(
                AutoScalingGroupName="web-ng",
                LifecycleHookName="nodescaler-drain",
                InstanceId="i-unknown",
            )  # answered by the sandbox for moto, counted all the same: a call was made
        assert running.writes == {"web-ng": 1}


def test_the_sandbox_refuses_a_desired_capacity_outside_min_max_as_aws_does(
    tmp_path: Path,
) -> None:
    burst = scenario("queue-burst")
    with sandbox(burst.policies_path, tmp_path, boot=timedelta(minutes=1)) as running:
        World(burst, running, hooks=False)  # its group: gpu-training-ng, 0..600
        with pytest.raises(ClientError) as caught:
            running.clients.autoscaling.set_desired_capacity(
                AutoScalingGroupName="gpu-training-ng", DesiredCapacity=601
            )
    assert caught.value.response["Error"]["Message"] == (
        "New SetDesiredCapacity value 601 is above max value 600 for the AutoScalingGroup."
    )


def test_invoke_runs_one_function_on_a_sample_event_in_the_sandbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scenarios, "OUT", tmp_path)
    events = SCENARIOS.parent / "events"
    code = main(["invoke", "dispatch", str(events / "schedule-tick.json")])
    printed = capsys.readouterr().out
    assert code == 0
    assert '"queued": [\n    "gpu-training-ng"\n  ]' in printed  # the first scenario's group
    assert "gpu-training-ng: 0 → 600" in printed  # and its evaluation ran, as Lambda's would


def test_a_gpu_group_at_zero_grows_from_its_node_template_tags(sandbox_runs: SandboxRuns) -> None:
    ran = run(sandbox_runs, scenario("gpu-from-zero", minutes=25))
    summary = ran.summary
    for controller in (NODESCALER, BASELINE):
        figures = summary[controller]
        asked = [r["to"] for r in figures["scale_requests"] if r["group"] == "gpu-ng"]
        assert max(asked[:4]) == 6, controller  # a GPU a pod, from zero, as they come
        assert figures["pods_that_fit_no_group"] == {"count": 1, "first": ["too-big-1"]}
    # then nodescaler's 80 % CPU reservation keeps its fifth free: a node's last core fits
    # no 3-core pod, so each full node reads full, and 6 pods keep 8 nodes, no more
    ours = [r["to"] for r in summary[NODESCALER]["scale_requests"] if r["group"] == "gpu-ng"]
    assert ours == [1, 3, 4, 6, 8]
    assert summary[BASELINE]["peak_desired"]["gpu-ng"] == 6
    # the reservation itself asks for 8, at 75 % of them (the group's maximum binds not)
    [at_20] = [r for r in ran.timeline(NODESCALER) if r["group"] == "gpu-ng" and r["minute"] == 20]
    assert at_20["metrics"]["reservation-cpu"]["recommendation"] == 8
    # the pods arrive within the first minute; those after its tick wait for the next
    assert summary[NODESCALER]["longest_demand_to_scale_request_minutes"]["gpu-ng"] <= 1
    # nodescaler tells the pod why, with a NotTriggerScaleUp Event on it
    (told,) = summary[NODESCALER]["not_trigger_scale_up_events"]
    assert told == (
        "too-big-1: pod didn't trigger scale-up: cpu-ng: needs more nvidia.com/gpu than a node "
        "of the group has; gpu-ng: needs more nvidia.com/gpu than a node of the group has"
    )


def test_a_managed_group_at_zero_with_no_tags_grows_on_what_eks_says_of_it(
    sandbox_runs: SandboxRuns,
) -> None:
    # Given an EKS managed node group at zero whose ASG has no node-template tags, and 12
    # jobs at 00:10 selecting its label and tolerating its taint (which only EKS knows)
    summary = run(sandbox_runs, scenario("managed-from-zero", minutes=25)).summary
    # Then both grow it from zero, as DescribeNodegroup says its nodes will take them
    # (Cluster Autoscaler too: cloudprovider/aws/aws_manager.go, buildNodeFromTemplate),
    # 3 jobs a node, and every job is placed on it
    for controller in (NODESCALER, BASELINE):
        figures = summary[controller]
        assert figures["peak_desired"]["batch-ng"] == 4, controller
        assert figures["pods_that_fit_no_group"]["count"] == 0, controller
        assert "(never scheduled)" not in figures["pod_wait_minutes"], controller
        assert figures["pod_wait_minutes"]["batch-ng"]["max"] < 5, controller
    # nodescaler asked EKS for the first node within the jobs' first minute
    first = summary[NODESCALER]["scale_requests"][0]
    assert first == {"minute": 10.0, "group": "batch-ng", "from": 0, "to": 1}


def test_while_cloudwatch_is_down_only_nodes_empty_of_pods_go(sandbox_runs: SandboxRuns) -> None:
    ran = run(sandbox_runs, scenario("metric-outage", minutes=45), ONLY_OURS)
    summary, lines = ran.summary, ran.lines
    ours = summary[NODESCALER]
    timeline = ran.timeline(NODESCALER)
    during = [r for r in timeline if 20 <= r["minute"] < 40]
    # no node a pod runs on went while the metric was missing: no worker evicted or killed
    assert all(r["desired"] >= r["used_nodes"] for r in during)
    assert (ours["evictions"], ours["pods_killed_with_their_instance"]) == (0, 0)
    # and the nodes went as their workers finished, before the outage (the backlog reads
    # the tasks waiting: those at work are in flight) and within it, not after it
    assert 0 < during[0]["desired"] < 16 and during[-1]["desired"] == 0
    assert any("so only nodes empty of pods go" in line for line in lines)
    assert ours["faults"]["calls_failed"]["cloudwatch-outage"] > 0
    assert ours["final_desired"] == {"workers-ng": 0}
    assert "00:20 | (fault) | - | - | cloudwatch-outage begins" in lines


def test_a_preferred_group_at_its_maximum_leaves_the_pods_to_the_next(
    sandbox_runs: SandboxRuns,
) -> None:
    summary = run(sandbox_runs, scenario("spot-at-max", minutes=6), ONLY_OURS).summary
    ours = summary[NODESCALER]
    assert ours["scale_requests"][:2] == [
        {"minute": 0, "group": "spot-ng", "from": 0, "to": 3},  # its policy's maximum
        {"minute": 0, "group": "on-demand-ng", "from": 0, "to": 18},  # the rest, at once
    ]
    assert ours["pod_wait_minutes"]["overall"]["max"] == 2.0  # the nodes' boot, no more


def test_three_zone_groups_grow_together_from_2_0_1_to_3_3_3(sandbox_runs: SandboxRuns) -> None:
    summary, lines, _ = run(sandbox_runs, scenario("balanced-zones", minutes=8))
    for controller in (NODESCALER, BASELINE):  # the baseline balances too
        peaks = summary[controller]["peak_desired"]
        assert peaks == {"web-a": 3, "web-b": 3, "web-c": 3}, controller
    # the boot, and the next tick for pods that arrived after one
    assert summary[NODESCALER]["pod_wait_minutes"]["overall"]["max"] <= 3.0
    # the fast path asks as the pods come, a node at a time, each to the zone behind
    assert any(
        line.startswith("00:05:40 | web-a |") and "(balanced with web-b +1) → 3" in line
        for line in lines
    )


def test_a_batch_group_sheds_its_nodes_once_no_job_runs_on_them_and_returns_to_0(
    sandbox_runs: SandboxRuns,
) -> None:
    summary, lines, _ = run(sandbox_runs, scenario("batch-to-zero", minutes=55))
    ours = summary[NODESCALER]
    downs = [(r["minute"], r["to"]) for r in ours["scale_requests"] if r["to"] < r["from"]]
    # the 4 jobs left at 21 still run on each of the 3 nodes: consolidation WhenEmpty
    # evicts none of them; each node goes once its last jobs end (they arrived within a
    # minute, at different steps, and end so): two at 42, the last a minute on
    assert downs == [(42, 1), (43, 0)]
    assert (ours["evictions"], ours["pods_killed_with_their_instance"]) == (0, 0)
    assert ours["final_desired"] == {"batch-ng": 0}
    shed = next(line for line in lines if "1 → 0" in line)
    assert "1 of its nodes unneeded (1 empty, 0 whose pods fit elsewhere)" in shed
    # the group's termination policy, the terminate function, let the empty ones go
    assert ours["termination_policy"] == {"asked": 2, "instances_allowed": 3, "failed": 0}
    # CA with its defaults drains nodes at or under half used, evicting running jobs (3
    # here): nodescaler keeps more node-hours than it only where CA disrupted jobs to save
    theirs = summary[BASELINE]
    assert ours["node_hours"] <= theirs["node_hours"] or theirs["evictions"] > 0


def test_a_scale_in_never_takes_the_nodes_of_pods_a_budget_keeps(sandbox_runs: SandboxRuns) -> None:
    shortened = scenario("pdb-no-eviction", minutes=42)
    ours = run(sandbox_runs, shortened, ONLY_OURS).summary[NODESCALER]
    assert ours["final_desired"] == {"web-ng": 2}  # the two nodes of the ledger's pods stay
    assert ours["pods_killed_with_their_instance"] == 0
    assert ours["disruption_budget_short_minutes"] == 0
    assert ours["evictions_refused_by_budget"] == 0  # no drain waits on the budget
    # Auto Scaling's own pick (as before the terminate function): its drains wait out their
    # 10 minutes on the budget, then the ledger's pods die with their instances
    default = shortened.model_copy(
        update={
            "groups": [shortened.groups[0].model_copy(update={"termination_policy": "default"})]
        }
    )
    theirs = run(sandbox_runs, default, ONLY_OURS).summary[NODESCALER]
    assert theirs["pods_killed_with_their_instance"] > 0
    assert theirs["disruption_budget_short_minutes"] > 0


TINY = """\
name: {name}
minutes: {minutes}
policies: {policies}
groups:
  - {{name: ng, policy: batch, max: 3, instanceType: m5.xlarge}}
deployments:
  - {{name: jobs, cpu: "1", memory: 1Gi, replicas: {{0: 2}}}}
"""


def test_several_scenarios_run_a_core_each_and_print_in_their_order(tmp_path: Path) -> None:
    policies = SCENARIOS / "policies"
    files = []
    for name, minutes in (("short", 3), ("longer", 6)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(TINY.format(name=name, minutes=minutes, policies=policies))
        files.append(path)
    printed: list[str] = []
    loaded = [load_scenario(path) for path in files]
    summaries = scenarios.run_all(files, loaded, write=printed.append, out=tmp_path / "out")
    assert [s["scenario"] for s in summaries] == ["short", "longer"]
    headings = [line for line in printed if line.startswith("\n== ")]
    assert [h.split(":")[0] for h in headings] == ["\n== short", "\n== longer"]
    assert (tmp_path / "out" / "longer" / "summary.json").exists()


def test_a_prometheus_query_of_the_backlog_scales_the_group_out_and_back(
    sandbox_runs: SandboxRuns,
) -> None:
    render = scenario("prometheus-queue")
    queue = render.queues[0].model_copy(update={"tasks": {0: 40}})
    shortened = render.model_copy(update={"minutes": 22, "queues": [queue]})
    summary, lines, _ = run(sandbox_runs, shortened, ONLY_OURS)
    ours = summary[NODESCALER]
    assert ours["peak_desired"] == {"render-ng": 10}  # 40 jobs waiting, 4 a node
    assert ours["final_desired"] == {"render-ng": 0}
    # the 40 jobs arrive within the first minute, scraped each step: the fast path asks as
    # the backlog grows, and the group has its 10 before the 00:01 tick
    assert any(
        line.startswith("00:00:") and "render-backlog: 40 (series {}) → 10 [fast path]" in line
        for line in lines
    )

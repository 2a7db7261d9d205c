"""Runs a scenario file in the sandbox, three times: once scaled by nodescaler (the real
handlers, on the events AWS would send), once by the reactive baseline in the manner of
Cluster Autoscaler with its defaults, and once by that baseline tuned as an operator
would to match the group's policy (`baseline_tuning`: unneeded time, overprovisioning
placeholders, bounds, scheduled actions); then writes what happened under
`out/demo/<scenario>/`:
- `timeline.txt` (also printed): time, group, metrics against targets, current → desired, why;
- `summary.json`: the bound (`oracle`: node-hours no run holding the demand can beat, and a
  first-fit decreasing packing beside it, a heuristic), and
  both runs' figures side by side (`figures`: node-hours and idle node-hours, pod waits and
  Ready times, each group's demand-to-scale-request time, evictions and pods killed,
  budget-short minutes, Auto Scaling writes, sizes; see scenarios/README.md);
- `chart.png` (`chart`): a panel for each group's nodes, each of its metrics, and the
  cluster's nodes, vCPUs and memory against its limits, and pods waiting;
- `timeline.json` (every step, both runs), `pods.json` (each pod: created, found no node,
  bound, Ready, gone, in minutes, and its group) and `logs-<run>.jsonl` (the functions' logs).
A test runs only the controllers it checks (`run`'s `controllers`), without the chart, and
may learn the days before `judgedFrom` at coarser steps (`learn_step`); `make demo` runs
all three and draws. `seed` moves arrivals within a minute and placement ties (0: as the
sandbox always had them); `run_seeds` runs a scenario with several and writes their
summaries made one (`seeds`), the other seeds' runs under `seeds/<seed>/`.
"""

from __future__ import annotations

import itertools
import json
import math
import multiprocessing
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nodescaler_sandbox import (
    baseline_tuning,
    cadence,
    demand,
    figures,
    latency,
    oracle,
    seeds,
    traces,
)
from nodescaler_sandbox.baseline import (
    SCAN,
    DrainFlags,
    Flags,
    GroupSpec,
    Limits,
    ReactiveBaseline,
    managed_node_group,
)
from nodescaler_sandbox.cadence import EVERY_MINUTE, MINUTE, Cadence
from nodescaler_sandbox.cluster import Room, extended_requests, requests
from nodescaler_sandbox.figures import PodRecord
from nodescaler_sandbox.outages import THROTTLED, Outages
from nodescaler_sandbox.provision import group_sizes
from nodescaler_sandbox.sandbox import REGION, ROOT, Sandbox, sandbox
from nodescaler_sandbox.scenario_file import Scenario, load_scenario
from nodescaler_sandbox.world import World, instance_capacity, node_labels
from nodescaler_sandbox.zonal_shifts import CLUSTER_ARN

if TYPE_CHECKING:
    from nodescaler_sandbox.chart import ClusterChart, GroupChart

OUT = Path("out/demo")
SCENARIOS = ROOT / "scenarios"
NODESCALER, BASELINE = "nodescaler", "cluster-autoscaler-baseline"
TUNED = "cluster-autoscaler-tuned"  # the baseline as an operator tunes it to the policy
CONTROLLERS = (NODESCALER, BASELINE, TUNED)  # what `make demo` runs, in its columns' order
LABELS = {NODESCALER: "nodescaler", BASELINE: "CA defaults", TUNED: "CA tuned"}


def scenario_files() -> list[Path]:
    """The scenarios in the repository, in the order `make demo` runs them: by their
    number (10 after 9), then name."""

    def order(path: Path) -> tuple[int, str]:
        number, _, _ = path.name.partition("-")
        return (int(number) if number.isdigit() else 10**6, path.name)

    return sorted(SCENARIOS.glob("*.yaml"), key=order)


@dataclass
class Run:
    """One run of a scenario: every step of every group (`minutes`: a row a group a step,
    its `minute` the step's time), and what was asked of AWS."""

    controller: str
    minutes: list[dict[str, Any]] = field(default_factory=list)
    scale_requests: list[dict[str, Any]] = field(default_factory=list)
    # raises set back within their step, which `scale_requests` (from the rows) never shows
    undone_raises: list[dict[str, Any]] = field(default_factory=list)
    writes: dict[str, int] = field(default_factory=dict)
    launch_failures: list[tuple[float, str]] = field(default_factory=list)
    budget_short: list[int] = field(default_factory=list)  # minutes a budget was short
    drains: list[dict[str, Any]] = field(default_factory=list)  # the drain function's results
    evictions_asked: int = 0
    evicted: int = 0
    pods: list[PodRecord] = field(default_factory=list)
    killed: int = 0  # pods that went with their instance, never evicted
    nodes_removed: int = 0
    faults_injected: dict[str, int] = field(default_factory=dict)  # kind → calls failed
    tasks_lost: int = 0  # sent while their queue was deleted
    failed_invocations: int = 0  # of the functions, which Lambda would retry
    termination_asked: list[tuple[str, list[str]]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # Kubernetes Events written
    termination_failed: int = 0
    # each group's node as the cluster's limits count it (its instance type): vCPUs, GiB
    node_sizes: dict[str, tuple[float, float]] = field(default_factory=dict)
    steps: list[oracle.Step] = field(default_factory=list)  # the pods existing, each step
    templates: dict[str, Room] = field(default_factory=dict)  # what a group's new node offers
    settings: dict[str, Any] = field(default_factory=dict)  # CA tuned's flags and placeholders
    replayed: dict[str, Any] = field(default_factory=dict)  # each trace's figures (`traces`)
    workloads: dict[str, str] = field(default_factory=dict)  # trace pod → its workload label


def run(
    scenario: Scenario,
    *,
    out: Path | None = None,
    write: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
    controllers: Sequence[str] = CONTROLLERS,
    chart: bool = True,
    learn_step: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The scenario under each of `controllers` (by default nodescaler, the baseline and
    the baseline tuned); returns the summary, a key a controller run (its `oracle_node_hours`
    the least of the runs made). `chart`: draw chart.png (of nodescaler and the baseline).
    `learn_step`: the steps before the judged minutes, in seconds (`_step_times`).
    `seed`: arrivals within a minute and placement ties (`seeds`); 0 as ever."""
    runs_asked = [c for c in CONTROLLERS if c in controllers]
    if not runs_asked or len(runs_asked) != len(controllers):
        raise ValueError(f"controllers: {list(controllers)}: each one of {list(CONTROLLERS)}")
    if chart and not {NODESCALER, BASELINE} <= set(runs_asked):
        raise ValueError(f"chart: draws {NODESCALER} beside {BASELINE}: run both, or no chart")
    times = _step_times(scenario, learn_step)
    folder = out or OUT / scenario.name
    folder.mkdir(parents=True, exist_ok=True)
    write(f"\n== {scenario.name}: {scenario.description.strip()}")
    runs = {
        controller: _simulate(scenario, controller, folder, progress, times, seed=seed)
        for controller in runs_asked
    }
    if progress:
        progress("")  # the live line gives way to the timeline
    timeline = _timeline(scenario, runs.get(NODESCALER) or runs[runs_asked[0]])
    (folder / "timeline.txt").write_text("\n".join(timeline) + "\n")
    for line in timeline:
        write(line)
    bound = _oracle(scenario, runs.values(), times)
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "start": scenario.start.isoformat(),
        "minutes": scenario.minutes,
        "step_seconds": scenario.step_seconds,
        "seeds": [seed],
        **bound,
        **{controller: _summarize(scenario, result) for controller, result in runs.items()},
    }
    for controller, result in runs.items():
        summary[controller]["oracle_node_hours_given_waits"] = _bound_given_waits(
            scenario, result, float(bound["oracle_node_hours"])
        )
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    timelines = {name: r.minutes for name, r in runs.items()}
    (folder / "timeline.json").write_text(json.dumps(timelines) + "\n")
    pods = {name: [figures.as_row(p) for p in r.pods] for name, r in runs.items()}
    (folder / "pods.json").write_text(json.dumps(pods) + "\n")
    if chart:
        _chart(scenario, runs, folder / "chart.png")
    write(_side_by_side(summary))
    write(f"   → {folder}/ (timeline.txt, summary.json{', chart.png' if chart else ''}, logs)")
    return summary


def run_seeds(
    scenario: Scenario,
    seeds_run: Sequence[int],
    *,
    out: Path | None = None,
    write: Callable[[str], None] = print,
    **options: Any,
) -> dict[str, Any]:
    """The scenario run (`run`) with each of `seeds_run`: the first as one run is, in
    `out`; the others quietly, without a chart, in `out`/seeds/<seed>/. Returns their
    summaries made one (`seeds.aggregate`), also written to `out`/summary.json."""
    if not seeds_run or len(set(seeds_run)) != len(seeds_run):
        raise ValueError(f"seeds: {list(seeds_run)}: one or more, each once")
    folder = out or OUT / scenario.name
    first, *others = seeds_run
    summaries = [run(scenario, out=folder, write=write, seed=first, **options)]
    options.pop("progress", None)
    for seed in others:
        write(f"   seed {seed} of {list(seeds_run)} …")
        summaries.append(
            run(
                scenario,
                out=folder / "seeds" / str(seed),
                write=lambda line: None,
                seed=seed,
                **{**options, "chart": False},
            )
        )
    summary = seeds.aggregate(summaries, seeds_run)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def run_one(scenario: Scenario, controller: str, out: Path) -> dict[str, Any]:
    """The scenario under one controller alone: its summary (as `run` gives it); its
    timeline in `out`/timeline.txt."""
    out.mkdir(parents=True, exist_ok=True)
    result = _simulate(scenario, controller, out, None, _step_times(scenario, None))
    (out / "timeline.txt").write_text("\n".join(_timeline(scenario, result)) + "\n")
    return _summarize(scenario, result)


def run_file(path: Path, **options: Any) -> dict[str, Any]:
    return run(load_scenario(path), **options)


def _run_quietly(
    path: Path, out: Path | None, seeds_run: Sequence[int] = (0,)
) -> tuple[dict[str, Any] | None, list[str]]:
    """One scenario in a worker process: its summary (None if it failed), and what it
    printed, a failure's traceback last."""
    printed: list[str] = []
    try:
        scenario = load_scenario(path)
        folder = None if out is None else out / scenario.name
        return run_seeds(scenario, seeds_run, out=folder, write=printed.append), printed
    except Exception:  # told in order with the others, not lost behind them
        return None, [*printed, f"{path}: the run failed\n{traceback.format_exc()}"]


def run_all(
    files: Sequence[Path],
    scenarios: Sequence[Scenario],
    write: Callable[[str], None] = print,
    out: Path | None = None,
    seeds_run: Sequence[int] = (0,),
) -> list[dict[str, Any]]:
    """Every scenario, one a core at a time (each starts its own sandbox: moto's server and
    an API server on ports of its own), the longest first; each one's output printed in
    the scenarios' order as soon as those before it are done. The summaries in order."""
    workers = max(1, min(os.cpu_count() or 1, len(files)))
    write(
        f"Running {len(files)} scenarios, {workers} at a time "
        "(each three times: nodescaler, CA defaults, CA tuned"
        + (f"; with seeds {list(seeds_run)})" if len(seeds_run) > 1 else ")")
    )
    longest_first = sorted(range(len(files)), key=lambda i: -scenarios[i].minutes)
    done: dict[int, tuple[dict[str, Any] | None, list[str]]] = {}
    shown = 0
    context = multiprocessing.get_context("spawn")  # no thread or socket inherited
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_run_quietly, files[i], out, seeds_run): i for i in longest_first}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            while shown in done:
                for line in done[shown][1]:
                    write(line)
                shown += 1
    failed = [str(files[i]) for i in range(len(files)) if done[i][0] is None]
    if failed:
        raise RuntimeError(f"scenarios that failed: {', '.join(failed)} (tracebacks above)")
    return [summary for summary, _ in (done[i] for i in range(len(files))) if summary]


# --- one run ---------------------------------------------------------------------------


def _step_times(scenario: Scenario, learn_step: int | None) -> list[int]:
    """The steps' times, in seconds from the start: every `stepSeconds`; or, given
    `learn_step` (a multiple of it), those before `judgedFrom` every `learn_step` (a test
    learning a day quicker: the judged steps are the scenario's, whatever came before)."""
    fine = cadence.steps(scenario.minutes, scenario.step_seconds)
    if learn_step is None:
        return list(fine)
    if learn_step % scenario.step_seconds:
        raise ValueError(
            f"learn_step: {learn_step} s is not a multiple of {scenario.name}'s "
            f"stepSeconds ({scenario.step_seconds})"
        )
    if scenario.queues:  # a queue's tasks arrive at the step of the minute drawn for them
        raise ValueError(f"learn_step: {scenario.name} has queues, drawn at its own steps")
    judged = scenario.judged_from * MINUTE
    return [*range(0, math.ceil(judged), learn_step), *(at for at in fine if at >= judged)]


def _simulate(
    scenario: Scenario,
    controller: str,
    folder: Path,
    progress: Callable[[str], None] | None,
    times: Sequence[int],
    *,
    seed: int = 0,
) -> Run:
    environment = dict(scenario.environment)
    if scenario.zonal_shifts:  # the sandbox answers ARC: read it, as a deployed stack does
        environment.setdefault("ZONAL_SHIFT_RESOURCES", json.dumps([CLUSTER_ARN]))
    boot = timedelta(minutes=scenario.boot_minutes)
    result = Run(controller)
    with (
        sandbox(
            scenario.policies_path,
            folder / controller,
            boot=boot,
            environment=environment,
            start=scenario.start,
            warm_boot=timedelta(minutes=scenario.warm_boot_minutes),
            prometheus=scenario.prometheus is not None and controller == NODESCALER,
        ) as box,
        (folder / f"logs-{controller}.jsonl").open("w") as log,
        box.logging_to(log),
    ):
        world = World(scenario, box, hooks=controller == NODESCALER, seed=seed)
        outages = Outages(scenario.faults, box)
        act = _controller(scenario, controller, box, world, outages, settings=result.settings)
        box.takes_effect = _takes_effect(
            world, controller, _charge(controller, scenario, result.settings)
        )
        decisions = Decisions(box) if controller == NODESCALER else None
        shapes: dict[str, oracle.Shape] = {}
        kept = Unchanged(world)
        for index, at in enumerate(times):  # seconds from the start
            step = at - times[index - 1] if index else scenario.step_seconds  # ending at `at`
            after = times[index + 1] - at if index + 1 < len(times) else scenario.step_seconds
            minute = round(at / MINUTE, 3)
            outages.at(minute)
            world.step(at)
            act(at, step)  # each controller on its own cadence (`cadence`)
            box.fail_launches(deliver=controller == NODESCALER)
            world.react()  # drains start on the instances just let go
            kept.look()
            result.minutes.extend(_observe(world, decisions, minute, kept))
            result.steps.append(kept.get("pods", lambda: _pods_existing(world, shapes)))
            world.record_pods()
            if progress:
                progress(_progress_line(scenario, controller, minute, result.minutes))
            box.advance(after / MINUTE, between=world.react)
        _collect(result, scenario, box, world, outages)
    result.scale_requests = _scale_requests(
        result.minutes, {g.name: g.min for g in scenario.groups}
    )
    writes = [
        ((at - scenario.start).total_seconds() / 60, group, desired, cause)
        for at, group, desired, cause in box.desired_writes
    ]
    result.undone_raises = figures.undone_raises(
        result.minutes, writes, step_seconds=scenario.step_seconds
    )
    return result


def _collect(result: Run, scenario: Scenario, box: Sandbox, world: World, outages: Outages) -> None:
    """What the run's sandbox saw, read into `result` before the sandbox closes."""
    outages.close()
    result.faults_injected = dict(outages.injected)
    result.failed_invocations = len(box.failed_invocations)
    result.termination_asked = list(box.termination.invocations)
    result.termination_failed = len(box.termination.failures)
    result.tasks_lost = world.tasks_lost
    result.replayed = traces.replayed(world)
    result.workloads = {k: v for t in world.pod_traces for k, v in t.workloads.items()}
    result.writes = dict(box.writes)
    result.launch_failures = [
        ((at - scenario.start).total_seconds() / 60, group) for at, group in box.launch_failures
    ]
    result.budget_short = figures.budget_short_minutes(world.budget_looks)
    result.drains = list(box.drained)
    held_room = sum(  # overprovisioning placeholders evicted: room let go, not work
        1
        for _, name, _ in world.cluster.store.evictions
        if name.startswith(baseline_tuning.PLACEHOLDER_PREFIX)
    )
    result.evictions_asked = len(world.cluster.store.evictions) - held_room
    result.evicted = world.cluster.store.evicted - held_room
    result.pods = [
        p for p in world.pods.values() if not p.name.startswith(baseline_tuning.PLACEHOLDER_PREFIX)
    ]
    result.events = list(world.cluster.store.objects["events"].values())
    result.killed = len(world.cluster.killed)
    result.nodes_removed = world.cluster.nodes_removed
    result.templates = {g.name: world.cluster.empty_node(g.name) for g in scenario.groups}
    result.node_sizes = {
        g.name: _node_size(box.client("ec2"), g.instance_type) for g in scenario.groups
    }


def _controller(
    scenario: Scenario,
    controller: str,
    box: Sandbox,
    world: World,
    outages: Outages,
    *,
    settings: dict[str, Any] | None = None,
) -> Callable[[int, int], None]:
    """What a controller does at a step (its time in seconds from the start, and the
    step's length), each part on its real cadence, not the step's; CA tuned's settings
    written into `settings`."""
    if controller == NODESCALER:
        for service in THROTTLED:
            outages.watch(service, getattr(box.clients, service))

        tick = Cadence(scenario.tick_minutes * MINUTE)  # the stack's EventBridge schedule

        def nodescaler(at: int, step: int) -> None:
            # An exporter's gauge is current whenever scraped: Prometheus holds it within a
            # step (a scrape interval of at most the world's), before anything reads it.
            if scenario.prometheus:
                box.publish_gauges(world.gauges())
            if EVERY_MINUTE.due(at, step) and (scenario.queues or scenario.request_traces):
                box.publish_queue_metrics(world.queue_depths())  # SQS's, once a minute
            if scenario.alarms:
                box.evaluate_alarms()  # each alarm when its evaluation is due
            if tick.due(at, step):
                box.tick()
            # The fast path looks every 5 s; the world moves in steps of 10: a look a step is
            # what that rate sees of it. Its schedule starts an invocation each minute.
            box.fast_look(invoked=EVERY_MINUTE.due(at, step))

        return nodescaler
    actions: baseline_tuning.ScheduledActions | None = None
    flags = Flags()
    if controller == TUNED:
        actions, flags = _tune(scenario, box, world, {} if settings is None else settings)
    baseline = ReactiveBaseline(
        world.cluster,
        outages.watch("autoscaling", box.controller_autoscaling()),
        _as_cluster_autoscaler_reads_them(scenario, box),
        ReactiveBaseline.expander_chain(scenario.environment.get("EXPANDERS")),
        Limits.of(scenario.environment),
        DrainFlags.of(scenario.environment),
        settings=flags,
    )

    scan = Cadence(int(SCAN.total_seconds()))

    def cluster_autoscaler(at: int, step: int) -> None:
        # the tuned run's scheduled actions are Auto Scaling's, run at their time; the
        # baseline sees their bounds at its Auto Scaling cache's next refresh
        if actions is not None:
            actions.run(box.clock.now())
        if not scan.due(at, step) or outages.kubernetes_down:  # it reads the API server
            return
        try:
            baseline.act(box.clock.now())
        except ClientError:  # an AWS call refused (a fault): the next scan tries again
            return

    return cluster_autoscaler


def _tune(
    scenario: Scenario, box: Sandbox, world: World, settings: dict[str, Any]
) -> tuple[baseline_tuning.ScheduledActions, Flags]:
    """The tuned run's settings, made before it starts (`baseline_tuning`): each group's
    tags, bounds and scheduled actions (those already due applied, as if they had been
    running; a forecast's as scheduled minimums from its first day), its nodes' group
    label, its overprovisioning placeholders; the cluster's CapacityBuffers' pods, as CA
    injects them; and the cluster's flags. What it ran with is written into `settings`."""
    from nodescaler.adapters.deployed_policies import load_policies

    policies = load_policies(scenario.policies_path)
    autoscaling = box.client("autoscaling")
    tunings = []
    for group in scenario.groups:
        policy = policies[group.policy]
        tuning = baseline_tuning.tune(policy, group.name, group.min, group.max)
        if baseline_tuning.has_forecast(policy):
            tuning = replace(
                tuning,
                scheduled_actions=tuning.scheduled_actions
                + _forecast_minimums(scenario, world, tuning),
            )
        baseline_tuning.configure(autoscaling, tuning)
        world.cluster.labels[group.name] = world.cluster.labels[group.name] | tuning.labels
        world.deployments += [
            baseline_tuning.placeholder_deployment(p, i) for i, p in enumerate(tuning.placeholders)
        ]
        tunings.append(tuning)
    buffers = baseline_tuning.buffer_placeholders(scenario.capacity_buffers)
    world.deployments += [
        baseline_tuning.placeholder_deployment(p, i) for i, p in enumerate(buffers)
    ]
    actions = baseline_tuning.ScheduledActions(autoscaling, datetime.min.replace(tzinfo=UTC))
    actions.run(box.clock.now())
    flags = baseline_tuning.cluster_flags(tunings)
    settings |= baseline_tuning.settings(flags, tunings, buffers)
    return actions, flags


def _forecast_minimums(
    scenario: Scenario, world: World, tuning: baseline_tuning.GroupTuning
) -> list[baseline_tuning.ScheduledAction]:
    """The group's scheduled minimums from the scenario's first day (the history its
    forecast learns from): each minute, the nodes the demand it can take needs."""
    group = next(g for g in scenario.groups if g.name == tuning.group)
    room = {group.name: world.cluster.empty_node(group.name)}
    per_minute = MINUTE // scenario.step_seconds
    day = itertools.islice(demand.demand(scenario), 0, 24 * 60 * per_minute, per_minute)
    needed = [oracle.lower_bound(step, room, oracle.Bounds({})).nodes for step in day]
    boot = scenario.warm_boot_minutes if group.warm_pool else scenario.boot_minutes
    return baseline_tuning.forecast_minimums(
        group.name,
        needed,
        scenario.start,
        timedelta(minutes=math.ceil(boot)),
        (tuning.min_size, tuning.max_size),
    )


def _as_cluster_autoscaler_reads_them(scenario: Scenario, box: Sandbox) -> dict[str, GroupSpec]:
    """Each group's bounds, tags and instance type's capacity, read from AWS."""
    described = box.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[g.name for g in scenario.groups]
    )["AutoScalingGroups"]
    tags = {d["AutoScalingGroupName"]: {t["Key"]: t["Value"] for t in d["Tags"]} for d in described}
    bounds = {d["AutoScalingGroupName"]: (d["MinSize"], d["MaxSize"]) for d in described}
    return {
        g.name: GroupSpec(
            *bounds[g.name],
            instance_capacity(box.client("ec2"), g.instance_type),
            tags[g.name],
            node_labels(box.client("ec2"), g.instance_type),
            *managed_node_group(box.client("eks"), tags[g.name]),
        )
        for g in scenario.groups
    }


def _node_size(ec2: Any, instance_type: str) -> tuple[float, float]:
    """vCPUs and memory (GiB) of an instance type, as nodescaler counts them against the
    cluster's limits (not a `node:` shape the scenario gives its nodes)."""
    described = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    return described["VCpuInfo"]["DefaultVCpus"], described["MemoryInfo"]["SizeInMiB"] / 1024


@dataclass
class Unchanged:
    """Figures of the cluster kept while it stays as it was: the store's version (every
    pod or node put or deleted moves it) and the instances a hook holds. A step where
    nothing moved has the last step's figures, without another pass over every pod."""

    world: World
    _state: tuple[int, frozenset[str]] = (-1, frozenset())
    _kept: dict[str, tuple[tuple[int, frozenset[str]], Any]] = field(default_factory=dict)

    def look(self) -> None:
        """The cluster as it is at this step."""
        cluster = self.world.cluster
        held = frozenset(i for i, instance in cluster.instances.items() if instance.held)
        self._state = (cluster.store.resource_version, held)

    def get(self, name: str, figure: Callable[[], Any]) -> Any:
        kept = self._kept.get(name)
        if kept is None or kept[0] != self._state:
            kept = self._kept[name] = (self._state, figure())
        return kept[1]


def _observe(
    world: World, decisions: Decisions | None, minute: float, kept: Unchanged
) -> list[dict[str, Any]]:
    """One row a group: sizes, the pods and queues it serves, and its last decision."""
    desired = {name: size for name, (size, _) in group_sizes(REGION).items()}
    pending = kept.get("pending", lambda: world.pending() - _placeholders_pending(world))
    queues = world.queue_depths()
    rows = []
    pools, now = world.box.warm_pools, world.box.clock.now()
    for group in world.scenario.groups:
        cpu, memory = kept.get(f"reservation {group.name}", partial(world.reservation, group.name))
        row: dict[str, Any] = {
            "minute": minute,
            "group": group.name,
            "desired": desired[group.name],
            "in_service": world.cluster.ready_nodes(group.name),
            "held": world.cluster.held(group.name),  # drained before they go, still billed
            # its warm pool: instances waiting, and what the pool costs in running instances
            "warm": pools.waiting(group.name, now),
            "warm_billed": round(pools.billed(group.name, now), 3),
            "pending_pods": pending,
            "queues": queues,
            "cpu_requested_pct": round(cpu, 1),
            "memory_requested_pct": round(memory, 1),
            "used_nodes": kept.get(f"used {group.name}", partial(_used_nodes, world, group.name)),
        }
        if decisions is not None:
            row |= decisions.of(group.name)
        rows.append(row)
    return rows


def _placeholders_pending(world: World) -> int:
    """Overprovisioning placeholders waiting: room asked for, not pods waiting for a node."""
    return sum(
        1
        for p in world.cluster.store.objects["pods"].values()
        if not p["spec"].get("nodeName") and baseline_tuning.is_placeholder(p)
    )


def _used_nodes(world: World, group: str) -> float:
    """The group's nodes in service as their pods' requests fill them: each node's dominant
    share (`figures.dominant_share`), summed."""
    cluster = world.cluster
    nodes = {
        n["metadata"]["name"]: n
        for n in cluster.group_nodes(group)
        if not cluster.instances[n["spec"]["providerID"].rsplit("/", 1)[-1]].held
    }
    asked: dict[str, dict[str, float]] = {name: {} for name in nodes}
    for pod in cluster.store.objects["pods"].values():
        on = asked.get(pod["spec"].get("nodeName"))
        if on is not None and not baseline_tuning.is_placeholder(pod):  # held room is idle
            cpu, memory = requests(pod)
            for resource, amount in (
                ("cpu", cpu),
                ("memory", memory),
                *extended_requests(pod["spec"]).items(),
            ):
                on[resource] = on.get(resource, 0) + amount
    used = 0.0
    for name, node in nodes.items():
        room = Room.of(node)
        offered = {"cpu": room.cpu, "memory": room.memory} | room.extended
        used += figures.dominant_share(asked[name], offered)
    return round(used, 3)


def _pods_existing(world: World, shapes: dict[str, oracle.Shape]) -> oracle.Step:
    """The pods in the cluster now, running or waiting, as the oracle packs them (a pod's
    shape read once: `shapes`, by uid)."""
    pods = world.cluster.store.objects["pods"].values()
    return oracle.step_of(
        shapes.get(uid) or shapes.setdefault(uid, oracle.Shape.of(pod))
        for pod in pods
        if (uid := pod["metadata"]["uid"]) and not baseline_tuning.is_placeholder(pod)
    )


def _oracle(
    scenario: Scenario, runs: Iterable[Run], times: Sequence[int] | None = None
) -> dict[str, float | int]:
    """Over the judged steps: the bound (`oracle.oracle_node_hours`, from the scenario's
    demand), and the heuristic packing (`oracle.packed_node_hours`) of the pods of the run
    whose pods needed fewest nodes (pods served sooner go sooner: a queue's workers).
    `times`: the runs' steps (`_step_times`), the scenario's by default."""
    runs = list(runs)
    step = scenario.step_seconds
    times = _step_times(scenario, None) if times is None else times
    ran = sum(1 for at in times if at < scenario.judged_from * MINUTE)  # a run's first judged
    packed = [oracle.packed_node_hours(r.steps[ran:], r.templates, step) for r in runs]
    judged = math.ceil(scenario.judged_from * MINUTE / step)  # the demand's, at `step`
    bounds, templates = _bounds(scenario), runs[0].templates
    first_task = {
        q.name: _first_node(scenario, demand.shape_of(q.worker), templates, bounds)
        for q in scenario.queues
    }
    shapes = [demand.shape_of(d) for d in scenario.deployments]
    shapes += [demand.shape_of(q.worker) for q in scenario.queues]
    settle = {shape: _boot_for(scenario, shape, templates, bounds) for shape in shapes}
    steps = itertools.islice(demand.demand(scenario, first_task, settle), judged, None)
    bound = oracle.oracle_node_hours(steps, templates, bounds, step, judged)
    return bound | min(packed, key=lambda f: f["packed_node_hours"])


def _bound_given_waits(scenario: Scenario, result: Run, bound: float) -> float:
    """The bound less what the run's pods waiting beyond a boot could have saved it
    (`oracle.waits_allowance`): no run, whatever its waits, comes out below this. A run
    whose pods waited longer than a boot (Cluster Autoscaler learning of a failed launch a
    minute late) can be below the bound, never below this."""
    deployments = {d.name for d in scenario.deployments}
    step = scenario.step_seconds
    judged = math.ceil(scenario.judged_from * MINUTE / step) * step
    allowance = oracle.waits_allowance(
        result.pods,
        _bounds(scenario),
        lambda name: name.rsplit("-", 1)[0] in deployments,
        range(judged, scenario.minutes * MINUTE, step),
        step,
    )
    return round(max(bound - allowance, 0.0), 2)


def _first_node(
    scenario: Scenario, shape: oracle.Shape, templates: dict[str, Room], bounds: oracle.Bounds
) -> float:
    """The earliest second a node for pods of `shape` can be in service: 0 if a group they
    fit starts with nodes, else when the first of those groups can boot one."""
    usable = [
        g for g in scenario.groups if templates[g.name].fits(shape.cpu, shape.memory, shape.spec)
    ]
    if not usable or any(g.min > 0 for g in usable):
        return 0.0
    return min(bounds.frozen_until.get(g.name, 0.0) for g in usable)


def _boot_for(
    scenario: Scenario, shape: oracle.Shape, templates: dict[str, Room], bounds: oracle.Bounds
) -> float:
    """The seconds from a pod's arrival until a new node could hold it: the shortest boot
    of the groups it fits that can launch (0 when none can: the bound holds them at their
    minimum)."""
    boots = [
        bounds.frozen_until.get(g.name, 0.0)
        for g in scenario.groups
        if g.name in templates and templates[g.name].fits(shape.cpu, shape.memory, shape.spec)
    ]
    return min((b for b in boots if math.isfinite(b)), default=0.0)


def _bounds(scenario: Scenario) -> oracle.Bounds:
    """What any controller is held to: each group's bounds and the cluster's node limit;
    no node beyond a group's minimum before one could boot (from its warm pool, if it has
    one), nor ever in a group whose launches all fail."""

    def frozen(group: Any) -> float:
        if group.no_capacity:
            return math.inf
        boot = scenario.warm_boot_minutes if group.warm_pool else scenario.boot_minutes
        return boot * MINUTE

    return oracle.Bounds(
        {g.name: (g.min, g.max) for g in scenario.groups},
        Limits.of(scenario.environment).nodes,
        {g.name: frozen(g) for g in scenario.groups},
    )


@dataclass
class Decisions:
    """Each group's last decision and backoff, read from the state table only when an
    evaluation may have changed them (one ran since the last read)."""

    box: Sandbox
    _read: dict[str, tuple[int, dict[str, Any], datetime | None]] = field(default_factory=dict)

    def of(self, group: str) -> dict[str, Any]:
        read = self._read.get(group)
        if read is None or read[0] != self.box.invocations:
            state = self.box.state.load(group)
            decision = state.last_decision
            fields: dict[str, Any] = {"decided_at": decision.at.isoformat() if decision else None}
            if decision is not None:
                fields |= {
                    "current": decision.current,
                    "decided": decision.desired,
                    "metrics": {
                        m.name: {
                            "value": m.value,
                            "target": m.target,
                            "status": str(m.status),
                            "recommendation": m.recommendation,
                        }
                        for m in decision.metrics
                    },
                    "why": decision.reason,
                }
            until = state.backoff.until if state.backoff else None
            fields["cause"] = self.box.causes.get(group)
            read = self._read[group] = (self.box.invocations, fields, until)
        _, fields, until = read
        return {"backed_off": until is not None and self.box.clock.now() < until} | fields


def _scale_requests(minutes: list[dict[str, Any]], start: dict[str, int]) -> list[dict[str, Any]]:
    """Each change of a group's desired capacity (from its size at the start)."""
    last = dict(start)
    requests = []
    for row in minutes:
        before = last.get(row["group"])
        if before is not None and row["desired"] != before:
            change = {"from": before, "to": row["desired"]}
            requests.append({"minute": row["minute"], "group": row["group"]} | change)
        last[row["group"]] = row["desired"]
    return requests


def _request_path(controller: str, cause: str | None) -> str:
    """What brought a scale request, for its latencies (`latency`): a CA loop; the fast
    path's look; else nodescaler's tick (an alarm's or a launch failure's event alike),
    from the `cause` of the evaluation that made it."""
    if controller != NODESCALER:
        return latency.SCAN
    return latency.FAST_PATH if (cause or "").startswith(latency.FAST_PATH) else latency.TICK


def _takes_effect(
    world: World, controller: str, charge: latency.Charged
) -> Callable[[str, str | None], datetime]:
    """When a scale request the side makes now takes effect, for the world to start its
    instances then (`cluster.SimulatedCluster.request`): the first second it answers one
    of the pods waiting that the group could take, as their reactions are charged
    (`latency`); with none (a queue, a schedule, a forecast), a look in this step."""

    def second(group: str, cause: str | None) -> datetime:
        path, at = _request_path(controller, cause), world.at
        seconds = [
            charge.effective(charge.arrival(seen, name), at, path, gpu=gpu)
            for name, seen, gpu in world.waiting_for(group)
        ]
        first = min(seconds, default=charge.effective(at - charge.step + 1, at, path, gpu=False))
        # the first step's demand arrived "before" it, but nothing runs before the start:
        # its requests launch with the groups' first instances, at 0
        return world.start + timedelta(seconds=max(first, 0.0))

    return second


def _charge(controller: str, scenario: Scenario, settings: dict[str, Any]) -> latency.Charged:
    """The side's latencies (`latency`), at their defaults: the same for every scenario
    but the stack's tick and fast-path rates; CA's loops frequent as its flags say (`settings`: CA
    tuned's; the untuned run's are 1.37's defaults, `Flags`)."""
    step = scenario.step_seconds
    if controller == NODESCALER:
        poll = float(scenario.environment.get("FAST_PATH_INTERVAL_SECONDS", latency.POLL_S))
        side = latency.Nodescaler(poll=poll, tick=scenario.tick_minutes * MINUTE)
        return latency.Charged(side, step)
    flags = settings.get("flags") or {}
    frequent = bool(flags.get("--frequent-loops-enabled", Flags().frequent_loops_enabled))
    return latency.Charged(latency.ClusterAutoscaler(frequent_loops=frequent), step)


def _progress_line(
    scenario: Scenario, controller: str, minute: float, rows: list[dict[str, Any]]
) -> str:
    latest = []  # this step's rows, the last ones: not a pass over every step's
    for row in reversed(rows):
        if row["minute"] != minute:
            break
        latest.append(row)
    latest.reverse()
    sizes = " ".join(f"{r['group']}={r['desired']}" for r in latest[:4])
    return (
        f"{scenario.name} [{controller}] {_clock(minute)}/{_clock(scenario.minutes)} "
        f"pending {latest[0]['pending_pods'] if latest else 0} {sizes}"
    )


# --- outputs ---------------------------------------------------------------------------


def _clock(minute: float) -> str:
    """ "HH:MM" since the start, ":SS" after it within a minute (a step of seconds)."""
    seconds = round(minute * 60)
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}"
    return clock + (f":{seconds % 60:02d}" if seconds % 60 else "")


def _when(scenario: Scenario, minute: float) -> str:
    """Time since the start; with the local clock too when the scenario has a zone."""
    if scenario.start.utcoffset() == timedelta(0) and str(scenario.start.tzinfo) == "UTC":
        return _clock(minute)
    at = scenario.start.astimezone(UTC) + timedelta(minutes=minute)  # not wall-clock sums
    local = at.astimezone(scenario.start.tzinfo)
    return f"{_clock(minute)} ({local:%a %H:%M %Z})"


_WALL_TIME = re.compile(r"\b(\d{2}):(\d{2}):(\d{2})Z")


def on_the_timeline_clock(why: str, scenario: Scenario, minute: float) -> str:
    """`why` with each UTC time of day it quotes (`until 09:18:50Z`, from the functions'
    reasons) told on the timeline's clock, time since the start (`until 00:18:50`): one
    clock a line. A time of day is the next one at or after the row's own time."""
    at = scenario.start.astimezone(UTC) + timedelta(minutes=minute)

    def elapsed(match: re.Match[str]) -> str:
        hours, minutes, seconds = (int(part) for part in match.groups())
        when = at.replace(hour=hours, minute=minutes, second=seconds, microsecond=0)
        if when < at - timedelta(minutes=1):  # a time past midnight
            when += timedelta(days=1)
        return _clock((when - scenario.start.astimezone(UTC)).total_seconds() / 60)

    return _WALL_TIME.sub(elapsed, why)


def _metrics_cell(row: dict[str, Any]) -> str:
    metrics = row.get("metrics") or {}
    return (
        ", ".join(f"{name} {_number(m['value'])}/{m['target']}" for name, m in metrics.items())
        or "-"
    )


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2f}"


def _timeline(scenario: Scenario, result: Run) -> list[str]:
    """A line for each decision that changed a group's size or said why it could not,
    and one an hour (10 minutes in a short scenario) to show the steady state."""
    every = 60 if scenario.minutes > 180 else 10
    lines = ["time since the start | group | metrics (value/target) | current → desired | why"]
    seen: dict[str, tuple[Any, ...]] = {}
    before = {g.name: g.min for g in scenario.groups}
    faults = sorted(
        [(f.start, f"{f.kind}{' ' + f.target if f.target else ''} begins") for f in scenario.faults]
        + [(f.until, f"{f.kind}{' ' + f.target if f.target else ''} ends") for f in scenario.faults]
    )
    told = sorted(  # NotTriggerScaleUp Events on pods no group can take
        (_minutes_since(scenario, e["firstTimestamp"]), e["involvedObject"]["name"], e["message"])
        for e in result.events
        if e.get("reason") == "NotTriggerScaleUp"
    )
    for row in result.minutes:
        while faults and faults[0][0] <= row["minute"]:
            at, what = faults.pop(0)
            lines.append(f"{_when(scenario, at)} | (fault) | - | - | {what}")
        while told and told[0][0] <= row["minute"]:
            at, pod, message = told.pop(0)
            lines.append(f"{_when(scenario, at)} | (pod {pod}) | - | - | {message}")
        current, before[row["group"]] = before[row["group"]], row["desired"]
        key = (row["desired"], row.get("backed_off"), row.get("decided"))
        if key == seen.get(row["group"]) and row["minute"] % every:
            continue
        seen[row["group"]] = key
        why = on_the_timeline_clock(
            (row.get("why") or "").split(" | ")[-1], scenario, row["minute"]
        )
        if row.get("cause"):  # the path that brought the decision
            why = f"{why} [{_path(row['cause'])}]"
        lines.append(
            f"{_when(scenario, row['minute'])} | {row['group']} | {_metrics_cell(row)} | "
            f"{current} → {row['desired']} | {why}"
        )
    return lines


def _path(cause: str) -> str:
    """ "fast path: 3 new unschedulable pods" → "fast path"; "alarm x: OK → ALARM" → "alarm"."""
    for path in ("fast path", "alarm", "launch failure", "tick"):
        if cause.startswith(path):
            return path
    return cause


def _summarize(scenario: Scenario, result: Run) -> dict[str, Any]:
    groups = [g.name for g in scenario.groups]
    by_minute: dict[int, list[dict[str, Any]]] = {}
    for row in result.minutes:
        by_minute.setdefault(row["minute"], []).append(row)
    causes = {(r["minute"], r["group"]): r.get("cause") for r in result.minutes}
    scale_ups = [
        figures.ScaleUp(
            r["minute"],
            r["group"],
            _request_path(result.controller, causes.get((r["minute"], r["group"]))),
        )
        for r in result.scale_requests
        if r["to"] > r["from"]
    ]
    scale_ups += [
        figures.ScaleUp(r["minute"], r["group"], _request_path(result.controller, r["cause"]))
        for r in result.undone_raises
    ]
    charge = _charge(result.controller, scenario, result.settings)
    fit_no_group = figures.fit_no_group(result.pods)
    judged = [r for r in result.minutes if r["minute"] >= scenario.judged_from]
    step = scenario.step_seconds / MINUTE  # a row is a group's step
    summary: dict[str, Any] = {
        "node_hours": figures.node_hours(judged, step),
        "idle_node_hours": figures.idle_node_hours(judged, step),
        "unschedulable_pod_minutes": figures.unschedulable_pod_minutes(judged, step),
        "pod_wait_minutes": figures.pod_waits(result.pods, scenario.minutes),
        "pod_ready_minutes": figures.pod_ready(result.pods),
        "longest_demand_to_scale_request_minutes": figures.longest(
            figures.demand_to_scale_request(result.pods, scale_ups, groups, scenario.minutes),
            figures.metric_to_scale_request(result.minutes, scale_ups, groups, scenario.minutes),
        ),
        "reaction_s": figures.reaction_seconds(
            figures.pod_reactions(result.pods, scale_ups, scenario.minutes, charge=charge),
            figures.queue_reactions(
                result.minutes,
                scale_ups,
                _queue_targets(scenario),
                {g.name: g.min for g in scenario.groups},
                scenario.minutes,
                charge=charge,
            ),
        ),
        "pods_that_fit_no_group": {"count": len(fit_no_group), "first": fit_no_group[:10]},
        "not_trigger_scale_up_events": [
            f"{e['involvedObject']['name']}: {e['message']}"
            for e in result.events
            if e.get("reason") == "NotTriggerScaleUp"
        ][:10],
        "aws_write_calls": {g: result.writes.get(g, 0) for g in groups},
        **figures.disruption(
            evictions_asked=result.evictions_asked,
            evicted=result.evicted,
            nodes_removed=result.nodes_removed,
            killed=result.killed,
            budget_short=result.budget_short,
        ),
        "peak_desired": {
            g: max(r["desired"] for r in result.minutes if r["group"] == g) for g in groups
        },
        "final_desired": {r["group"]: r["desired"] for r in by_minute[scenario.minutes]},
        "scale_requests": result.scale_requests,
    }
    summary |= _replay_figures(scenario, result, judged, step)
    if scenario.judged_from:
        summary["judged_from_minute"] = scenario.judged_from
    if scenario.queues:
        empty = next(
            (m for m, rows in by_minute.items() if m > 0 and not any(rows[0]["queues"].values())),
            None,
        )
        summary["minutes_to_empty_queues"] = empty
    if scenario.faults:
        summary["faults"] = {
            "windows": [
                f"{f.kind}{' ' + f.target if f.target else ''} {_clock(f.start)}–{_clock(f.until)}"
                for f in scenario.faults
            ],
            "calls_failed": result.faults_injected,
            "invocations_failed": result.failed_invocations,
            "tasks_lost": result.tasks_lost,
        }
    if result.termination_asked or result.termination_failed:
        summary["termination_policy"] = {
            "asked": len(result.termination_asked) + result.termination_failed,
            "instances_allowed": sum(len(ids) for _, ids in result.termination_asked),
            "failed": result.termination_failed,
        }
    if result.launch_failures:
        summary["launch_failures_at_minute"] = [m for m, _ in result.launch_failures]
    if scenario.deployments:
        summary["requested_pct"] = _requested(scenario, result)
    if result.drains:
        summary["drains"] = [
            {
                "node": d.get("node"),
                "outcome": d.get("outcome"),
                "evicted": len(d.get("evicted") or ()),
                "left_on_the_node": len(d.get("remaining") or ()),
                "seconds": d.get("seconds"),
                "ended": d.get("at"),
            }
            for d in result.drains
        ]
    if result.settings:  # CA tuned: the flags and placeholders it ran with
        summary["settings"] = result.settings
    return summary


def _replay_figures(
    scenario: Scenario, result: Run, judged: list[dict[str, Any]], step: float
) -> dict[str, Any]:
    """The waits a user feels (each pod's arrival to Ready, in seconds), the cost in
    dollars, and what each trace did (`traces`)."""
    waits = traces.pod_wait_seconds(result.pods, scenario.minutes)
    hours = {
        g.name: figures.node_hours([r for r in judged if r["group"] == g.name], step)
        for g in scenario.groups
    }
    groups = [(g.name, g.instance_type, g.capacity_type) for g in scenario.groups]
    replay: dict[str, Any] = {
        "pod_wait_s": traces.wait_spread(waits),
        "pod_wait_s_by_workload": traces.waits_by_workload(
            result.pods, scenario.minutes, result.workloads
        ),
        "cost_usd": traces.cost_usd(groups, hours, scenario.priced()),
    }
    if scenario.pod_traces:
        replay["lost_job_minutes"] = round(
            sum(t["lost_job_minutes"] for t in result.replayed.values() if "lost_job_minutes" in t),
            1,
        )
    if result.replayed:
        replay["traces"] = result.replayed
    return replay


def _queue_targets(scenario: Scenario) -> dict[str, list[tuple[str, float]]]:
    """Each group's queues read by an SQSQueue metric, with their messages per node."""
    from nodescaler.adapters.deployed_policies import load_policies
    from nodescaler.domain.policy import SqsQueueMetric

    policies = load_policies(scenario.policies_path)
    targets: dict[str, list[tuple[str, float]]] = {}
    for group in scenario.groups:
        policy = policies.get(group.policy)
        for metric in policy.spec.metrics if policy else ():
            per_node = metric.target.average_value if isinstance(metric, SqsQueueMetric) else None
            if isinstance(metric, SqsQueueMetric) and per_node:
                targets.setdefault(group.name, []).append((metric.sqs_queue.queue, float(per_node)))
    return targets


def _requested(scenario: Scenario, result: Run) -> dict[str, dict[str, float]]:
    """Each group's CPU and memory requested (% of its nodes' allocatable), over the minutes
    it had nodes: the low, the mean and the high."""
    figures = {}
    for group in scenario.groups:
        for resource in ("cpu", "memory"):
            values = [
                r[f"{resource}_requested_pct"]
                for r in result.minutes
                if r["group"] == group.name and r["in_service"]
            ]
            if values:
                figures[f"{group.name}/{resource}"] = {
                    "low": min(values),
                    "mean": round(sum(values) / len(values), 1),
                    "high": max(values),
                }
    return figures


def _side_by_side(summary: dict[str, Any]) -> str:
    """The runs' figures in columns, the first run's naming the rows (nodescaler's)."""
    ran = [c for c in CONTROLLERS if c in summary]
    ours, *others = (summary[c] for c in ran)
    lines = ["   " + " " * 52 + "".join(f" {LABELS[c]:>14}" for c in ran)]

    def line(label: str, mine: Any, *path: str) -> None:
        cells = "".join(f" {_cell(_dig(other, path)):>14}" for other in others)
        lines.append(f"   {label:<52} {_cell(mine):>14}{cells}")

    lines.append(
        f"   {'oracle_node_hours (a bound no run can beat)':<52} "
        f"{_cell(summary.get('oracle_node_hours')):>14}\n"
        f"   {'packed_node_hours (first-fit decreasing, heuristic)':<52} "
        f"{_cell(summary.get('packed_node_hours')):>14}"
    )
    for key, value in ours.items():
        if isinstance(value, int | float) or value is None:
            line(key, value, key)
        elif key in ("pod_wait_minutes", "pod_ready_minutes"):
            for group, figures_ in value.items():
                for name in ("p50", "p99", "max"):
                    line(f"{key} {group} {name}", figures_[name], key, group, name)
        elif key == "pods_that_fit_no_group":
            line(key, value["count"], key, "count")
        elif key == "reaction_s":
            for group, figures_ in value.items():
                for name in ("p50", "p99", "max"):
                    line(f"{key} {group} {name}", figures_[name], key, group, name)
        elif key in (
            "longest_demand_to_scale_request_minutes",
            "aws_write_calls",
            "final_desired",
            "peak_desired",
        ):
            for group, figure in value.items():
                line(f"{key} {group}", figure, key, group)
    return "\n".join(lines)


def _dig(figures: Any, path: Sequence[str]) -> Any:
    """A run's figure at `path` in its summary (None where it has none)."""
    for key in path:
        figures = figures.get(key) if isinstance(figures, dict) else None
    return figures


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _chart(scenario: Scenario, runs: dict[str, Run], path: Path) -> None:
    from nodescaler_sandbox import chart

    title = f"{scenario.name}: nodescaler vs a Cluster Autoscaler baseline"
    chart.render(path, title, *charted(scenario, runs))


def charted(scenario: Scenario, runs: dict[str, Run]) -> tuple[list[GroupChart], ClusterChart]:
    """What the chart draws of both runs: each group's panels, and the cluster's."""
    from nodescaler_sandbox import chart

    groups = []
    ours, theirs = runs[NODESCALER], runs[BASELINE]
    for group in scenario.groups:
        rows = [r for r in ours.minutes if r["group"] == group.name]
        baseline = [r["desired"] for r in theirs.minutes if r["group"] == group.name]
        metrics: dict[str, list[float | None]] = {}
        targets: dict[str, float] = {}
        abstained: dict[str, list[float]] = {}
        for index, row in enumerate(rows):
            for name, metric in (row.get("metrics") or {}).items():
                metrics.setdefault(name, [None] * len(rows))[index] = metric["value"]
                if metric["value"] is None and metric["status"] == "abstained":
                    abstained.setdefault(name, []).append(row["minute"])
                if (target := _target_value(metric["target"])) is not None:
                    targets[name] = target
        groups.append(
            chart.GroupChart(
                group=group.name,
                minutes=[r["minute"] for r in rows],
                desired=[r["desired"] for r in rows],
                in_service=[r["in_service"] for r in rows],
                metrics=metrics,
                targets=targets,
                abstained=abstained,
                scale_events=[
                    (s["minute"], s["from"], s["to"])
                    for s in ours.scale_requests
                    if s["group"] == group.name
                ],
                backoffs=_spans(
                    [r["minute"] for r in rows if r.get("backed_off")],
                    scenario.step_seconds / MINUTE,
                ),
                launch_failures=[m for m, g in ours.launch_failures if g == group.name],
                baseline_desired=baseline,
                drains=[
                    _minutes_since(scenario, d["at"])
                    for d in ours.drains
                    if d["group"] == group.name
                ],
            )
        )
    limit = scenario.environment.get("CLUSTER_MAX_NODES")
    limited = [  # a panel each, on its own scale: one vCPU is not one GiB, nor one node
        chart.Limited(
            name,
            unit,
            _in_service(ours, resource),
            _in_service(theirs, resource),
            float(scenario.environment[setting]),
        )
        for setting, name, unit, resource in (
            ("CLUSTER_MAX_VCPUS", "vCPUs", "vCPUs", 0),
            ("CLUSTER_MAX_MEMORY_GIB", "memory", "GiB", 1),
        )
        if setting in scenario.environment
    ]
    cluster = chart.ClusterChart(
        minutes=sorted({r["minute"] for r in ours.minutes}),  # the steps
        nodes=_per_minute(ours, "in_service"),
        baseline_nodes=_per_minute(theirs, "in_service"),
        pending=[rows[0] for rows in _rows_by_minute(ours, "pending_pods")],
        baseline_pending=[rows[0] for rows in _rows_by_minute(theirs, "pending_pods")],
        max_nodes=int(limit) if limit else None,
        tuned_nodes=_per_minute(runs[TUNED], "in_service") if TUNED in runs else None,
        tuned_pending=(
            [rows[0] for rows in _rows_by_minute(runs[TUNED], "pending_pods")]
            if TUNED in runs
            else None
        ),
        budget_short=_spans(ours.budget_short),
        faults=[(f.start, f.until, f.kind) for f in scenario.faults],
        limited=limited,
    )
    return groups, cluster


def _rows_by_minute(result: Run, key: str) -> list[list[Any]]:
    by_minute: dict[int, list[Any]] = {}
    for row in result.minutes:
        by_minute.setdefault(row["minute"], []).append(row[key])
    return [by_minute[m] for m in sorted(by_minute)]


def _per_minute(result: Run, key: str) -> list[int]:
    """`key` summed over the groups, each minute."""
    return [sum(values) for values in _rows_by_minute(result, key)]


def _in_service(result: Run, resource: int) -> list[float]:
    """The vCPUs (`resource` 0) or memory (1) of the nodes in service, each minute."""
    by_minute: dict[int, float] = {}
    for row in result.minutes:
        size = result.node_sizes[row["group"]][resource]
        by_minute[row["minute"]] = by_minute.get(row["minute"], 0) + row["in_service"] * size
    return [by_minute[m] for m in sorted(by_minute)]


def _minutes_since(scenario: Scenario, at: str) -> float:
    return (datetime.fromisoformat(at.replace("Z", "+00:00")) - scenario.start).total_seconds() / 60


def _target_value(target: str) -> float | None:
    """ "4/replica" → 4, "60%" → 60."""
    number = target.split("/", maxsplit=1)[0].rstrip("%")
    try:
        return float(number)
    except ValueError:
        return None


def _spans(minutes: Sequence[float], step: float = 1) -> list[tuple[float, float]]:
    """Steps of `step` minutes (their starts, in order) as spans, those in a row joined."""
    spans: list[tuple[float, float]] = []
    for minute in minutes:
        if spans and minute - spans[-1][1] < step / 2:  # the next step (times rounded)
            spans[-1] = (spans[-1][0], minute + step)
        else:
            spans.append((minute, minute + step))
    return spans


def progress_to_terminal() -> Callable[[str], None] | None:
    """A live line on a terminal (rewritten in place); nothing when output is a file."""
    if not sys.stderr.isatty():
        return None

    def show(line: str) -> None:
        sys.stderr.write("\r\033[K" + line[:120])
        sys.stderr.flush()

    return show


# --- one function, one event -----------------------------------------------------------


def invoke(
    function: str,
    incoming: dict[str, Any],
    scenario: Scenario,
    *,
    out: Path | None = None,
    write: Callable[[str], None] = print,
) -> Any:
    """`function`'s handler on `incoming`, in a sandbox holding the scenario's world at
    its first minute, every pod and task of that minute arrived (at the event's time,
    when it has one); prints what it returned and its log lines. Dispatch's queued
    evaluations run too, as Lambda would run them."""
    from nodescaler_sandbox.lambda_local import LocalContext

    out = out or OUT / "invoke"
    out.mkdir(parents=True, exist_ok=True)
    boot = timedelta(minutes=scenario.boot_minutes)
    log_path = out / f"logs-{function}.jsonl"
    with (
        sandbox(
            scenario.policies_path,
            out,
            boot=boot,
            environment=dict(scenario.environment),
            start=scenario.start,
        ) as box,
        log_path.open("w") as log,
    ):
        with box.logging_to(log):
            world = World(scenario, box, hooks=True)
            for at in range(0, MINUTE, scenario.step_seconds):  # the minute's arrivals
                world.step(at)
            if isinstance(incoming.get("time"), str):
                box.clock.at = datetime.fromisoformat(incoming["time"].replace("Z", "+00:00"))
            context = LocalContext(f"nodescaler-{function}")
            if function == "dispatch":
                result = box.dispatch(incoming)
            elif function == "evaluate":
                result = box.handlers["evaluate"].handler(
                    incoming, context, evaluator=box.evaluator
                )
            elif function == "terminate":  # as Auto Scaling asks it which instances go
                result = box.handlers["terminate"].handler(
                    incoming, context, chooser=box.terminator
                )
            else:
                result = box.handlers["drain"].handler(incoming, context, drainer=box.drainer)
        write(json.dumps(result, indent=2, default=str))
        for group in scenario.groups:
            decision = box.state.load(group.name).last_decision
            if decision is not None:
                write(f"{group.name}: {decision.current} → {decision.desired}: {decision.reason}")
    write(f"   → logs: {log_path}")
    return result

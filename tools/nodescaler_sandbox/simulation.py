"""One run of a scenario under one controller: the steps' times, the loop that moves the
world and lets the controller act at each step, and what the run's sandbox saw, read into
an `observation.Run` (the rows a group a step, the scale requests, the pods, the drains)
before it closes."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox import (
    baseline_tuning,
    cadence,
    charging,
    controllers,
    figures,
    observation,
    oracle,
    replay_figures,
)
from nodescaler_sandbox.cadence import MINUTE
from nodescaler_sandbox.controllers import NODESCALER
from nodescaler_sandbox.outages import Outages
from nodescaler_sandbox.sandbox import Sandbox, sandbox
from nodescaler_sandbox.scenario_file import Scenario
from nodescaler_sandbox.timeline import clock
from nodescaler_sandbox.world import World
from nodescaler_sandbox.zonal_shifts import CLUSTER_ARN

if TYPE_CHECKING:
    pass


def step_times(scenario: Scenario, learn_step: int | None) -> list[int]:
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


def simulate(
    scenario: Scenario,
    controller: str,
    folder: Path,
    progress: Callable[[str], None] | None,
    times: Sequence[int],
    *,
    seed: int = 0,
) -> observation.Run:
    environment = dict(scenario.environment)
    if scenario.zonal_shifts:  # the sandbox answers ARC: read it, as a deployed stack does
        environment.setdefault("ZONAL_SHIFT_RESOURCES", json.dumps([CLUSTER_ARN]))
    boot = timedelta(minutes=scenario.boot_minutes)
    result = observation.Run(controller)
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
        _steps(scenario, result, box, world, outages, times=times, progress=progress)
        _collect(result, scenario, box, world, outages)
    _requests_made(result, scenario, box)
    result.undrained = _undrained(folder / f"logs-{controller}.jsonl")
    return result


def _undrained(log: Path) -> dict[str, int]:
    """Per group, the instances the terminate function kept as it has no drain hook (its
    `InstancesUndrained` records in the run's log)."""
    kept: dict[str, int] = {}
    with log.open() as lines:
        for line in lines:
            if not line.startswith('{"_aws"') or '"InstancesUndrained"' not in line:
                continue  # a log line, or another record
            with contextlib.suppress(ValueError, KeyError, TypeError):  # one torn line
                record = json.loads(line)
                group = str(record["NodeGroup"])  # the service-wide record has none
                kept[group] = kept.get(group, 0) + int(sum(record["InstancesUndrained"]))
    return kept


def _steps(
    scenario: Scenario,
    result: observation.Run,
    box: Sandbox,
    world: World,
    outages: Outages,
    *,
    times: Sequence[int],
    progress: Callable[[str], None] | None,
) -> None:
    """The run's steps: at each, the faults due, the world's arrivals, the controller's
    acts, and what the step leaves (a row a group, the pods existing) into `result`."""
    controller = result.controller
    act = controllers.acting(scenario, controller, box, world, outages, settings=result.settings)
    charge = charging.charge(
        controller, scenario, result.settings, lambda: _failed_looks(box, scenario)
    )
    box.takes_effect = charging.takes_effect(world, controller, charge)
    decisions = observation.Decisions(box) if controller == NODESCALER else None
    shapes: dict[str, oracle.Shape] = {}
    kept = observation.Unchanged(world)
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
        result.minutes.extend(observation.observe(world, decisions, minute, kept))
        result.steps.append(kept.get("pods", lambda: observation.pods_existing(world, shapes)))
        world.record_pods()
        if progress:
            progress(_progress_line(scenario, controller, minute, result.minutes))
        box.advance(after / MINUTE, between=world.react)


def _requests_made(result: observation.Run, scenario: Scenario, box: Sandbox) -> None:
    """Each change of a group's desired capacity, and the raises set back within their
    step (which the rows never show), from the run's rows and the writes AWS saw."""
    result.scale_requests = observation.scale_requests(
        result.minutes, {g.name: g.min for g in scenario.groups}
    )
    writes = [
        ((at - scenario.start).total_seconds() / 60, group, desired, cause)
        for at, group, desired, cause in box.desired_writes
    ]
    result.undone_raises = figures.undone_raises(
        result.minutes, writes, step_seconds=scenario.step_seconds
    )
    result.desired_writes = writes


def _collect(
    result: observation.Run, scenario: Scenario, box: Sandbox, world: World, outages: Outages
) -> None:
    """What the run's sandbox saw, read into `result` before the sandbox closes."""
    outages.close()
    result.faults_injected = dict(outages.injected)
    result.failed_invocations = len(box.failed_invocations)
    result.termination_asked = list(box.termination.invocations)
    result.termination_failed = len(box.termination.failures)
    result.tasks_lost = world.tasks_lost
    result.fast_path_failed = _failed_looks(box, scenario)
    result.queue_work_lost_minutes = sum(q.lost_minutes for q in world.queues)
    result.replayed = replay_figures.replayed(world)
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
    not_work = held_room + world.cluster.store.daemons_evicted  # nor DaemonSets' pods
    result.evictions_asked = len(world.cluster.store.evictions) - not_work
    result.evicted = world.cluster.store.evicted - not_work
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


def _failed_looks(box: Sandbox, scenario: Scenario) -> list[float]:
    """The seconds from the start the fast path's looks failed at."""
    return [(at - scenario.start).total_seconds() for at, _ in box.fast_path_failures]


def _node_size(ec2: Any, instance_type: str) -> tuple[float, float]:
    """vCPUs and memory (GiB) of an instance type, as nodescaler counts them against the
    cluster's limits (not a `node:` shape the scenario gives its nodes)."""
    described = ec2.describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0]
    return described["VCpuInfo"]["DefaultVCpus"], described["MemoryInfo"]["SizeInMiB"] / 1024


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
        f"{scenario.name} [{controller}] {clock(minute)}/{clock(scenario.minutes)} "
        f"pending {latest[0]['pending_pods'] if latest else 0} {sizes}"
    )

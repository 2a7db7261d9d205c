"""The bounds a run is judged against: the oracle's node-hours from the scenario's demand
(no run holding it can beat them), the packing heuristic beside it, and the bound less
what a run's waits beyond a boot could have saved (`oracle`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox import (
    demand,
    oracle,
    simulation,
)
from nodescaler_sandbox.baseline import (
    Limits,
)
from nodescaler_sandbox.cadence import MINUTE
from nodescaler_sandbox.cluster import Room
from nodescaler_sandbox.observation import Run
from nodescaler_sandbox.scenario_file import Scenario

if TYPE_CHECKING:
    pass


def bound(
    scenario: Scenario, runs: Iterable[Run], times: Sequence[int] | None = None
) -> dict[str, float | int]:
    """Over the judged steps: the bound (`oracle.oracle_node_hours`, from the scenario's
    demand), and the heuristic packing (`oracle.packed_node_hours`) of the pods of the run
    whose pods needed fewest nodes (pods served sooner go sooner: a queue's workers).
    `times`: the runs' steps (`simulation.step_times`), the scenario's by default."""
    runs = list(runs)
    step = scenario.step_seconds
    times = simulation.step_times(scenario, None) if times is None else times
    ran = sum(1 for at in times if at < scenario.judged_from * MINUTE)  # a run's first judged
    packed = [oracle.packed_node_hours(r.steps[ran:], r.templates, step) for r in runs]
    judged = math.ceil(scenario.judged_from * MINUTE / step)  # the demand's, at `step`
    bounds, templates = _bounds(scenario), runs[0].templates
    workers = {q.name: q.worker for q in scenario.queues}
    workers |= {t.name: t.worker for t in scenario.request_traces}
    first_task = {
        name: _first_node(scenario, demand.shape_of(worker), templates, bounds)
        for name, worker in workers.items()
    }
    shapes = [demand.shape_of(d) for d in scenario.deployments]
    shapes += [demand.shape_of(q.worker) for q in scenario.queues]
    shapes += demand.trace_shapes(scenario)
    settle = {shape: _boot_for(scenario, shape, templates, bounds) for shape in shapes}
    steps = itertools.islice(demand.demand(scenario, first_task, settle), judged, None)
    bound = oracle.oracle_node_hours(steps, templates, bounds, step, judged)
    return bound | min(packed, key=lambda f: f["packed_node_hours"])


def bound_given_waits(scenario: Scenario, result: Run, bound: float) -> float:
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

"""What `chart.png` draws of the runs (`chart`): each group's panels (size, metrics against
targets, scale events, backoffs, launch failures, drains) and the cluster's (nodes, vCPUs
and memory against its limits, pods waiting)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox import (
    timeline,
)
from nodescaler_sandbox.cadence import MINUTE
from nodescaler_sandbox.controllers import BASELINE, NODESCALER, TUNED
from nodescaler_sandbox.observation import Run
from nodescaler_sandbox.scenario_file import Scenario

if TYPE_CHECKING:
    from nodescaler_sandbox.chart import ClusterChart, GroupChart


def draw(scenario: Scenario, runs: dict[str, Run], path: Path) -> None:
    from nodescaler_sandbox import chart

    title = f"{scenario.name}: nodescaler vs a Cluster Autoscaler baseline"
    chart.render(path, title, *charted(scenario, runs))


def charted(scenario: Scenario, runs: dict[str, Run]) -> tuple[list[GroupChart], ClusterChart]:
    """What the chart draws of both runs: each group's panels, and the cluster's."""
    ours, theirs = runs[NODESCALER], runs[BASELINE]
    groups = [_group_chart(scenario, group.name, ours, theirs) for group in scenario.groups]
    return groups, _cluster_chart(scenario, runs)


def _group_chart(scenario: Scenario, group: str, ours: Run, theirs: Run) -> GroupChart:
    """A group's panels: its size beside the baseline's, each metric against its target
    (where it abstained), its scale requests, backoffs, failed launches and drains."""
    from nodescaler_sandbox import chart

    rows = [r for r in ours.minutes if r["group"] == group]
    baseline = [r["desired"] for r in theirs.minutes if r["group"] == group]
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
    return chart.GroupChart(
        group=group,
        minutes=[r["minute"] for r in rows],
        desired=[r["desired"] for r in rows],
        in_service=[r["in_service"] for r in rows],
        metrics=metrics,
        targets=targets,
        abstained=abstained,
        scale_events=[
            (s["minute"], s["from"], s["to"]) for s in ours.scale_requests if s["group"] == group
        ],
        backoffs=_spans(
            [r["minute"] for r in rows if r.get("backed_off")],
            scenario.step_seconds / MINUTE,
        ),
        launch_failures=[m for m, g in ours.launch_failures if g == group],
        baseline_desired=baseline,
        drains=[
            timeline.minutes_since(scenario, d["at"]) for d in ours.drains if d["group"] == group
        ],
    )


def _cluster_chart(scenario: Scenario, runs: dict[str, Run]) -> ClusterChart:
    """The cluster's panels: nodes and pods waiting in each run, and the vCPUs and memory
    in service against the limits the scenario sets."""
    from nodescaler_sandbox import chart

    ours, theirs = runs[NODESCALER], runs[BASELINE]
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
    return chart.ClusterChart(
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

"""After a run of scenarios, the two outcomes users feel, side by side: what the nodes
cost (node-hours) and how long pods waited for one (unschedulable pod-minutes), under
nodescaler and under the Cluster Autoscaler baseline.

- `summary.md`: a row a scenario with both figures, their ratios (nodescaler / baseline:
  below 1 is better), the p99 wait of pods that waited, and what should always be 0.
- `pareto.png`: a point a scenario at (node-hours ratio, pod-minutes ratio), on log axes:
  left of 1 costs less, below 1 waits less; the shaded corner is the goal (no worse on
  either, twice as good on one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

NODESCALER, BASELINE = "nodescaler", "cluster-autoscaler-baseline"
COLUMNS = (
    "scenario",
    "node-hours (ns / CA)",
    "ratio",
    "unschedulable pod-minutes (ns / CA)",
    "ratio",
    "p99 wait, min (ns / CA)",
    "evictions a removed node (ns / CA)",
    "killed · budget-short min",
)


def ratio(ours: float, theirs: float) -> float:
    """ours / theirs; 1 when both are 0 (the same), infinity when only theirs is."""
    if theirs == 0:
        return 1.0 if ours == 0 else math.inf
    return ours / theirs


def _p99(figures: Mapping[str, Any]) -> str:
    value = figures["pod_wait_minutes"]["overall"]["p99"]
    return "-" if value is None else f"{value:g}"


def _per_node(figures: Mapping[str, Any]) -> str:
    value = figures.get("evictions_per_removed_node")
    return "-" if value is None else f"{value:g}"


def _ratio_cell(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.2f}"


def rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    table = []
    for summary in summaries:
        ours, theirs = summary[NODESCALER], summary[BASELINE]
        hours = (ours["node_hours"], theirs["node_hours"])
        waits = (ours["unschedulable_pod_minutes"], theirs["unschedulable_pod_minutes"])
        table.append(
            [
                summary["scenario"],
                f"{hours[0]:g} / {hours[1]:g}",
                _ratio_cell(ratio(*hours)),
                f"{waits[0]:g} / {waits[1]:g}",
                _ratio_cell(ratio(*waits)),
                f"{_p99(ours)} / {_p99(theirs)}",
                f"{_per_node(ours)} / {_per_node(theirs)}",
                f"{ours['pods_killed_with_their_instance']} · "
                f"{ours['disruption_budget_short_minutes']}",
            ]
        )
    return table


def markdown(summaries: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" if i == 0 else "--:" for i in range(len(COLUMNS))) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows(summaries)]
    return (
        "# nodescaler against the Cluster Autoscaler baseline\n\n"
        + "\n".join(lines)
        + "\n\nRatios are nodescaler / baseline: below 1 is better. p99 wait: of the pods "
        "that waited for a node, from creation to binding. evictions a removed node: pods "
        "evicted for each node a scale-in took. killed: pods that went with "
        "their instance, never evicted; budget-short: minutes a disruption budget had too "
        "few healthy pods (nodescaler's run). Each scenario's own figures: "
        "`out/demo/<scenario>/summary.json`.\n"
    )


def pareto(path: Path, summaries: Sequence[Mapping[str, Any]]) -> Path:
    """A point a scenario at (node-hours ratio, pod-minutes ratio), log axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.5, 6), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    try:
        ax = figure.add_subplot()
        points = []
        for summary in summaries:
            ours, theirs = summary[NODESCALER], summary[BASELINE]
            x = ratio(ours["node_hours"], theirs["node_hours"])
            y = ratio(ours["unschedulable_pod_minutes"], theirs["unschedulable_pod_minutes"])
            points.append((summary["scenario"], _finite(x), _finite(y)))
        xs = [x for _, x, _ in points] or [1.0]
        ys = [y for _, _, y in points] or [1.0]
        low = min([0.1, *xs, *ys]) / 1.5
        high = max([10.0, *xs, *ys]) * 1.5
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        # The goal: no worse on either axis, and twice as good on one.
        ax.fill_between([low, 0.5], low, 1, color="#2ca02c", alpha=0.12, linewidth=0)
        ax.fill_between(
            [0.5, 1],
            low,
            0.5,
            color="#2ca02c",
            alpha=0.12,
            linewidth=0,
            label="goal: no worse on both, 2× better on one",
        )
        ax.axvline(1, color="#888888", linewidth=1)
        ax.axhline(1, color="#888888", linewidth=1)
        for name, x, y in points:
            ax.plot([x], [y], marker="o", color="#1f4e9c", markersize=7)
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(6, 5), fontsize=9)
        ax.set_xlabel("node-hours, nodescaler / Cluster Autoscaler baseline (left: cheaper)")
        ax.set_ylabel("unschedulable pod-minutes, nodescaler / baseline (down: shorter waits)")
        ax.set_title("Cost and wait against the Cluster Autoscaler baseline", fontweight="bold")
        ax.grid(True, which="both", color="#eeeeee")
        ax.legend(loc="upper right", fontsize=8, frameon=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        figure.clear()
    return path


def _finite(value: float) -> float:
    """Infinity (the baseline had none, nodescaler some) at 100, and 0 at 0.01, on the chart."""
    return 100.0 if math.isinf(value) else max(value, 0.01)


def write(folder: Path, summaries: Sequence[Mapping[str, Any]]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / "summary.md"
    table.write_text(markdown(summaries))
    return table, pareto(folder / "pareto.png", summaries)

"""After a run of scenarios, the two outcomes users feel, side by side: what the nodes
cost (node-hours, and of them the idle: requested by no pod) and how long pods waited for
one (unschedulable pod-minutes), under nodescaler and under Cluster Autoscaler, with its
defaults and tuned to the group's policy, against the bound (the oracle: the fewest
node-hours that hold the scenario's demand with no pod waiting).

- `summary.md`: a row a scenario with every run's figures, nodescaler's ratios to CA
  tuned (below 1 is better; to CA defaults for a summary without a tuned run), the p99
  wait of pods that waited, what should always be 0, every run's idle node-hours and the
  oracle's node-hours. Run with several seeds, each figure is its mean over them and each
  ratio is marked better, worse or within the spread (`seeds.mark`).
- `pareto.png`: a panel a scenario, named in its title, on linear axes from zero (a run
  whose pods never waited sits on the axis): each run a point at (node-hours,
  unschedulable pod-minutes), a bar left of it as long as its idle node-hours, and the
  oracle at (its node-hours, 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox import seeds

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

NODESCALER, BASELINE = "nodescaler", "cluster-autoscaler-baseline"
TUNED = "cluster-autoscaler-tuned"  # drawn when a summary has it
# each run as the chart draws it: label, colour, marker
RUNS = {
    NODESCALER: ("nodescaler", "#1f4e9c", "o"),
    BASELINE: ("Cluster Autoscaler baseline (defaults)", "#555555", "s"),
    TUNED: ("Cluster Autoscaler tuned", "#ff7f0e", "D"),
}
IDLE_LABEL, IDLE_ALPHA = "idle node-hours: the bar to a run's left", 0.35
ORACLE = ("oracle (a lower bound: the demand held, no pod waiting)", "#2ca02c", "*")
PANEL_COLUMNS = 4
PANEL_INCHES = (3.6, 3.0)  # width, height
MIN_WIDTH_INCHES = 11.0  # room for the title and the legend, however few the panels
BAR_OFFSET_POINTS = {NODESCALER: 3.5, BASELINE: 0.0, TUNED: -3.5}  # idle bars side by side
COLUMNS = (
    "scenario",
    "node-hours (ns / CA / tuned)",
    "ratio",
    "unschedulable pod-minutes (ns / CA / tuned)",
    "ratio",
    "p99 wait, min (ns / CA / tuned)",
    "evictions a removed node (ns / CA / tuned)",
    "killed · budget-short min",
    "idle node-hours (ns / CA / tuned)",
    "ratio",
    "bound node-hours",
    "ns / bound",
    "reaction p99, s (ns / CA / tuned)",
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


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _reaction_p99(figures: Mapping[str, Any]) -> str:
    return _figure(((figures.get("reaction_s") or {}).get("overall") or {}).get("p99"))


def _to_bound(figures: Mapping[str, Any], bound: float | None) -> str:
    return "-" if not bound else _ratio_cell(ratio(figures["node_hours"], bound))


def _ratio_cell(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.2f}"


def _reference(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """The run nodescaler's ratios are to: CA tuned, else CA defaults."""
    reference: Mapping[str, Any] = summary.get(TUNED) or summary[BASELINE]
    return reference


def rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    table = []
    for summary in summaries:
        ours, reference = summary[NODESCALER], _reference(summary)
        runs = [summary[key] for key in (NODESCALER, BASELINE, TUNED) if key in summary]

        def each(cell: Callable[[Mapping[str, Any]], str], runs: list[Any] = runs) -> str:
            return " / ".join(cell(run) for run in runs)

        def to_reference(
            key: str, ours: Any = ours, reference: Any = reference, summary: Any = summary
        ) -> str:
            if key not in ours or key not in reference:
                return "-"
            cell = _ratio_cell(ratio(ours[key], reference[key]))
            if len(summary.get("seeds") or ()) < 2:
                return cell
            spreads = [seeds.spread_of(run, key) for run in (ours, reference)]
            return f"{cell} {seeds.mark(ours[key], reference[key], spreads)}"

        table.append(
            [
                summary["scenario"],
                each(lambda run: f"{run['node_hours']:g}"),
                to_reference("node_hours"),
                each(lambda run: f"{run['unschedulable_pod_minutes']:g}"),
                to_reference("unschedulable_pod_minutes"),
                each(_p99),
                each(_per_node),
                f"{ours['pods_killed_with_their_instance']} · "
                f"{ours['disruption_budget_short_minutes']}",
                each(lambda run: _figure(run.get("idle_node_hours"))),
                to_reference("idle_node_hours"),
                _figure(summary.get("oracle_node_hours")),
                _to_bound(ours, summary.get("oracle_node_hours")),
                each(_reaction_p99),
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
        "# nodescaler against Cluster Autoscaler, with its defaults and tuned\n\n"
        + "\n".join(lines)
        + "\n\nCA: Cluster Autoscaler with its defaults; tuned: with the settings an operator "
        "would pick to match the group's policy (unneeded time, overprovisioning placeholders "
        "the size of its buffer, its bounds, scheduled actions for a schedule). Ratios are "
        "nodescaler / CA tuned (/ CA when a summary has no tuned run): below 1 is better; "
        "marked better or worse beyond the seeds' spread alone (the verdict also takes 5 % "
        "of CA's figure, or one step, as noise, so a ratio marked worse here can be within "
        "noise there). p99 wait: of the pods "
        "that waited for a node, from creation to binding. evictions a removed node: pods "
        "evicted for each node a scale-in took (DaemonSets' and placeholders' aside). "
        "killed: pods that went with "
        "their instance, never evicted; budget-short: minutes a disruption budget had too "
        "few healthy pods (nodescaler's run). idle node-hours: capacity billed that no pod "
        "requested (each node's unrequested share of its most requested resource). bound: "
        "the fewest node-hours that hold the scenario's demand with no pod waiting beyond a "
        "boot (each step, the requests over a node's allocatable, the largest resource, per "
        "group a pod can use; `oracle_node_hours`), and ns / bound nodescaler's node-hours "
        "against it. reaction p99: seconds from a pod turning unschedulable (or a backlog "
        "passing its target) to the scale request that answers it taking effect, each side "
        "charged its own latencies (seed 0's). Each scenario's own figures: "
        "`out/demo/<scenario>/summary.json`.\n" + _seeds_note(summaries)
    )


def _seeds_note(summaries: Sequence[Mapping[str, Any]]) -> str:
    """What the figures are when the runs had several seeds; nothing for one."""
    counts = {len(s.get("seeds") or ()) for s in summaries}
    if max(counts, default=0) < 2:
        return ""
    return (
        f"\nSeeds: {max(counts)} a scenario (arrivals within a minute, placement ties). Each "
        "figure is its mean over the seeds; each ratio is marked better, worse, or within "
        "the spread: the two figures no further apart than the wider of the two runs' "
        "spreads (max - min over the seeds).\n"
    )


def pareto(path: Path, summaries: Sequence[Mapping[str, Any]]) -> Path:
    """A panel a scenario (`pareto_figure`), written as a PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = pareto_figure(summaries)
    FigureCanvasAgg(figure)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        figure.clear()
    return path


def pareto_figure(summaries: Sequence[Mapping[str, Any]]) -> Figure:
    """Each scenario on a panel of its own, titled with its name: every run at
    (node-hours, unschedulable pod-minutes), its idle node-hours a bar to its left (from
    the node-hours some pod requested to those billed), and the oracle on the x axis.
    Linear axes from zero: a figure of zero is drawn at zero."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    columns = max(1, min(PANEL_COLUMNS, len(summaries)))
    rows_ = max(1, math.ceil(len(summaries) / columns))
    figure = Figure(
        figsize=(max(PANEL_INCHES[0] * columns, MIN_WIDTH_INCHES), PANEL_INCHES[1] * rows_ + 1.2),
        dpi=100,
        layout="constrained",
    )
    axes = figure.subplots(rows_, columns, squeeze=False).flatten()
    for ax, summary in zip(axes, summaries, strict=False):
        _scenario_panel(ax, summary, figure)
    for ax in axes[len(summaries) :]:
        ax.axis("off")
    entries: dict[str, Any] = {}  # label → handle, over every panel (a run some lack)
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    entries[IDLE_LABEL] = Line2D([], [], color="#888888", linewidth=3, alpha=IDLE_ALPHA)
    figure.legend(
        list(entries.values()),
        list(entries),
        loc="outside lower center",
        ncols=2,
        fontsize=9,
        frameon=False,
    )
    figure.suptitle(
        "Cost and wait in each scenario: node-hours across (left: cheaper), "
        "unschedulable pod-minutes up (down: shorter waits)",
        fontweight="bold",
    )
    figure.supylabel("unschedulable pod-minutes", fontsize=10)
    return figure


def _scenario_panel(ax: Axes, summary: Mapping[str, Any], figure: Figure) -> None:
    from matplotlib.transforms import offset_copy

    xs, ys = [0.0], [0.0]
    for key, (label, colour, marker) in RUNS.items():
        run = summary.get(key)
        if run is None:
            continue
        x, y = float(run["node_hours"]), float(run["unschedulable_pod_minutes"])
        idle = run.get("idle_node_hours")
        if idle is not None:
            # a few points above or below the run's waits, so equal bars don't hide each other
            shift = offset_copy(ax.transData, figure, y=BAR_OFFSET_POINTS[key], units="points")
            ax.hlines(y, x - idle, x, colors=colour, linewidth=3, alpha=IDLE_ALPHA, transform=shift)
        _point(ax, (x, y), (label, colour, marker), size=7)
        xs.append(x)
        ys.append(y)
    if (oracle := summary.get("oracle_node_hours")) is not None:
        _point(ax, (float(oracle), 0.0), ORACLE, size=11)
        xs.append(float(oracle))
    ax.set_xlim(0, max(xs) * 1.12 or 1)
    ax.set_ylim(0, max(ys) * 1.15 or 1)
    ax.set_title(summary["scenario"], fontsize=10, fontweight="bold", loc="left")
    if NODESCALER in summary and BASELINE in summary:
        ax.set_xlabel(
            "\n".join(
                _ratios(summary[NODESCALER], summary[key], name)
                for key, name in ((BASELINE, "CA"), (TUNED, "tuned"))
                if key in summary
            ),
            fontsize=7.5,
        )
    ax.tick_params(labelsize=8)
    ax.grid(True, color="#eeeeee")


def _point(ax: Axes, at: tuple[float, float], style: tuple[str, str, str], *, size: float) -> None:
    """A run's marker, unclipped: a figure of zero sits on the axis, whole."""
    label, colour, marker = style
    ax.plot(
        [at[0]],
        [at[1]],
        marker=marker,
        color=colour,
        linestyle="none",
        markersize=size,
        label=label,
        clip_on=False,
        zorder=3,
    )


def _ratios(ours: Mapping[str, Any], theirs: Mapping[str, Any], name: str) -> str:
    """nodescaler / a baseline (`name`), on the panel: node-hours, idle node-hours, waits."""
    figures = [
        ("node-h", "node_hours"),
        ("idle", "idle_node_hours"),
        ("wait", "unschedulable_pod_minutes"),
    ]
    return f"ns / {name}: " + " · ".join(
        f"{name} {_ratio_cell(ratio(ours[key], theirs[key]))}"
        for name, key in figures
        if key in ours and key in theirs
    )


def write(folder: Path, summaries: Sequence[Mapping[str, Any]]) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / "summary.md"
    table.write_text(markdown(summaries))
    return table, pareto(folder / "pareto.png", summaries)

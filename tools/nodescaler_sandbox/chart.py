"""A PNG chart of a sandbox scenario: per node group, its size over time and, in a panel of
its own below it, each of its metrics against its target; then the whole cluster: nodes
of both runs against the cluster's node limit, disruption budgets short, the vCPUs and
memory in service against the cluster's limits on them (when it has them), and the pods
waiting for a node.

Drawn with matplotlib's object-oriented API on the Agg canvas, so nothing touches pyplot's
global figure registry or needs a display; matplotlib is imported only when a chart is
rendered, so importing this module costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

    Entry = tuple[Artist | tuple[Artist, ...], str]  # a legend's handle and its label

MAX_GROUPS = 6
WIDTH_INCHES = 10.0
NODES_INCHES = 2.6  # a group's nodes panel
METRIC_INCHES = 1.4  # each of its metrics
CLUSTER_INCHES = 1.8  # each cluster-wide panel
DPI = 100
LONG_SPAN_MINUTES = 180  # beyond this the time axis reads h:mm
MAX_TICKS = 8  # on the h:mm axis
LEGEND_WIDTH_RATIOS = (3.6, 1.0)  # plot column, legend column
LEGEND_ENTRIES_AT_FULL_SIZE = 6  # more than fit a small panel at 8 points

DESIRED = "#1f4e9c"
IN_SERVICE = "#4fa3d9"
BASELINE = "#555555"
TUNED = "#ff7f0e"  # Cluster Autoscaler tuned: as comparison.RUNS draws it
SCALE_UP = "#2ca02c"
SCALE_DOWN = "#ff7f0e"
FAILURE = "#d62728"
BACKOFF = "#d62728"
DRAIN = "#9467bd"
BUDGET_SHORT = "#e377c2"
LIMIT = "#d62728"
FAULT = "#7f7f7f"
FAULT_HATCHES = ("//", "\\\\", "xx", "..", "--")  # one a kind of fault
METRIC_COLOURS = ("#8c3fb8", "#8c564b", "#d6499e", "#7f7f1f", "#17a398", "#5a5a5a")


@dataclass(frozen=True)
class GroupChart:
    group: str
    minutes: Sequence[float]  # x axis: minutes since the scenario started
    desired: Sequence[int]  # the ASG's desired capacity per minute
    in_service: Sequence[int]  # Ready nodes per minute
    metrics: Mapping[str, Sequence[float | None]]  # metric name → value per minute (None: missing)
    targets: Mapping[str, float]  # metric name → its target (drawn as a dotted line)
    scale_events: Sequence[tuple[float, int, int]] = ()  # (minute, from, to): a scale request
    backoffs: Sequence[tuple[float, float]] = ()  # (start, end) minutes the group was backed off
    launch_failures: Sequence[float] = ()  # minutes a launch failed
    baseline_desired: Sequence[int] | None = None  # the reactive baseline's desired, same minutes
    drains: Sequence[float] = ()  # minutes a drain of one of its nodes ended
    # metric name → minutes it abstained without a value (a forecast still learning): a
    # gap in its line, not a metric missing
    abstained: Mapping[str, Sequence[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Caught here, a mismatch names the group and series; matplotlib would only say
        # "x and y must have same first dimension".
        series: dict[str, Sequence[float | None]] = {
            "desired": self.desired,
            "in_service": self.in_service,
            **{f"metrics[{name!r}]": values for name, values in self.metrics.items()},
        }
        if self.baseline_desired is not None:
            series["baseline_desired"] = self.baseline_desired
        _same_length(f"group {self.group!r}", self.minutes, series)


@dataclass(frozen=True)
class Limited:
    """A resource the cluster limits (vCPUs, memory), in service in both runs: a panel of
    its own, as its scale is not the nodes'."""

    name: str  # "vCPUs", "memory"
    unit: str  # "vCPUs", "GiB"
    ours: Sequence[float]
    baseline: Sequence[float]
    limit: float


@dataclass(frozen=True)
class ClusterChart:
    """The whole cluster, both runs: nodes in service, pods waiting for a node."""

    minutes: Sequence[float]
    nodes: Sequence[int]
    baseline_nodes: Sequence[int]
    pending: Sequence[int]
    baseline_pending: Sequence[int]
    max_nodes: int | None = None  # the cluster's node limit, if it has one
    budget_short: Sequence[tuple[float, float]] = field(default=())  # spans, nodescaler's run
    faults: Sequence[tuple[float, float, str]] = field(default=())  # (from, until, kind)
    limited: Sequence[Limited] = field(default=())  # a panel each
    # Cluster Autoscaler tuned to the policies (None: not run)
    tuned_nodes: Sequence[int] | None = None
    tuned_pending: Sequence[int] | None = None

    def __post_init__(self) -> None:
        series: dict[str, Sequence[float]] = {
            "nodes": self.nodes,
            "baseline_nodes": self.baseline_nodes,
            "pending": self.pending,
            "baseline_pending": self.baseline_pending,
        }
        if self.tuned_nodes is not None:
            series["tuned_nodes"] = self.tuned_nodes
        if self.tuned_pending is not None:
            series["tuned_pending"] = self.tuned_pending
        for resource in self.limited:
            series[f"{resource.name} (nodescaler)"] = resource.ours
            series[f"{resource.name} (baseline)"] = resource.baseline
        _same_length("the cluster", self.minutes, series)


def _same_length(
    whose: str, minutes: Sequence[float], series: Mapping[str, Sequence[object]]
) -> None:
    for name, values in series.items():
        if len(values) != len(minutes):
            raise ValueError(
                f"chart of {whose}: {name} has {len(values)} values for {len(minutes)} minutes"
            )


Panel = tuple[float, Callable[["Axes"], list["Entry"]]]  # height in inches, how to draw it


def panels_of(groups: Sequence[GroupChart], cluster: ClusterChart | None = None) -> list[Panel]:
    """The panels, top to bottom: each group's nodes and its metrics; then the cluster's."""
    panels: list[Panel] = []
    for chart in groups[:MAX_GROUPS]:
        panels.append((NODES_INCHES, partial(_nodes_panel, chart=chart)))
        for index, name in enumerate(dict.fromkeys([*chart.metrics, *chart.targets])):
            panels.append(
                (METRIC_INCHES, partial(_metric_panel, chart=chart, name=name, index=index))
            )
    if cluster is not None:
        panels.append((CLUSTER_INCHES, partial(_cluster_nodes_panel, cluster=cluster)))
        for resource in cluster.limited:
            panels.append(
                (
                    CLUSTER_INCHES,
                    partial(_limited_panel, minutes=cluster.minutes, resource=resource),
                )
            )
        panels.append((CLUSTER_INCHES, partial(_cluster_pending_panel, cluster=cluster)))
    return panels or [(NODES_INCHES, _no_groups)]


def _no_groups(ax: Axes) -> list[Entry]:
    _empty(ax, "no node groups")
    return []


def render(
    path: Path, title: str, groups: Sequence[GroupChart], cluster: ClusterChart | None = None
) -> Path:
    """The panels (`panels_of`), stacked, sharing the time axis; writes the PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if len(groups) > MAX_GROUPS:
        title = f"{title} (+{len(groups) - MAX_GROUPS} more groups not shown)"
    panels = panels_of(groups, cluster)
    heights = [height for height, _ in panels]
    figure = Figure(figsize=(WIDTH_INCHES, sum(heights)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    try:
        # Each legend has a column of its own, so constrained layout makes room for it
        # whatever the width of the axes' labels.
        grid = figure.add_gridspec(
            len(panels), 2, width_ratios=LEGEND_WIDTH_RATIOS, height_ratios=heights
        )
        axes: list[Axes] = []
        for row, (_, draw) in enumerate(panels):
            ax = figure.add_subplot(grid[row, 0], sharex=axes[0] if axes else None)
            if row < len(panels) - 1:
                ax.tick_params(labelbottom=False)
            axes.append(ax)
            if entries := draw(ax):
                _legend(figure.add_subplot(grid[row, 1]), entries)
        figure.suptitle(title, fontsize=13, fontweight="bold")
        _time_axis(axes[-1], _span(groups[:MAX_GROUPS], cluster))
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png", dpi=DPI)
    finally:
        figure.clear()  # frees the artists now; the figure was never registered with pyplot
    return path


def _legend(ax: Axes, entries: Sequence[Entry]) -> None:
    from matplotlib.legend_handler import HandlerTuple

    ax.axis("off")
    long = len(entries) > LEGEND_ENTRIES_AT_FULL_SIZE
    ax.legend(
        handles=[handle for handle, _ in entries],
        labels=[label for _, label in entries],
        handler_map={tuple: HandlerTuple(ndivide=None, pad=0.4)},  # samples side by side
        loc="upper left",
        borderaxespad=0,
        handlelength=2.6,
        fontsize=7 if long else 8,
        labelspacing=0.25 if long else 0.5,
        frameon=False,
    )


def _nodes_panel(ax: Axes, chart: GroupChart) -> list[Entry]:
    """A group's nodes: desired, in service, the baseline's desired, scale requests,
    backoffs, launch failures and drains."""
    from matplotlib.patches import Patch

    _frame(ax, chart.group, "nodes", integer=True)
    handles: list[Artist] = []
    if not chart.minutes:
        _empty(ax, "no data")

    for start, end in chart.backoffs:
        ax.axvspan(start, end, color=BACKOFF, alpha=0.12, linewidth=0)
    if chart.backoffs:
        handles.append(Patch(color=BACKOFF, alpha=0.12, label="backed off"))
    if chart.minutes:
        handles += _sizes(ax, chart)
    handles += _scale_events(ax, chart)
    handles += _pinned_events(ax, chart)
    ax.set_ylim(bottom=0, top=_top(ax.get_ylim()[1]))
    return [(handle, str(handle.get_label())) for handle in handles]


def _sizes(ax: Axes, chart: GroupChart) -> list[Artist]:
    """Desired, in service and the baseline's desired, minute by minute."""
    # Desired above in service: when the group has caught up they coincide, and the
    # decision is what the chart is about.
    handles: list[Artist] = []
    handles += ax.step(
        chart.minutes,
        chart.desired,
        where="post",
        color=DESIRED,
        linewidth=2,
        label="desired",
        zorder=3,
    )
    handles += ax.plot(
        chart.minutes,
        chart.in_service,
        color=IN_SERVICE,
        linewidth=1.6,
        label="in service",
        zorder=2,
    )
    ax.fill_between(chart.minutes, chart.in_service, color=IN_SERVICE, alpha=0.12, lw=0)
    if chart.baseline_desired is not None:
        handles += ax.step(
            chart.minutes,
            chart.baseline_desired,
            where="post",
            color=BASELINE,
            linestyle="--",
            linewidth=1.4,
            label="Cluster Autoscaler baseline (desired)",
            zorder=2.5,
        )
    return handles


def _scale_events(ax: Axes, chart: GroupChart) -> list[Artist]:
    """Each scale request, up or down, at the size it asked for."""
    ups = [(minute, to) for minute, before, to in chart.scale_events if to > before]
    downs = [(minute, to) for minute, before, to in chart.scale_events if to < before]
    handles: list[Artist] = []
    for points, marker, colour, label in (
        (ups, "^", SCALE_UP, "scale up"),
        (downs, "v", SCALE_DOWN, "scale down"),
    ):
        if points:
            xs, ys = zip(*points, strict=True)
            handles += ax.plot(
                xs,
                ys,
                linestyle="none",
                marker=marker,
                markersize=6,
                color=colour,
                markeredgecolor="white",
                markeredgewidth=0.5,
                label=label,
                zorder=4,
            )
    return handles


def _pinned_events(ax: Axes, chart: GroupChart) -> list[Artist]:
    """Launch failures and drains, pinned near the bottom edge, so they show whatever the
    node counts are."""
    handles: list[Artist] = []
    for minutes, marker, colour, label in (
        (chart.launch_failures, "x", FAILURE, "launch failed"),
        (chart.drains, "d", DRAIN, "node drained"),
    ):
        if minutes:
            handles += ax.plot(
                minutes,
                [0.04] * len(minutes),
                linestyle="none",
                marker=marker,
                markersize=7,
                markeredgewidth=1.8 if marker == "x" else 0.5,
                color=colour,
                transform=ax.get_xaxis_transform(),
                clip_on=False,
                label=label,
                zorder=5,
            )
    return handles


def _metric_panel(ax: Axes, chart: GroupChart, name: str, index: int) -> list[Entry]:
    """One metric of a group against its target, on an axis of its own: metrics rarely
    share a scale (a queue of thousands, a CPU share of 60 %)."""
    colour = METRIC_COLOURS[index % len(METRIC_COLOURS)]
    _frame(ax, f"{chart.group}: {name}", "")
    series = [math.nan if v is None else float(v) for v in chart.metrics.get(name, ())]
    entries: list[Entry] = []
    values = [v for v in series if not math.isnan(v)]
    if series and chart.minutes:
        (line,) = ax.plot(chart.minutes, series, color=colour, linewidth=1.3)
        entries.append((line, name))
        quiet = set(chart.abstained.get(name, ()))
        missing = [
            m
            for m, v in zip(chart.minutes, series, strict=True)
            if math.isnan(v) and m not in quiet
        ]
        if missing:  # a metric that could not be read: the decision held, never scaled in
            marks = ax.plot(
                missing,
                [0.04] * len(missing),
                linestyle="none",
                marker="|",
                color=FAILURE,
                transform=ax.get_xaxis_transform(),
                clip_on=False,
            )
            entries.append((marks[0], "missing"))
    if name in chart.targets:
        target = chart.targets[name]
        entries.append(
            (ax.axhline(target, color=colour, linestyle=":", linewidth=1.6), f"target {target:g}")
        )
        values.append(target)
    if not values:
        _empty(ax, "no data")
    low = min([0.0, *values])
    ax.set_ylim(bottom=low, top=_top(max([low + 1, *values]), low))
    return entries


def _cluster_nodes_panel(ax: Axes, cluster: ClusterChart) -> list[Entry]:
    from matplotlib.patches import Patch

    _frame(ax, "cluster: nodes in service", "nodes", integer=True)
    handles: list[Artist] = []
    kinds = list(dict.fromkeys(kind for _, _, kind in cluster.faults))
    for kind, hatch in zip(kinds, FAULT_HATCHES * len(kinds), strict=False):
        for start, end, _ in (f for f in cluster.faults if f[2] == kind):
            ax.axvspan(start, end, facecolor="none", edgecolor=FAULT, hatch=hatch, linewidth=0)
        handles.append(
            Patch(facecolor="none", edgecolor=FAULT, hatch=hatch, label=f"fault: {kind}")
        )
    for start, end in cluster.budget_short:
        ax.axvspan(start, end, color=BUDGET_SHORT, alpha=0.25, linewidth=0)
    if cluster.budget_short:
        handles.append(Patch(color=BUDGET_SHORT, alpha=0.25, label="disruption budget short"))
    handles += _both_runs(
        ax, cluster.minutes, cluster.nodes, cluster.baseline_nodes, cluster.tuned_nodes
    )
    if cluster.max_nodes is not None:
        handles.append(_limit_line(ax, cluster.max_nodes, f"{cluster.max_nodes} nodes"))
    ax.set_ylim(bottom=0, top=_top(ax.get_ylim()[1]))
    return [(handle, str(handle.get_label())) for handle in handles]


def _limit_line(ax: Axes, limit: float, amount: str) -> Artist:
    """The cluster's limit on what a panel counts."""
    return ax.axhline(
        limit, color=LIMIT, linestyle="-.", linewidth=1.2, label=f"cluster limit ({amount})"
    )


def _limited_panel(ax: Axes, minutes: Sequence[float], resource: Limited) -> list[Entry]:
    """A limited resource in service, both runs, against the cluster's limit on it."""
    _frame(ax, f"cluster: {resource.name} in service", resource.unit)
    handles = _both_runs(ax, minutes, resource.ours, resource.baseline)
    handles.append(_limit_line(ax, resource.limit, f"{resource.limit:g} {resource.unit}"))
    ax.set_ylim(bottom=0, top=_top(max([resource.limit, *resource.ours, *resource.baseline])))
    return [(handle, str(handle.get_label())) for handle in handles]


def _cluster_pending_panel(ax: Axes, cluster: ClusterChart) -> list[Entry]:
    _frame(ax, "cluster: pods waiting for a node", "pods", integer=True)
    tuned = cluster.tuned_pending
    handles = _both_runs(ax, cluster.minutes, cluster.pending, cluster.baseline_pending, tuned)
    ax.set_ylim(
        bottom=0,
        top=_top(max([1, *cluster.pending, *cluster.baseline_pending, *(tuned or ())])),
    )
    return [(handle, str(handle.get_label())) for handle in handles]


def _both_runs(
    ax: Axes,
    minutes: Sequence[float],
    ours: Sequence[float],
    theirs: Sequence[float],
    tuned: Sequence[float] | None = None,
) -> list[Artist]:
    """nodescaler's line, the baseline's dashed, and the tuned baseline's dotted."""
    lines: list[Artist] = [
        *ax.plot(minutes, ours, color=DESIRED, linewidth=1.8, label="nodescaler"),
        *ax.plot(
            minutes,
            theirs,
            color=BASELINE,
            linestyle="--",
            linewidth=1.4,
            label="Cluster Autoscaler baseline",
        ),
    ]
    if tuned is not None:
        lines += ax.plot(
            minutes,
            tuned,
            color=TUNED,
            linestyle=":",
            linewidth=1.6,
            label="Cluster Autoscaler tuned",
        )
    return lines


def _frame(ax: Axes, title: str, unit: str, *, integer: bool = False) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.set_title(title, loc="left", fontsize=10, fontweight="bold")
    ax.set_ylabel(unit)
    if integer:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)


def _top(high: float, low: float = 0.0) -> float:
    """Headroom above the highest point, so a line at the top isn't hidden by the frame."""
    return high + (high - low) * 0.08


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#888888")


def _span(groups: Sequence[GroupChart], cluster: ClusterChart | None) -> float:
    xs = [0.0, *(cluster.minutes if cluster else ())]
    for chart in groups:
        xs += chart.minutes
        xs += [minute for minute, _, _ in chart.scale_events]
        xs += [end for _, end in chart.backoffs]
        xs += chart.launch_failures
    return max(xs) - min(xs)


def _time_axis(ax: Axes, span: float) -> None:
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    if span <= LONG_SPAN_MINUTES:
        ax.set_xlabel("minutes since the scenario started")
        return
    ax.set_xlabel("time since the scenario started (h:mm)")
    # At most about eight ticks, so "12:00" labels never run together, on round hours
    # where the span allows.
    step = next(s for s in (30, 60, 120, 180, 360, 720, 1440, math.inf) if span / s <= MAX_TICKS)
    if math.isinf(step):
        step = 1440 * math.ceil(span / 1440 / MAX_TICKS)
    ax.xaxis.set_major_locator(MultipleLocator(step))
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda minute, _: f"{int(minute // 60)}:{int(minute % 60):02d}")
    )

"""A PNG chart of a sandbox scenario: per node group, its size against its metrics over time.

Drawn with matplotlib's object-oriented API on the Agg canvas, so nothing touches pyplot's
global figure registry or needs a display; matplotlib is imported only when a chart is
rendered, so importing this module costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

    Entry = tuple[Artist | tuple[Artist, ...], str]  # a legend's handle and its label

MAX_PANELS = 6
PANEL_INCHES = (10.0, 3.0)  # width, height of one group's panel
DPI = 100
LONG_SPAN_MINUTES = 180  # beyond this the time axis reads h:mm
MAX_TICKS = 8  # on the h:mm axis
LEGEND_WIDTH_RATIOS = (3.6, 1.0)  # plot column, legend column
MAX_METRIC_AXES = 3
LEGEND_ENTRIES_AT_FULL_SIZE = 11  # more than fit a panel's height at 8 points
METRIC_AXIS_OFFSET = 0.12  # each further metric axis sits this far right of the last (axes width)

DESIRED = "#1f4e9c"
IN_SERVICE = "#4fa3d9"
BASELINE = "#555555"
SCALE_UP = "#2ca02c"
SCALE_DOWN = "#ff7f0e"
FAILURE = "#d62728"
BACKOFF = "#d62728"
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
        for name, values in series.items():
            if len(values) != len(self.minutes):
                raise ValueError(
                    f"chart of group {self.group!r}: {name} has {len(values)} values "
                    f"for {len(self.minutes)} minutes"
                )


def render(path: Path, title: str, groups: Sequence[GroupChart]) -> Path:
    """One panel per group, stacked, sharing the time axis; writes the PNG, returns path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    shown = list(groups[:MAX_PANELS])
    if len(groups) > MAX_PANELS:
        title = f"{title} (+{len(groups) - MAX_PANELS} more groups not shown)"
    panels = max(len(shown), 1)
    figure = Figure(
        figsize=(PANEL_INCHES[0], PANEL_INCHES[1] * panels), dpi=DPI, layout="constrained"
    )
    FigureCanvasAgg(figure)
    try:
        # Each legend has a column of its own, so constrained layout makes room for it
        # whatever the width of the right-hand axes' labels.
        grid = figure.add_gridspec(panels, 2, width_ratios=LEGEND_WIDTH_RATIOS)
        axes: list[Axes] = []
        for row in range(panels):
            axes.append(figure.add_subplot(grid[row, 0], sharex=axes[0] if axes else None))
            if row < panels - 1:
                axes[-1].tick_params(labelbottom=False)
        figure.suptitle(title, fontsize=13, fontweight="bold")
        if not shown:
            _empty(axes[0], "no node groups")
        for row, (ax, chart) in enumerate(zip(axes, shown, strict=False)):
            entries = _panel(ax, chart)
            if entries:
                _legend(figure.add_subplot(grid[row, 1]), entries)
        _time_axis(axes[-1], _span(shown))
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


def _panel(ax: Axes, chart: GroupChart) -> list[Entry]:
    """Draws one group's panel; returns its legend's entries."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    ax.set_title(chart.group, loc="left", fontsize=11, fontweight="bold")
    ax.set_ylabel("nodes")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)
    handles: list[Artist] = []
    if not chart.minutes and not chart.metrics:
        _empty(ax, "no data")

    for start, end in chart.backoffs:
        ax.axvspan(start, end, color=BACKOFF, alpha=0.12, linewidth=0)
    if chart.backoffs:
        handles.append(Patch(color=BACKOFF, alpha=0.12, label="backed off"))

    if chart.minutes:
        # Desired above in service: when the group has caught up they coincide, and the
        # decision is what the chart is about.
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

    ups = [(minute, to) for minute, before, to in chart.scale_events if to > before]
    downs = [(minute, to) for minute, before, to in chart.scale_events if to < before]
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

    if chart.launch_failures:
        # Pinned just above the bottom edge, so a failure shows whatever the node counts are.
        handles += ax.plot(
            chart.launch_failures,
            [0.04] * len(chart.launch_failures),
            linestyle="none",
            marker="x",
            markersize=7,
            markeredgewidth=1.8,
            color=FAILURE,
            transform=ax.get_xaxis_transform(),
            clip_on=False,
            label="launch failed",
            zorder=5,
        )

    ax.set_ylim(bottom=0, top=_top(ax.get_ylim()[1]))
    return [(handle, str(handle.get_label())) for handle in handles] + _metrics(ax, chart)


def _metrics(ax: Axes, chart: GroupChart) -> list[Entry]:
    """The metrics on right-hand axes, each target dotted in its metric's colour.

    Metrics rarely share a scale (a queue of thousands, a CPU share of 0.7), so up to
    MAX_METRIC_AXES each gets an axis of its own, coloured like it; beyond that they share one.
    """
    names = list(dict.fromkeys([*chart.metrics, *chart.targets]))
    if not names:
        return []
    own_axes = len(names) <= MAX_METRIC_AXES
    shared = None if own_axes else ax.twinx()
    if shared is not None:
        shared.set_ylabel("metrics")
    entries: list[Entry] = []
    extents: dict[Axes, list[float]] = {}
    for index, name in enumerate(names):
        colour = METRIC_COLOURS[index % len(METRIC_COLOURS)]
        right = shared or _metric_axis(ax, index, name, colour)
        values = extents.setdefault(right, [])
        series = [math.nan if v is None else float(v) for v in chart.metrics.get(name, ())]
        drawn: list[Artist] = []
        if series and chart.minutes:
            drawn += right.plot(chart.minutes, series, color=colour, linewidth=1.3, alpha=0.9)
            values += [v for v in series if not math.isnan(v)]
        label = name
        if name in chart.targets:
            target = chart.targets[name]
            drawn.append(right.axhline(target, color=colour, linestyle=":", linewidth=1.6))
            values.append(target)
            label = f"{name} (target {target:g})"
        # One entry per metric, its line and its target's side by side, keeps the legend
        # within the panel's height.
        if drawn:
            entries.append((drawn[0] if len(drawn) == 1 else tuple(drawn), label))
    for right, values in extents.items():
        low = min([0.0, *values])
        right.set_ylim(bottom=low, top=_top(max([low + 1, *values]), low))
    return entries


def _metric_axis(ax: Axes, index: int, name: str, colour: str) -> Axes:
    right = ax.twinx()
    if index:
        right.spines["right"].set_position(("axes", 1 + METRIC_AXIS_OFFSET * index))
    right.set_ylabel(name, color=colour)
    right.tick_params(axis="y", colors=colour)
    right.spines["right"].set_color(colour)
    return right


def _top(high: float, low: float = 0.0) -> float:
    """Headroom above the highest point, so a line at the top isn't hidden by the frame."""
    return high + (high - low) * 0.08


def _empty(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="#888888")


def _span(groups: Sequence[GroupChart]) -> float:
    xs = [0.0]
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

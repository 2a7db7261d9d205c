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

MAX_PANELS = 6
PANEL_INCHES = (10.0, 3.0)  # width, height of one group's panel
DPI = 100
LONG_SPAN_MINUTES = 180  # beyond this the time axis reads h:mm

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
        axes = figure.subplots(panels, 1, sharex=True, squeeze=False)[:, 0]
        figure.suptitle(title, fontsize=13, fontweight="bold")
        if not shown:
            _empty(axes[0], "no node groups")
        for ax, chart in zip(axes, shown, strict=False):
            _panel(ax, chart)
        _time_axis(axes[-1], _span(shown))
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png", dpi=DPI)
    finally:
        figure.clear()  # frees the artists now; the figure was never registered with pyplot
    return path


def _panel(ax: Axes, chart: GroupChart) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    ax.set_title(chart.group, loc="left", fontsize=11, fontweight="bold")
    ax.set_ylabel("nodes")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, axis="both", color="#e6e6e6", linewidth=0.8)
    ax.set_axisbelow(True)
    handles: list[Artist] = []
    if not chart.minutes and not chart.metrics:
        _empty(ax, "no data")

    for start, end in chart.backoffs:
        ax.axvspan(start, end, color=BACKOFF, alpha=0.12, linewidth=0)
    if chart.backoffs:
        handles.append(Patch(color=BACKOFF, alpha=0.12, label="backed off"))

    if chart.minutes:
        handles += ax.step(
            chart.minutes, chart.desired, where="post", color=DESIRED, linewidth=2, label="desired"
        )
        handles += ax.plot(
            chart.minutes, chart.in_service, color=IN_SERVICE, linewidth=1.6, label="in service"
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
                markersize=7,
                color=colour,
                markeredgecolor="white",
                markeredgewidth=0.6,
                label=label,
                zorder=4,
            )

    if chart.launch_failures:
        # Pinned just above the bottom edge, so a failure shows whatever the node counts are.
        ax.plot(
            chart.launch_failures,
            [0.04] * len(chart.launch_failures),
            linestyle="none",
            marker="x",
            markersize=7,
            markeredgewidth=1.8,
            color=FAILURE,
            transform=ax.get_xaxis_transform(),
            clip_on=False,
            zorder=5,
        )
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="x",
                markersize=7,
                markeredgewidth=1.8,
                color=FAILURE,
                label="launch failed",
            )
        )

    ax.set_ylim(bottom=0, top=_top(ax.get_ylim()[1]))
    right, metric_handles = _metrics(ax, chart)
    handles += metric_handles
    if handles:
        # On the twin when there is one: it is drawn last, so the legend stays on top.
        (right or ax).legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.08 if right else 1.01, 1.0),
            borderaxespad=0,
            fontsize=8,
            frameon=False,
        )


def _metrics(ax: Axes, chart: GroupChart) -> tuple[Axes | None, list[Artist]]:
    """The metrics on a right-hand axis, each target dotted in its metric's colour."""
    names = list(dict.fromkeys([*chart.metrics, *chart.targets]))
    if not names:
        return None, []
    right = ax.twinx()
    right.set_ylabel(names[0] if len(names) == 1 else "metrics")
    handles: list[Artist] = []
    values: list[float] = []
    for index, name in enumerate(names):
        colour = METRIC_COLOURS[index % len(METRIC_COLOURS)]
        series = [math.nan if v is None else float(v) for v in chart.metrics.get(name, ())]
        if series and chart.minutes:
            handles += right.plot(
                chart.minutes, series, color=colour, linewidth=1.3, alpha=0.9, label=name
            )
            values += [v for v in series if not math.isnan(v)]
        if name in chart.targets:
            target = chart.targets[name]
            handles.append(
                right.axhline(
                    target, color=colour, linestyle=":", linewidth=1.6, label=f"{name} target"
                )
            )
            values.append(target)
    low = min([0.0, *values])
    right.set_ylim(bottom=low, top=_top(max([low + 1, *values]), low))
    return right, handles


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
    # About six to twelve ticks, on round hours where the span allows.
    step = next(s for s in (30, 60, 120, 180, 360, 720, 1440, math.inf) if span / s <= 12)
    if math.isinf(step):
        step = 1440 * math.ceil(span / 1440 / 12)
    ax.xaxis.set_major_locator(MultipleLocator(step))
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda minute, _: f"{int(minute // 60)}:{int(minute % 60):02d}")
    )

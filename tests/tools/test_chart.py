"""The scenario chart: a panel for each group's nodes, one for each of its metrics, two for
the cluster (and one for each resource it limits); written as a PNG of the size it
promises, with drains, budgets short and the cluster's limits marked where they belong."""

from __future__ import annotations

import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from nodescaler_sandbox import chart_series, runner
from nodescaler_sandbox.chart import (
    BUDGET_SHORT,
    CLUSTER_INCHES,
    DPI,
    MAX_GROUPS,
    METRIC_INCHES,
    NODES_INCHES,
    WIDTH_INCHES,
    ClusterChart,
    GroupChart,
    Limited,
    Panel,
    panels_of,
    render,
)
from nodescaler_sandbox.observation import Run
from nodescaler_sandbox.scenario_file import Scenario

if TYPE_CHECKING:
    from matplotlib.axes import Axes

WIDTH = int(WIDTH_INCHES * DPI)


def inches(*panels: float) -> int:
    return round(sum(panels) * DPI)


def size_of(png: Path) -> tuple[int, int]:
    """Width and height from the PNG's IHDR chunk."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def busy(group: str) -> GroupChart:
    minutes = list(range(60))
    return GroupChart(
        group=group,
        minutes=minutes,
        desired=[0] * 5 + [6] * 50 + [0] * 5,
        in_service=[0] * 8 + [6] * 47 + [0] * 5,
        metrics={"queue": [None] + [100.0 - m for m in minutes[1:]]},  # one missing value
        targets={"queue": 4.0},
        scale_events=[(5, 0, 6), (55, 6, 0)],
        backoffs=[(10.0, 15.0)],
        launch_failures=[10.0],
        baseline_desired=[0] * 6 + [6] * 54,
        drains=[56.0, 57.5],
    )


def cluster(minutes: int = 60, max_nodes: int | None = 8) -> ClusterChart:
    return ClusterChart(
        minutes=list(range(minutes)),
        nodes=[6] * minutes,
        baseline_nodes=[5] * minutes,
        pending=[0] * minutes,
        baseline_pending=[3] * minutes,
        max_nodes=max_nodes,
        budget_short=[(20.0, 22.0)],
    )


def test_a_panel_for_each_group_and_each_metric_then_two_for_the_cluster(tmp_path: Path) -> None:
    empty = GroupChart("idle-ng", minutes=[], desired=[], in_service=[], metrics={}, targets={})
    path = render(tmp_path / "chart.png", "two groups", [busy("gpu-ng"), empty], cluster())
    expected = inches(NODES_INCHES, METRIC_INCHES, NODES_INCHES, CLUSTER_INCHES, CLUSTER_INCHES)
    assert size_of(path) == (WIDTH, expected)
    assert path.stat().st_size > 10_000  # drawn, not blank


def test_at_most_six_groups(tmp_path: Path) -> None:
    path = render(tmp_path / "chart.png", "many", [busy(f"ng-{n}") for n in range(9)])
    assert size_of(path)[1] == inches(*[NODES_INCHES, METRIC_INCHES] * MAX_GROUPS)


def test_drawn_panels_show_more_than_a_frame(tmp_path: Path) -> None:
    from matplotlib.image import imread

    path = render(tmp_path / "chart.png", "one group", [busy("gpu-ng")])
    pixels = imread(path)
    colours = {tuple(pixel) for pixel in pixels.reshape(-1, pixels.shape[-1]).tolist()}
    assert len(colours) > 100  # lines, markers, shading, anti-aliased text


@pytest.mark.parametrize(
    "groups",
    [
        pytest.param([], id="no groups"),
        pytest.param(
            [GroupChart("cpu-ng", [], [], [], metrics={"cpu": []}, targets={"cpu": 0.6})],
            id="a target without data",
        ),
        pytest.param(
            [GroupChart("cpu-ng", [0], [1], [0], metrics={"cpu": [None]}, targets={})],
            id="only missing values",
        ),
        pytest.param(
            [
                GroupChart(
                    "many-metrics-ng",
                    minutes=[0, 1],
                    desired=[1, 2],
                    in_service=[1, 1],
                    metrics={f"m{n}": [float(n), n + 1.0] for n in range(5)},  # one shared axis
                    targets={f"m{n}": float(n) for n in range(5)},
                )
            ],
            id="more metrics than axes",
        ),
    ],
)
def test_nothing_much_to_draw_still_makes_one_panel(
    tmp_path: Path, groups: list[GroupChart]
) -> None:
    path = render(tmp_path / "chart.png", "quiet", groups)
    metrics = {name for g in groups for name in [*g.metrics, *g.targets]}
    assert size_of(path) == (WIDTH, inches(NODES_INCHES, *[METRIC_INCHES] * len(metrics)))


def test_an_eight_hour_scenario_reads_in_hours(tmp_path: Path) -> None:
    minutes = list(range(0, 8 * 60, 5))  # past three hours, the time axis reads h:mm
    group = GroupChart(
        "web-ng",
        minutes=minutes,
        desired=[3] * len(minutes),
        in_service=[3] * len(minutes),
        metrics={"rps": [10.0] * len(minutes)},
        targets={"rps": 12.0},
    )
    path = render(tmp_path / "chart.png", "diurnal", [group], cluster(len(minutes), None))
    assert size_of(path) == (WIDTH, inches(NODES_INCHES, METRIC_INCHES, *[CLUSTER_INCHES] * 2))


def test_a_series_of_the_wrong_length_names_the_group_and_the_series() -> None:
    with pytest.raises(ValueError, match=r"group 'web-ng': metrics\['cpu'\] has 2 values"):
        GroupChart("web-ng", [0, 1, 2], [1, 1, 1], [1, 1, 1], {"cpu": [0.5, 0.6]}, {})


def test_a_cluster_series_of_the_wrong_length_is_named() -> None:
    with pytest.raises(ValueError, match=r"chart of the cluster: pending has 2 values"):
        ClusterChart([0, 1, 2], [1, 1, 1], [1, 1, 1], [0, 0], [0, 0, 0])


def test_importing_the_module_leaves_matplotlib_unimported() -> None:
    code = "import sys, nodescaler_sandbox.chart; sys.exit('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def drawn(panel: Panel) -> tuple[Axes, list[str]]:
    """A panel drawn on an axes of its own, and its legend's labels."""
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    return ax, [label for _, label in panel[1](ax)]


def line(ax: Axes, label: str) -> tuple[list[float], list[float]]:
    (found,) = [line for line in ax.get_lines() if line.get_label() == label]
    return list(map(float, found.get_xdata())), list(map(float, found.get_ydata()))


def test_drains_are_marked_on_their_groups_nodes_panel() -> None:
    ax, labels = drawn(panels_of([busy("gpu-ng")])[0])
    assert "node drained" in labels
    assert line(ax, "node drained")[0] == [56.0, 57.5]


def test_a_metric_missing_is_marked_and_a_forecast_still_learning_is_only_a_gap() -> None:
    learning = replace(busy("web-ng"), abstained={"queue": [0]})
    assert "missing" in drawn(panels_of([busy("web-ng")])[1])[1]
    assert "missing" not in drawn(panels_of([learning])[1])[1]


def test_budgets_short_are_shaded_over_their_minutes_on_the_cluster_nodes_panel() -> None:
    from matplotlib.colors import to_hex

    ax, labels = drawn(panels_of([], cluster())[0])
    assert "disruption budget short" in labels
    shaded = [
        (patch.get_x(), patch.get_x() + patch.get_width())
        for patch in ax.patches
        if to_hex(patch.get_facecolor()) == BUDGET_SHORT
    ]
    assert shaded == [(20.0, 22.0)]
    _, unmarked = drawn(panels_of([], replace(cluster(), budget_short=[]))[0])
    assert "disruption budget short" not in unmarked


def test_each_cluster_limit_is_drawn_on_the_panel_of_its_resource() -> None:
    limited = [
        Limited("vCPUs", "vCPUs", [24.0] * 60, [20.0] * 60, limit=40),
        Limited("memory", "GiB", [96.0] * 60, [80.0] * 60, limit=160),
    ]
    panels = panels_of([], replace(cluster(), limited=limited))
    assert len(panels) == 4  # nodes, vCPUs, memory, pods waiting
    (nodes, nodes_labels), (vcpus, vcpu_labels), (memory, memory_labels) = map(drawn, panels[:3])
    assert "cluster limit (8 nodes)" in nodes_labels
    assert line(nodes, "cluster limit (8 nodes)")[1] == [8.0, 8.0]
    assert vcpus.get_title(loc="left") == "cluster: vCPUs in service"
    assert line(vcpus, "cluster limit (40 vCPUs)")[1] == [40.0, 40.0]
    assert line(vcpus, "nodescaler")[1] == [24.0] * 60
    assert memory.get_title(loc="left") == "cluster: memory in service"
    assert line(memory, "cluster limit (160 GiB)")[1] == [160.0, 160.0]
    assert [label for label in vcpu_labels + memory_labels if "limit" in label] == [
        "cluster limit (40 vCPUs)",
        "cluster limit (160 GiB)",
    ]
    assert not any(
        "limit" in label for label in drawn(panels_of([], cluster(max_nodes=None))[0])[1]
    )


def test_the_tuned_baselines_nodes_and_waits_are_drawn_when_it_ran() -> None:
    # Given a cluster chart with Cluster Autoscaler tuned's nodes and pods waiting
    tuned = replace(cluster(), tuned_nodes=[7] * 60, tuned_pending=[9] * 60)
    nodes, pending = panels_of([], tuned)
    # Then both panels draw its line beside the others, and without it there is none
    assert line(drawn(nodes)[0], "Cluster Autoscaler tuned")[1] == [7.0] * 60
    ax, _ = drawn(pending)
    assert line(ax, "Cluster Autoscaler tuned")[1] == [9.0] * 60
    assert ax.get_ylim()[1] > 9
    assert "Cluster Autoscaler tuned" not in drawn(panels_of([], cluster())[0])[1]


def test_a_limited_series_of_the_wrong_length_is_named() -> None:
    short = Limited("vCPUs", "vCPUs", [4.0], [4.0] * 60, limit=8)
    with pytest.raises(ValueError, match=r"the cluster: vCPUs \(nodescaler\) has 1 values"):
        replace(cluster(), limited=[short])


def test_the_runs_vcpus_and_memory_in_service_are_charted_against_the_scenarios_limits() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "limits",
            "minutes": 2,
            "environment": {"CLUSTER_MAX_VCPUS": "40", "CLUSTER_MAX_MEMORY_GIB": "160"},
            "groups": [
                {"name": "small-ng", "policy": "batch", "max": 9},
                {"name": "big-ng", "policy": "batch", "max": 9},
            ],
        }
    )
    sizes = {"small-ng": (4.0, 16.0), "big-ng": (16.0, 64.0)}  # vCPUs, GiB a node

    def run(controller: str, small: list[int], big: list[int]) -> Run:
        rows = [
            {"minute": m, "group": g, "desired": n, "in_service": n, "pending_pods": 0}
            for m in range(3)
            for g, n in (("small-ng", small[m]), ("big-ng", big[m]))
        ]
        return Run(controller, minutes=rows, node_sizes=sizes)

    runs = {
        runner.NODESCALER: run(runner.NODESCALER, [0, 1, 2], [0, 0, 1]),
        runner.BASELINE: run(runner.BASELINE, [0, 3, 3], [1, 1, 1]),
    }
    _, cluster_chart = chart_series.charted(scenario, runs)
    vcpus, memory = cluster_chart.limited
    assert (vcpus.name, vcpus.limit, vcpus.ours, vcpus.baseline) == (
        "vCPUs",
        40,
        [0, 4, 24],
        [16, 28, 28],
    )
    assert (memory.unit, memory.limit, memory.ours) == ("GiB", 160, [0, 16, 96])
    assert cluster_chart.max_nodes is None  # no node limit set: none drawn
    unlimited = scenario.model_copy(update={"environment": {}})
    assert chart_series.charted(unlimited, runs)[1].limited == []

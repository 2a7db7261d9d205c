"""The scenario chart: a panel for each group's nodes, one for each of its metrics, two for
the cluster; written as a PNG of the size it promises."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from nodescaler_sandbox.chart import (
    CLUSTER_INCHES,
    DPI,
    MAX_GROUPS,
    METRIC_INCHES,
    NODES_INCHES,
    WIDTH_INCHES,
    ClusterChart,
    GroupChart,
    render,
)

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

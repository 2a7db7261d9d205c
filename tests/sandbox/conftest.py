"""What the sandbox tests share: each run of a scenario made once a session (`SandboxRuns`),
of the controllers a test checks, without the chart unless it checks the chart."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario, load_scenario

SCENARIOS = Path(__file__).parents[2] / "scenarios"
NODESCALER, BASELINE = runner.NODESCALER, runner.BASELINE
BOTH = (NODESCALER, BASELINE)
ONLY_OURS = (NODESCALER,)  # a test of nodescaler's run alone


class Ran(NamedTuple):
    """A run made: its summary (a test's own copy), what it printed, and its folder."""

    summary: dict[str, Any]
    lines: list[str]
    folder: Path

    def timeline(self, controller: str) -> list[dict[str, Any]]:
        """Every step of every group under `controller` (timeline.json's rows)."""
        rows: list[dict[str, Any]] = json.loads((self.folder / "timeline.json").read_text())[
            controller
        ]
        return rows


class SandboxRuns:
    """`runner.run`, each scenario made once a session for the same controllers and
    options: two tests checking the same run (say the 45-minute pods-that-stay, under
    nodescaler and the baseline) share it."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._made: dict[tuple[str, tuple[str, ...], bool, int | None], Ran] = {}

    def run(
        self,
        scenario: Scenario,
        controllers: Sequence[str] = BOTH,
        *,
        chart: bool = False,
        learn_step: int | None = None,
    ) -> Ran:
        key = (scenario.model_dump_json(), tuple(controllers), chart, learn_step)
        if key not in self._made:
            folder = self._root / f"{len(self._made)}-{scenario.name}"
            lines: list[str] = []
            summary = runner.run(
                scenario,
                out=folder,
                write=lines.append,
                controllers=controllers,
                chart=chart,
                learn_step=learn_step,
            )
            self._made[key] = Ran(summary, lines, folder)
        made = self._made[key]
        return Ran(copy.deepcopy(made.summary), list(made.lines), made.folder)


@pytest.fixture(scope="session")
def sandbox_runs(tmp_path_factory: pytest.TempPathFactory) -> SandboxRuns:
    return SandboxRuns(tmp_path_factory.mktemp("sandbox-runs"))


def scenario(name: str, **changes: Any) -> Scenario:
    """A scenario file of the repository, shortened by `changes`."""
    (path,) = SCENARIOS.glob(f"*-{name}.yaml")
    loaded = load_scenario(path)
    return loaded.model_copy(update=changes)


def run(
    runs: SandboxRuns, shortened: Scenario, controllers: Sequence[str] = BOTH, **options: Any
) -> Ran:
    """The scenario under `controllers` (nodescaler and the baseline by default), made
    once a session (`SandboxRuns`)."""
    return runs.run(shortened, controllers, **options)

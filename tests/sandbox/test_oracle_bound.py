"""The bound (`oracle_node_hours`) holds on a scenario's runs: none of them, nodescaler,
CA with its defaults or tuned, comes out below it, and the heuristic packing beside it
(`packed_node_hours`) is no lower than the bound."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import load_scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, three runs

SCENARIOS = Path(__file__).parents[2] / "scenarios"


def test_no_run_of_a_short_scenario_falls_below_the_bound(tmp_path: Path) -> None:
    # Given Spot at its maximum: every run leaves pods waiting for the group's cap, the
    # bound caps them too (a pod no node of the group could hold waits under any controller)
    (path,) = SCENARIOS.glob("9-*.yaml")
    summary = runner.run(load_scenario(path), out=tmp_path, write=lambda _: None, chart=False)
    bound = summary["oracle_node_hours"]
    for controller in (runner.NODESCALER, runner.BASELINE, runner.TUNED):
        assert summary[controller]["node_hours"] >= bound, controller
    assert summary["packed_node_hours"] >= bound

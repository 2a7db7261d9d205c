"""Seeds through the sandbox (moto's server and the loopback API server): another seed
moves a minute's arrivals within it; the same seed replays the same run, figure for
figure; seed 0 is the run the sandbox always made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import runner as scenarios
from nodescaler_sandbox import seeds
from nodescaler_sandbox.scenario_file import load_scenario

pytestmark = pytest.mark.slow  # moto's server and the API server

SCENARIOS = Path(__file__).parents[2] / "scenarios"


def test_two_seeds_differ_in_arrivals_and_one_seed_replays_its_figures(tmp_path: Path) -> None:
    # Given 48 one-core pods due within minute 1 of a 3-minute run, under CA alone
    ramp = load_scenario(SCENARIOS / "2-capacity-reservation.yaml")
    api = ramp.deployments[0].model_copy(update={"replicas": {0: 0, 1: 48}})
    ramp = ramp.model_copy(update={"minutes": 3, "deployments": [api]})

    def with_seed(seed: int, folder: str) -> tuple[dict[str, Any], list[float]]:
        summary = scenarios.run(
            ramp,
            out=tmp_path / folder,
            write=lambda _: None,
            controllers=(scenarios.BASELINE,),
            chart=False,
            seed=seed,
        )
        pods = json.loads((tmp_path / folder / "pods.json").read_text())[scenarios.BASELINE]
        return summary, sorted(p["created"] for p in pods)

    # When it runs with seed 1, seed 2, and seed 1 again
    one, one_arrivals = with_seed(1, "one")
    two, two_arrivals = with_seed(2, "two")
    again, again_arrivals = with_seed(1, "again")
    # Then the two seeds' pods arrive at other steps of the minute, all within it
    assert len(one_arrivals) == len(two_arrivals) == 48
    assert one_arrivals != two_arrivals
    assert all(1 <= minute < 2 for minute in one_arrivals + two_arrivals)
    # and the same seed gives the same arrivals and every figure the same
    assert again_arrivals == one_arrivals
    assert again[scenarios.BASELINE] == one[scenarios.BASELINE]
    assert one["seeds"] == [1]
    # and the two seeds made one carry each figure's mean and spread
    merged = seeds.aggregate([one, two], [1, 2])[scenarios.BASELINE]
    node_hours = [s[scenarios.BASELINE]["node_hours"] for s in (one, two)]
    assert merged["node_hours_seeds"]["min"] == min(node_hours)
    assert merged["node_hours_spread"] == round(max(node_hours) - min(node_hours), 3)

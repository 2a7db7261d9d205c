"""A scenario's three runs in processes of their own (`runner.run`'s `parallel`): the same
files as run one after another, each process's peak memory told; and `run_all`'s workers,
a core each already, run their scenario's runs in sequence, with no pool of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import load_scenario

from tests.sandbox.conftest import scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, six runs

WRITTEN = ("summary.json", "timeline.txt", "timeline.json", "pods.json", "chart.png")


def test_the_runs_made_in_processes_of_their_own_write_what_one_after_another_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a launch failure and its fallback, the three runs at once on two cores
    shortened = scenario("launch-failure", minutes=8)
    monkeypatch.setattr(runner, "_cores", lambda: 2)
    peaks: dict[int, float] = {}
    apart = runner.run(shortened, out=tmp_path / "apart", write=lambda _: None, peaks=peaks)
    together = runner.run(
        shortened, out=tmp_path / "here", write=lambda _: None, parallel=False, peaks={}
    )
    # Then the summaries and every file but the logs (wall-clock stamps) are the same bytes
    assert apart == together
    for name in WRITTEN:
        assert (tmp_path / "apart" / name).read_bytes() == (tmp_path / "here" / name).read_bytes()
    # and each of the two processes told its own peak (the bench adds them up)
    assert len(peaks) == 2 and all(peak > 50 for peak in peaks.values())


def test_a_scenario_run_by_run_all_makes_its_runs_in_its_own_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pool(*_: Any, **__: Any) -> None:
        raise AssertionError("a pool within run_all's worker")

    monkeypatch.setattr(runner, "_cores", lambda: 2)
    monkeypatch.setattr(runner, "ProcessPoolExecutor", no_pool)
    path = tmp_path / "tiny.yaml"
    policies = Path(__file__).parents[2] / "scenarios" / "policies"
    path.write_text(
        f"name: tiny\nminutes: 2\npolicies: {policies}\ngroups:\n"
        "  - {name: ng, policy: batch, max: 3, instanceType: m5.xlarge}\n"
        "deployments:\n  - {name: jobs, cpu: '1', memory: 1Gi, replicas: {0: 2}}\n"
    )
    load_scenario(path)  # a scenario the runner takes
    summary, printed = runner._run_quietly(path, tmp_path / "out")
    assert summary is not None, printed[-1]
    assert set(runner.CONTROLLERS) <= set(summary)

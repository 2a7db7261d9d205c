"""The fast path's looks the sandbox does not make (`Sandbox._looks_as_last`): a look in a
cluster unchanged since the last one found no unschedulable pod (and no evaluation since,
no group's recheck come due) would find none again and ask nothing, so the runs are the
same without it, and it is skipped only then."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_bench import trace_replay
from nodescaler_sandbox import runner
from nodescaler_sandbox.sandbox import Sandbox
from nodescaler_sandbox.scenario_file import load_scenario

from tests.sandbox.conftest import scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, four runs


@pytest.mark.parametrize("name", ["trace", "launch-failure", "capacity-reservation"])
def test_a_run_skipping_the_looks_that_would_find_nothing_is_the_run_making_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    if name == "trace":  # the bench's two-day trace, its first 90 minutes
        replay = load_scenario(trace_replay.write(tmp_path))
        shortened = replay.model_copy(update={"minutes": 90})
    else:  # pods found unschedulable, a launch failing, another group asked; or a
        # buffer's room eaten between ticks, looked at again when its rate says (minute 6)
        shortened = scenario(name, minutes=12)
    skipped: list[int] = []
    looks_as_last = Sandbox._looks_as_last

    def counted(box: Sandbox, *args: object) -> bool:
        same = looks_as_last(box, *args)  # type: ignore[arg-type]
        skipped.append(same)
        return same

    options = {"controllers": (runner.NODESCALER,), "chart": False, "parallel": False}
    monkeypatch.setattr(Sandbox, "_looks_as_last", counted)
    quiet = runner.run(shortened, out=tmp_path / "quiet", write=lambda _: None, **options)
    monkeypatch.setattr(Sandbox, "_looks_as_last", lambda *_: False)
    every = runner.run(shortened, out=tmp_path / "every", write=lambda _: None, **options)
    assert quiet == every
    for written in ("timeline.txt", "timeline.json", "pods.json"):
        assert (tmp_path / "quiet" / written).read_bytes() == (
            tmp_path / "every" / written
        ).read_bytes()
    assert any(skipped) and not all(skipped)  # some looks skipped, not all

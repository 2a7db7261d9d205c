"""`nodescaler simulate` piped prints the verdict alone (no timeline), and without the
dev extras says what to install instead of a traceback; `invoke` likewise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nodescaler.observability  # noqa: F401  (its log handler made before capsys: see test_invoke_events)
import pytest
from nodescaler_cli.main import main
from nodescaler_sandbox import runner

REPO = Path(__file__).parents[2]


@pytest.mark.sandbox
def test_simulate_piped_prints_the_verdict_for_the_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runner, "OUT", tmp_path)
    # capsys's stdout is no terminal: as `nodescaler simulate ... | cat`
    assert main(["simulate", str(REPO / "scenarios" / "9-spot-at-max.yaml")]) == 0
    heading, line, *rest = capsys.readouterr().out.splitlines()
    assert heading.startswith("Verdict: nodescaler against Cluster Autoscaler (tuned)")
    assert line.split()[0] == "spot-at-max" and "idle node-hours" in line
    assert rest[-2] == f"Summary: {tmp_path / 'summary.md'}"  # one scenario's table too
    assert (tmp_path / "pareto.png").is_file()


def python(code: str) -> subprocess.CompletedProcess[str]:
    run = [sys.executable, "-c", code]
    return subprocess.run(
        run, cwd=REPO, env=os.environ, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    "command",
    [["simulate"], ["invoke", "dispatch", "events/schedule-tick.json"]],
)
def test_without_the_dev_extras_the_sandbox_commands_say_what_to_install(
    command: list[str],
) -> None:
    # moto missing, as in an install without the dev extras
    code = "import sys; sys.modules['moto'] = None; from nodescaler_cli.main import main; "
    code += f"sys.exit(main({command!r}))"
    result = python(code)
    assert result.returncode == 1
    assert result.stderr == (
        f"nodescaler {command[0]}: the sandbox needs the dev extras (moto is missing): run "
        "make setup in a checkout, or pip install 'nodescaler[dev]'\n"
    )


def test_a_module_of_its_own_failing_to_import_is_not_blamed_on_the_dev_extras() -> None:
    # a checkout mid-change: one of the sandbox's own modules cannot be imported
    code = "import sys; sys.modules['nodescaler_sandbox.runner'] = None; "
    code += "from nodescaler_cli.main import main; sys.exit(main(['simulate']))"
    result = python(code)
    assert result.returncode == 1
    assert "dev extras" not in result.stderr
    assert "nodescaler_sandbox.runner" in result.stderr.splitlines()[-1]

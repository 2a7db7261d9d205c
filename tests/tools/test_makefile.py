"""The Makefile on a fresh machine: what `make demo`, `make test-fast` and `make setup` would
install, read from make's own dry run in a copy of the repository's build files with nothing
set up; and what `make help` says each suite costs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
BUILD_FILES = [
    "Makefile",
    "pyproject.toml",
    "requirements/lock.txt",
    "requirements/other-cdk.txt",
    "package.json",
    "package-lock.json",
    "tools/nodescaler_sandbox/prometheus.py",
    "tools/nodescaler_sandbox/kube/kubectl.py",
]


def dry_run(target: str, tmp_path: Path) -> str:
    return make(["-n", target], tmp_path)


def make(arguments: list[str], tmp_path: Path) -> str:
    for name in BUILD_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    # as a fresh shell runs it, not as the `make test` this may run under (its MAKEFLAGS
    # and MAKELEVEL would have make announce the directory it enters)
    environment = {
        k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    }
    done = subprocess.run(
        ["make", *arguments],
        check=False,
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_demo_installs_python_and_prometheus_but_not_the_cdk_cli_or_kubectl(
    tmp_path: Path,
) -> None:
    commands = dry_run("demo", tmp_path)
    assert "pip install --quiet --require-hashes -r requirements/lock.txt" in commands
    assert "-m nodescaler_sandbox.prometheus" in commands  # its Prometheus scenario scrapes
    assert "npm ci" not in commands
    assert "nodescaler_sandbox.kube.kubectl" not in commands
    assert commands.rstrip().endswith("nodescaler simulate")


@pytest.mark.parametrize(
    "says",
    [
        "setup: .venv with the",
        "Python packages pinned in requirements/lock.txt (about 2 minutes the first time)",
        "setup: the CDK CLI pinned in package-lock.json",
        "ready in $((SECONDS - start)) s",
        "apart in out/other-cdk, for the construct's test",
    ],
)
def test_setup_says_what_it_installs_and_how_long_it_took(says: str, tmp_path: Path) -> None:
    assert says in dry_run("setup", tmp_path)


def test_the_fast_suite_needs_python_alone_and_runs_the_unit_and_property_tests(
    tmp_path: Path,
) -> None:
    # Given nothing set up, when a newcomer runs make test-fast
    commands = dry_run("test-fast", tmp_path)
    # Then it installs the locked Python packages, and not the CDK CLI, kubectl or Prometheus
    assert "pip install --quiet --require-hashes -r requirements/lock.txt" in commands
    assert "npm ci" not in commands
    assert "nodescaler_sandbox.kube.kubectl" not in commands
    assert "nodescaler_sandbox.prometheus" not in commands
    # and runs tests/unit, where the property tests (Hypothesis) live too
    assert commands.rstrip().endswith("pytest -q tests/unit")


def test_ci_still_runs_every_suite_with_lint_and_types(tmp_path: Path) -> None:
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")
    commands = dry_run("test", tmp_path)
    assert all(tool in commands for tool in ("ruff check .", "ruff format --check .", "mypy"))
    assert commands.rstrip().endswith("pytest -q")  # no path, no marker: every suite


@pytest.mark.parametrize(
    ("target", "duration"), [("test-fast", r"~\d+ s"), ("test", r"~\d+ min")], ids=["fast", "all"]
)
def test_help_says_how_long_the_fast_suite_and_the_whole_run_take(
    target: str, duration: str, tmp_path: Path
) -> None:
    listed = make(["--no-print-directory", "help"], tmp_path)
    (line,) = [line for line in listed.splitlines() if line.split()[:2] == ["make", target]]
    assert re.search(rf"\({duration}\b", line), line

"""The Makefile on a fresh machine: what `make demo` and `make setup` would install, read
from make's own dry run in a copy of the repository's build files with nothing set up."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
BUILD_FILES = [
    "Makefile",
    "pyproject.toml",
    "requirements/lock.txt",
    "package.json",
    "package-lock.json",
    "tools/nodescaler_sandbox/prometheus.py",
    "tools/nodescaler_sandbox/kube/kubectl.py",
]


def dry_run(target: str, tmp_path: Path) -> str:
    for name in BUILD_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    # as a fresh shell runs it, not as the `make test` this may run under (its MAKEFLAGS
    # and MAKELEVEL would have make announce the directory it enters)
    environment = {
        k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    }
    done = subprocess.run(
        ["make", "-n", target],
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
    ],
)
def test_setup_says_what_it_installs_and_how_long_it_took(says: str, tmp_path: Path) -> None:
    assert says in dry_run("setup", tmp_path)

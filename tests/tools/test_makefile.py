"""The Makefile on a fresh machine: what `make demo`, `make test-fast`, `make setup` and
`make test` would install and run, read from make's own dry run in a copy of the repository's
build files with nothing set up; and what `make help` says each suite costs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
# the other aws-cdk-lib's version, as requirements/other-cdk.txt pins it
(OTHER_CDK,) = re.findall(
    r"^aws-cdk-lib==([0-9.]+)", (ROOT / "requirements/other-cdk.txt").read_text(), re.MULTILINE
)
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


def test_the_demo_passes_seeds_through_and_without_them_runs_one(tmp_path: Path) -> None:
    assert make(["-n", "demo", "SEEDS=5"], tmp_path).rstrip().endswith("simulate --seeds 5")
    assert "--seeds" not in dry_run("demo", tmp_path)


@pytest.mark.parametrize(
    "says",
    [
        "setup: .venv with the",
        # 2 minutes on two idle cores, 8 measured on a busy one (issue 45)
        "Python packages pinned in requirements/lock.txt (2 to 8 minutes the first time",
        "setup: the CDK CLI pinned in package-lock.json",
        "setup: Debian's Prometheus server unpacked into .tools/",
    ],
)
def test_setup_says_what_it_installs(says: str, tmp_path: Path) -> None:
    assert says in dry_run("setup", tmp_path)


@pytest.mark.parametrize(
    ("target", "step"),
    [
        ("setup", ".venv"),
        ("setup", "node_modules"),
        ("setup", "Prometheus"),
        ("test", "kubectl"),
        ("test", f"aws-cdk-lib {OTHER_CDK}"),
    ],
)
def test_each_install_step_says_how_long_it_took(target: str, step: str, tmp_path: Path) -> None:
    # Given nothing set up, when the target installs the step, then it times it
    assert f'echo "setup: {step} ready in $((SECONDS - start)) s"' in dry_run(target, tmp_path)


def test_setup_installs_what_the_demo_and_a_deploy_need_and_ends_saying_what_next(
    tmp_path: Path,
) -> None:
    commands = dry_run("setup", tmp_path)
    assert "pip install --quiet --require-hashes -r requirements/lock.txt" in commands
    assert "npm ci" in commands  # npx cdk deploy
    assert "-m nodescaler_sandbox.prometheus" in commands  # make demo's Prometheus scenario
    # and not what only the tests need: they come with make test
    assert "nodescaler_sandbox.kube.kubectl" not in commands
    assert "out/other-cdk" not in commands
    last = commands.rstrip().splitlines()[-1]
    assert last.startswith('echo "setup: done; next: make demo'), last


def test_only_make_setup_ends_with_what_to_run_next(tmp_path: Path) -> None:
    # make test runs setup first, and goes on: no "next" line in the middle of its output
    assert "next: make demo" not in dry_run("test", tmp_path)


def test_the_tests_fetch_kubectl_and_the_other_aws_cdk_lib_naming_its_version(
    tmp_path: Path,
) -> None:
    commands = dry_run("test", tmp_path)
    assert "-m nodescaler_sandbox.kube.kubectl" in commands
    assert "--target out/other-cdk -r requirements/other-cdk.txt" in commands
    assert f'echo "setup: aws-cdk-lib {OTHER_CDK} apart in out/other-cdk' in commands
    assert "aws-cdk-lib aws-cdk-lib" not in commands  # issue 45's message


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
    # and runs tests/unit, where the property tests (Hypothesis) live too, on every core
    assert commands.rstrip().endswith(
        "pytest -q -n auto --dist loadfile --no-loadscope-reorder tests/unit"
    )


def test_ci_still_runs_every_suite_with_lint_and_types(tmp_path: Path) -> None:
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("make test")
    commands = dry_run("test", tmp_path)
    assert all(tool in commands for tool in ("ruff check .", "ruff format --check .", "mypy"))
    (run,) = [line for line in commands.splitlines() if "bin/pytest" in line]
    # no path, no marker: every suite, on every core, a file's tests on one worker
    assert run.split("bin/pytest", 1)[1].split(";")[0] == (
        " -q -n auto --dist loadfile --no-loadscope-reorder --durations=10"
    )


def test_make_test_ends_with_its_slowest_tests_and_its_wall_time(tmp_path: Path) -> None:
    commands = dry_run("test", tmp_path)
    assert "--durations=10" in commands  # pytest prints them after the results
    last = commands.rstrip().splitlines()[-2:]
    assert 'echo "make test: $((took / 60)) min $((took % 60)) s wall time' in last[0]
    assert last[1].strip() == "exit $status"  # the tests' verdict is make test's


def test_make_tests_wall_time_counts_from_makes_start(tmp_path: Path) -> None:
    # Given a Makefile whose test target is only the timing (no suite to wait for)
    makefile = (ROOT / "Makefile").read_text()
    fast = makefile.replace("$(BIN)/pytest -q $(PARALLEL) --durations=10", "sleep 1")
    lint_and_tools = "\t@$(MAKE) --no-print-directory -j2 $(OUTPUT_SYNC) lint $(TEST_TOOLS)\n"
    assert lint_and_tools in fast
    fast = fast.replace("test: setup ", "test: ").replace(lint_and_tools, "")
    (tmp_path / "Makefile").write_text(fast)
    (tmp_path / "requirements").mkdir()
    shutil.copy(ROOT / "requirements/other-cdk.txt", tmp_path / "requirements")
    # When it runs, Then it says how long it took
    done = subprocess.run(
        ["make", "-s", "test"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert re.fullmatch(
        r"make test: 0 min [12] s wall time \(lint, types, every suite\)\n", done.stdout
    )


@pytest.mark.parametrize(
    ("target", "duration"), [("test-fast", r"~\d+ s"), ("test", r"~\d+ min")], ids=["fast", "all"]
)
def test_help_says_how_long_the_fast_suite_and_the_whole_run_take(
    target: str, duration: str, tmp_path: Path
) -> None:
    listed = make(["--no-print-directory", "help"], tmp_path)
    (line,) = [line for line in listed.splitlines() if line.split()[:2] == ["make", target]]
    assert re.search(rf"\({duration}\b", line), line


def test_every_aws_cdk_module_the_stack_imports_is_one_mypy_checks() -> None:
    # make lint skips aws_cdk's other modules (its root imports hundreds): a module the stack
    # starts to use and pyproject.toml does not name would be Any, its misuse unseen
    overrides = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    checked = {
        module
        for override in overrides
        if override.get("follow_imports") == "normal"
        for module in override["module"]
    }
    sources = [ROOT / "app.py", *(ROOT / "infra").rglob("*.py")]
    imported = {
        f"aws_cdk.{name}"
        for source in sources
        for name in re.findall(r"^from aws_cdk import (aws_\w+)", source.read_text(), re.MULTILINE)
    } | {
        name
        for source in sources
        for name in re.findall(r"^from (aws_cdk\.\w+) import", source.read_text(), re.MULTILINE)
    }
    assert imported, "no aws_cdk module found: the pattern no longer matches the stack's imports"
    assert imported <= checked, (
        f"add to pyproject.toml's checked aws_cdk modules: {imported - checked}"
    )

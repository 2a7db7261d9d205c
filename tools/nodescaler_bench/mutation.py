"""`make mutate`: how many deliberate bugs the tests catch (mutmut).

mutmut changes one operator, constant or call at a time in the code under test and runs
the tests that cover it; a mutant the tests still pass "survived", a test gap. It finds
the code only under ./ or src/, so the package is staged under out/mutate/src with the
tests that judge it: the unit suite for domain/ (the pure core, where the target is at
least 90 % killed) and the state table's tests against moto for the state claim (at
least 80 %). Writes out/mutate/score.json and prints the score of each part, and the
survivors; when mutmut itself fails, its output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STAGE = REPO / "out" / "mutate"
PACKAGE = REPO / "layers" / "core" / "python" / "nodescaler"
# What is mutated, and the tests that judge it.
PARTS = {
    "domain": "src/nodescaler/domain/*",  # fnmatch's * crosses /: sub-packages too
    "state claim": "src/nodescaler/adapters/aws/state_table.py",
}
TESTS = ["tests/unit", "tests/integration/test_state_store.py"]
# Tests that judge imports in fresh interpreters, not behaviour: they would see the
# original package, never the mutant.
NOT_JUDGES = ["tests/unit/test_cold_imports.py", "tests/unit/test_domain_purity.py"]
TARGETS = {"domain": 0.90, "state claim": 0.80}  # of each part's mutants, killed
# What the judged tests read from the repository, beside the package: mutmut copies these
# into its own tree (out/mutate/mutants/), where a test would otherwise find no app.py.
# tests/tools/test_mutation.py fails when a judged test names a top-level path not here.
FIXTURES = [
    "app.py",
    "cdk.json",
    "docs",  # tests/unit/test_doc_paths.py reads the pages
    "events",
    "functions",
    "infra",
    "layers",
    "policies",
    "scenarios",
    "schemas",
    "tools",
    "README.md",
]


def stage() -> None:
    """The package under src/, the tests beside it, and mutmut's settings."""
    shutil.rmtree(STAGE, ignore_errors=True)
    shutil.copytree(
        PACKAGE, STAGE / "src" / "nodescaler", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ["tests", *FIXTURES]:
        source, target = REPO / name, STAGE / name
        if source.is_dir():  # links kept: they point inside the copy (infra/assets → layers)
            shutil.copytree(
                source, target, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(source, target)
    pytest = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    settings = {
        "source_paths": ["src/nodescaler"],
        "only_mutate": list(PARTS.values()),
        "also_copy": FIXTURES,
        "pytest_add_cli_args_test_selection": TESTS,
        "pytest_add_cli_args": [f"--ignore={path}" for path in NOT_JUDGES],
    }
    (STAGE / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\n"
        + "".join(f"{key} = {json.dumps(value)}\n" for key, value in pytest.items())
        + "\n[tool.mutmut]\n"
        + "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items())
    )


def outcomes() -> dict[str, str]:
    """Each mutant's name → killed, survived, timeout, no tests, …, as mutmut reports."""
    shown = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=STAGE,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for line in shown.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if name:
            found[name] = status
    return found


def run_mutmut() -> None:
    """mutmut's run, its chatter kept out of the way unless it fails: then its output (the
    failing tests of its clean run, say) is shown, not only its exit status."""
    environment = {**os.environ, "CI": "1"}  # Hypothesis replays a fixed search
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", "run", "--max-children", str(os.cpu_count() or 2)],
        cwd=STAGE,
        env=environment,
        capture_output=True,
        text=True,
        check=False,  # its output is shown first
    )
    if done.returncode != 0:
        print(done.stdout, done.stderr, sep="\n", flush=True)
        raise SystemExit(f"mutmut run failed (exit status {done.returncode}): its output is above")


def part_of(mutant: str) -> str:
    return "state claim" if mutant.startswith("nodescaler.adapters.aws.state_table") else "domain"


def main() -> int:
    print(f"staging the package and its tests in {os.path.relpath(STAGE, REPO)} ...", flush=True)
    stage()
    print("running mutmut (each mutant against the tests that cover it; minutes) ...", flush=True)
    run_mutmut()
    found = outcomes()
    score: dict[str, dict[str, object]] = {}
    shares: dict[str, float] = {}
    for part in PARTS:
        counts = Counter(status for name, status in found.items() if part_of(name) == part)
        total = sum(counts.values())
        killed = counts["killed"] + counts["timeout"]  # a mutant that hangs is caught too
        shares[part] = killed / total
        score[part] = {
            "killed": killed,
            "total": total,
            "share": round(killed / total, 4),
            "outcomes": dict(counts),
        }
        print(f"{part:12} {killed}/{total} mutants killed ({killed / total:.1%})  {dict(counts)}")
    survivors = sorted(name for name, status in found.items() if status != "killed")
    (STAGE / "score.json").write_text(json.dumps({**score, "survivors": survivors}, indent=1))
    print(
        f"survivors: {STAGE.relative_to(REPO)}/score.json; show one: "
        f"cd {STAGE.relative_to(REPO)} && ../../.venv/bin/mutmut show NAME"
    )
    met = {part: share >= TARGETS[part] for part, share in shares.items()}
    for part, share in shares.items():
        mark = "✓" if met[part] else "✗"
        print(f"{part}: {share:.1%} killed, target ≥ {TARGETS[part]:.0%} {mark}")
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

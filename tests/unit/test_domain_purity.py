"""The domain and the services are pure: no AWS, Kubernetes or Powertools import, directly or
through another module, and the domain never reads the clock."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import nodescaler.domain
import nodescaler.service
import pytest

DOMAIN = Path(nodescaler.domain.__file__).parent
SERVICE = Path(nodescaler.service.__file__).parent
FORBIDDEN_MODULES = {
    "boto3",
    "botocore",
    "kubernetes",
    "aws_lambda_powertools",
    "moto",
    "requests",
    "urllib3",
}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}


def _module(path: Path) -> str:
    """The dotted name of a module of the package, its sub-packages' too."""
    parts = path.relative_to(DOMAIN.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
    return found


def _clock_calls(tree: ast.AST) -> list[str]:
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (
                node.func.attr in CLOCK_CALLS
                and isinstance(owner, ast.Name)
                and owner.id in {"datetime", "time", "date"}
            ):
                calls.append(f"{owner.id}.{node.func.attr}() at line {node.lineno}")
    return calls


@pytest.mark.parametrize("package", [DOMAIN, SERVICE], ids=["domain", "service"])
def test_given_the_pure_packages_then_they_import_no_aws_kubernetes_or_powertools(
    package: Path,
) -> None:
    offenders = {
        str(path.relative_to(package)): sorted(
            _imports(ast.parse(path.read_text())) & FORBIDDEN_MODULES
        )
        for path in package.rglob("*.py")
    }
    assert {name: mods for name, mods in offenders.items() if mods} == {}


@pytest.mark.parametrize("package", [DOMAIN, SERVICE], ids=["domain", "service"])
def test_given_the_pure_packages_when_imported_then_nothing_they_reach_loads_aws_or_kubernetes(
    package: Path,
) -> None:
    modules = [_module(path) for path in sorted(package.rglob("*.py"))]
    script = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(*sys.modules)"
    loaded = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted({m.split(".")[0] for m in loaded} & FORBIDDEN_MODULES) == []


def test_given_the_domain_package_then_it_never_reads_the_clock() -> None:
    offenders = {
        str(path.relative_to(DOMAIN)): _clock_calls(ast.parse(path.read_text()))
        for path in DOMAIN.rglob("*.py")
    }
    assert {name: calls for name, calls in offenders.items() if calls} == {}


def test_the_purity_checks_can_fail() -> None:
    # Guards the guards: a module that breaks both rules is caught.
    bad = ast.parse("import boto3\nfrom datetime import datetime\nx = datetime.now()\n")
    assert _imports(bad) & FORBIDDEN_MODULES == {"boto3"}
    assert _clock_calls(bad) == ["datetime.now() at line 3"]

"""The wiring package: one module per function's assembly, each named lazily on the package
so that importing it (as every handler does at cold start) loads the clients only."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
from nodescaler import wiring

ROOT = Path(__file__).resolve().parents[2]
BUILDERS = {
    "dispatcher": "dispatch",
    "drainer": "drain",
    "evaluator": "evaluate",
    "redelivery": "evaluate",
    "fast_path": "fast",
    "terminator": "terminate",
    "metric_producers": "producers",
    "ProducerContext": "producers",
}


@pytest.mark.parametrize(("name", "module"), BUILDERS.items())
def test_given_a_builder_named_on_the_package_then_it_is_its_modules_own(
    name: str, module: str
) -> None:
    # When the builder is named before and after its module is imported
    named = getattr(wiring, name)
    own = getattr(importlib.import_module(f"nodescaler.wiring.{module}"), name)
    # Then both are the module's builder (a submodule never shadows a builder's name)
    assert named is own is getattr(wiring, name)
    assert callable(named)


def test_given_a_name_the_package_does_not_build_then_it_says_so() -> None:
    said = re.escape("module 'nodescaler.wiring' has no attribute 'builder'")
    with pytest.raises(AttributeError, match=said):
        _ = wiring.builder  # type: ignore[attr-defined]


def test_given_the_package_imported_alone_then_no_functions_assembly_is_loaded() -> None:
    script = "import sys, nodescaler.wiring; print(*sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded = set(result.stdout.split())
    assert "boto3" in loaded  # the clients every function shares
    assert {f"nodescaler.wiring.{m}" for m in set(BUILDERS.values())} & loaded == set()
    assert {m for m in loaded if m.split(".")[0] == "pydantic"} == set()

"""Test-wide settings: Hypothesis explores freely on a laptop and replays a fixed search in
CI; every test is marked with its suite, the folder it lives in (`pytest -m e2e`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from nodescaler_sandbox import botocore_models

# No deadline: a timing threshold has no place in `make test` (a busy machine is not a bug);
# speed is measured in `make bench`.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

# Each moto mock starts a new botocore session: one loader for all reads each model once.
botocore_models.loaded_once()

TESTS = Path(__file__).parent
# The suites, by what they cost and what they prove (pyproject.toml describes each marker).
SUITES = ("unit", "integration", "e2e", "faults", "infra", "sandbox", "tools")


# Under pytest-xdist (make test's -n), the tests that build CDK stacks in this process go to
# one worker (--dist loadgroup): it keeps the templates it synthesized (tests/infra/
# test_stack.py's cache, the session's `template`) for all of them. A test that runs the CDK
# CLI, app.py or a built wheel in a subprocess gains nothing there and takes minutes: any
# worker may take it. Grouping only saves work; a test runs the same on any worker.
CDK_GROUP = "cdk"
# What a test (or a helper of its module it calls) names when it runs another process.
SUBPROCESS = frozenset({"subprocess", "run_app", "cdk_synth"})


def builds_stacks(item: pytest.Item) -> bool:
    module = getattr(item, "module", None)
    synth = getattr(module, "synth", None)
    in_process = item.path.relative_to(TESTS).parts[0] == "infra" or (
        getattr(synth, "__module__", None) == "tests.infra.test_stack"
    )
    function = getattr(item, "function", None)
    return in_process and not (function and runs_a_subprocess(function, vars(module), depth=2))


def runs_a_subprocess(function: Any, names: dict[str, Any], depth: int) -> bool:
    """The function names SUBPROCESS, or calls a function of the tests (to `depth`) that does."""
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    called = set(code.co_names)
    if called & SUBPROCESS:
        return True
    helpers = (names.get(name) for name in called)
    return depth > 0 and any(
        runs_a_subprocess(helper, getattr(helper, "__globals__", {}), depth - 1)
        for helper in helpers
        if callable(helper) and str(getattr(helper, "__module__", "")).startswith("tests")
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        suite = item.path.relative_to(TESTS).parts[0]
        if suite in SUITES:
            item.add_marker(getattr(pytest.mark, suite))
        if builds_stacks(item):
            item.add_marker(pytest.mark.xdist_group(CDK_GROUP))

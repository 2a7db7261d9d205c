"""Test-wide settings: Hypothesis explores freely on a laptop and replays a fixed search in
CI; every test is marked with its suite, the folder it lives in (`pytest -m e2e`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

TESTS = Path(__file__).parent
# The suites, by what they cost and what they prove (pyproject.toml describes each marker).
SUITES = ("unit", "integration", "e2e", "faults", "infra", "sandbox", "tools")


# Under pytest-xdist (make test's -n), the tests that build CDK stacks in this process go to
# one worker (--dist loadgroup): it starts the JS runtime once and keeps the templates
# synthesized (tests/infra/test_stack.py's cache, the session's `template`) for all of them.
# test_cdk_cli.py runs the CDK CLI in a subprocess, so any worker may take it.
CDK_GROUP = "cdk"
CDK_SUBPROCESS_ONLY = {"infra/test_cdk_cli.py"}


def builds_stacks(item: pytest.Item) -> bool:
    where = item.path.relative_to(TESTS)
    if where.parts[0] == "infra":
        return where.as_posix() not in CDK_SUBPROCESS_ONLY
    synth = getattr(getattr(item, "module", None), "synth", None)
    return getattr(synth, "__module__", None) == "tests.infra.test_stack"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        suite = item.path.relative_to(TESTS).parts[0]
        if suite in SUITES:
            item.add_marker(getattr(pytest.mark, suite))
        if builds_stacks(item):
            item.add_marker(pytest.mark.xdist_group(CDK_GROUP))

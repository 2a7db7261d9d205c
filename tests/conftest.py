"""Test-wide settings: Hypothesis explores freely on a laptop and replays a fixed search in
CI; every test is marked with its suite, the folder it lives in (`pytest -m e2e`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# No deadline: a timing threshold has no place in `make test` (a busy machine is not a bug);
# speed is measured in `make bench`.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

TESTS = Path(__file__).parent
# The suites, by what they cost and what they prove (pyproject.toml describes each marker).
SUITES = ("unit", "integration", "e2e", "faults", "infra", "sandbox", "tools")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        suite = item.path.relative_to(TESTS).parts[0]
        if suite in SUITES:
            item.add_marker(getattr(pytest.mark, suite))

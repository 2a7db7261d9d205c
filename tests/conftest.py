"""Test-wide settings: Hypothesis explores freely on a laptop and replays a fixed search in
CI; every test is marked with its suite, the folder it lives in (`pytest -m e2e`)."""

from __future__ import annotations

import os
from pathlib import Path

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
# The suites, by what they prove (pyproject.toml describes each marker), slowest first.
SUITES = ("sandbox", "faults", "e2e", "tools", "integration", "infra", "unit")


# Under pytest-xdist (make test's -n, --dist loadfile) a file's tests go to one worker
# together, so what a module makes once (a fault run, a Prometheus server, the sandbox's
# shared runs, the synthesized templates) is made once. Files are handed out in collection
# order, the next to a worker about to run out of tests: the slowest suites first, so that
# the last files to run are short and both workers finish close together.
def suite_of(item: pytest.Item) -> str:
    return item.path.relative_to(TESTS).parts[0]


def slowest_suites_first(item: pytest.Item) -> int:
    suite = suite_of(item)
    return SUITES.index(suite) if suite in SUITES else len(SUITES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if suite_of(item) in SUITES:
            item.add_marker(getattr(pytest.mark, suite_of(item)))
    items.sort(key=slowest_suites_first)  # stable: each suite's tests as pytest found them

"""make test on every core (pytest-xdist, --dist loadfile): a file's tests go to one worker,
so what a module makes once is made once; the slowest suites are collected first, so that
the files left at the end are short ones and the workers finish together."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests.conftest import TESTS, pytest_collection_modifyitems


def _item(where: str) -> Any:
    return SimpleNamespace(path=TESTS / where, add_marker=lambda mark: None, name=where)


def test_the_slowest_suites_come_first_each_in_the_order_pytest_found_it() -> None:
    # Given the tests as pytest collects them, folder by folder in name order
    found = [
        _item(where)
        for where in (
            "e2e/test_handlers.py",
            "faults/test_aws_faults.py",
            "unit/test_autoscaler.py",
            "sandbox/test_sandbox.py",
            "sandbox/test_baseline.py",
            "unit/test_behavior.py",
            "test_elsewhere.py",
        )
    ]
    items = list(found)
    # When the suites are marked and ordered
    pytest_collection_modifyitems(items)
    # Then the sandbox's multi-minute runs go first, the unit tests' milliseconds last, and a
    # file in no suite after them; within a suite, pytest's own order
    assert [i.name for i in items] == [
        "sandbox/test_sandbox.py",
        "sandbox/test_baseline.py",
        "faults/test_aws_faults.py",
        "e2e/test_handlers.py",
        "unit/test_autoscaler.py",
        "unit/test_behavior.py",
        "test_elsewhere.py",
    ]

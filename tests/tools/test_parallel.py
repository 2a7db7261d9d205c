"""make test on every core (pytest-xdist, --dist loadgroup): the tests that build CDK stacks
in-process share one worker and its synthesized templates; the rest, and the tests that run
the CDK CLI, app.py or a wheel in a subprocess (minutes each), go to whichever is free."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import TESTS, builds_stacks


def _synth() -> None: ...


_synth.__module__ = "tests.infra.test_stack"  # as `from tests.infra.test_stack import synth`


def _reads_a_template() -> None:
    _synth()


def _runs_app_py() -> None:
    subprocess.run(["true"], check=True)


def _calls_a_helper_that_runs_app_py() -> None:
    _runs_app_py()


def _item(where: str, test: Any = _reads_a_template, **module: Any) -> Any:
    helpers = {"_runs_app_py": _runs_app_py, "_synth": _synth}
    return SimpleNamespace(
        path=TESTS / where, function=test, module=SimpleNamespace(**helpers, **module)
    )


@pytest.mark.parametrize(
    ("item", "grouped"),
    [
        (_item("infra/test_alarms.py"), True),
        (_item("infra/test_cdk_cli.py", _runs_app_py), False),
        (_item("infra/test_deployments.py", _calls_a_helper_that_runs_app_py), False),
        (_item("tools/test_dashboard_layout.py", synth=_synth), True),
        (_item("tools/test_chart.py", synth=lambda: None), False),  # another `synth`
        (_item("unit/test_autoscaler.py"), False),
    ],
    ids=["infra", "subprocess", "subprocess-in-a-helper", "synth-elsewhere", "other", "unit"],
)
def test_the_tests_that_synthesize_in_process_share_one_worker(item: Any, grouped: bool) -> None:
    assert builds_stacks(item) is grouped

"""make test on every core (pytest-xdist, --dist loadgroup): the tests that build CDK stacks
in-process share one worker, its JS runtime and its synthesized templates; the rest go to
whichever worker is free."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import TESTS, builds_stacks


def _item(where: str, **module: Any) -> Any:
    return SimpleNamespace(path=TESTS / where, module=SimpleNamespace(**module))


def _synth() -> None: ...


_synth.__module__ = "tests.infra.test_stack"  # as `from tests.infra.test_stack import synth`


@pytest.mark.parametrize(
    ("item", "grouped"),
    [
        (_item("infra/test_alarms.py"), True),
        (_item("infra/test_package.py"), True),  # builds the construct in-process too
        (_item("infra/test_cdk_cli.py"), False),  # the CDK CLI, in a subprocess
        (_item("tools/test_dashboard_layout.py", synth=_synth), True),
        (_item("tools/test_chart.py", synth=lambda: None), False),  # another `synth`
        (_item("unit/test_autoscaler.py"), False),
    ],
    ids=["infra", "package", "cdk-cli", "synth-elsewhere", "other-synth", "unit"],
)
def test_the_tests_that_synthesize_in_process_share_one_worker(item: Any, grouped: bool) -> None:
    assert builds_stacks(item) is grouped


def test_the_infra_modules_let_out_of_the_group_still_exist() -> None:
    # a module renamed or removed would leave a stale entry; a new one is grouped by default
    from tests.conftest import CDK_SUBPROCESS_ONLY

    infra = {f"infra/{p.name}" for p in (TESTS / "infra").glob("test_*.py")}
    assert infra >= CDK_SUBPROCESS_ONLY

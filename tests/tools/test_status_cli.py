"""`nodescaler status` with kubectl's manners: short columns by default (80 characters at
most), every column with `-o wide`, only the groups named (or matching `web*`), and
`--watch` listing again until Ctrl-C."""

from __future__ import annotations

from typing import Any

import pytest
from nodescaler_cli import observe
from nodescaler_cli.main import main

from tests.aws import (
    aws,  # noqa: F401  (moto for every test here)
    make_asg,
)
from tests.tools.test_operator_cli import TABLE, TAGS, evaluated, table

__all__ = ["evaluated"]  # the fixture, used by name
LONG = "a-very-long-node-group-name-for-the-gpu-training-fleet-in-eu-west-1"


@pytest.mark.usefixtures("evaluated")
def test_status_prints_short_columns_no_line_over_80_characters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_asg(LONG, tags=TAGS)
    assert main(["status", "--table", TABLE]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    rows = {r["GROUP"]: r for r in table(out)}
    assert rows["gpu-ng"] == {
        "GROUP": "gpu-ng",
        "POLICY": "gpu",
        "NODES": "10/10",
        "DESIRED": "10",
        "MIN-MAX": "0-50",
        "STATUS": "ok",
    }
    # the note, cut where the line reaches 80 (-o wide shows it whole)
    assert rows["typo-ng"]["STATUS"].startswith("tag nodescaler/")
    assert rows["typo-ng"]["STATUS"].endswith("…")
    assert f"{LONG[:23]}…" in rows  # the long name cut, marked as cut


@pytest.mark.usefixtures("evaluated")
def test_status_o_wide_prints_every_column(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "-o", "wide", "--table", TABLE]) == 0
    (gpu,) = [r for r in table(capsys.readouterr().out) if r["GROUP"] == "gpu-ng"]
    assert gpu["METRICS"] == "jobs 40/4/replica"
    assert gpu["LAST DECISION"] == "hold at 10 | jobs: 40 visible + 0 in flight → 10"


@pytest.mark.usefixtures("evaluated")
@pytest.mark.parametrize(
    ("groups", "listed"),
    [
        (["gpu-ng"], ["gpu-ng"]),
        (["typo*"], ["typo-ng"]),
        (["gpu-ng", "typo-ng"], ["gpu-ng", "typo-ng"]),
    ],
)
def test_status_lists_only_the_groups_named(
    groups: list[str], listed: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", *groups, "--table", TABLE]) == 0
    assert [r["GROUP"] for r in table(capsys.readouterr().out)] == listed


@pytest.mark.usefixtures("evaluated")
def test_status_of_a_group_that_is_not_there_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "absent", "--table", TABLE]) == 0
    assert capsys.readouterr().out == (
        "(no managed node groups named absent: none carries nodescaler/enabled=true)\n"
    )


@pytest.mark.usefixtures("evaluated")
def test_status_watch_lists_again_after_each_interval_until_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    waited: list[float] = []

    def sleep(seconds: float) -> Any:
        waited.append(seconds)
        if len(waited) == 2:
            raise KeyboardInterrupt  # the operator's Ctrl-C, during the second wait

    monkeypatch.setattr(observe.time, "sleep", sleep)
    assert main(["status", "gpu-ng", "--watch", "--interval", "5", "--table", TABLE]) == 0
    out = capsys.readouterr().out
    assert waited == [5, 5]
    assert out.count("(every 5 s; Ctrl-C to stop)") == 2
    assert out.count("\ngpu-ng ") == 2

"""Given 100 ticks of the sandbox's pipeline (dispatch → SQS FIFO → evaluate, three groups
following a random workload) with 30 % of the functions' AWS calls throttled, failed,
reset or slowed, when the faults stop, then nothing was acted twice, nothing was lost,
nothing looped, no group left [min, max], and every group is right within two ticks.

One run, seeded, shared by the tests below; its figures are printed (`-s` not needed).
"""

from __future__ import annotations

import pytest
from nodescaler_bench import faults
from nodescaler_bench.faults import MAX_RECEIVE_COUNT, Report

from tests.faults.figures import show

# ~45 s: moto's server, 100 ticks, one for the file (--dist loadfile)
pytestmark = pytest.mark.slow

TICKS = 100


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The run; the functions' log lines are in its folder's logs.jsonl."""
    return faults.run(TICKS, rate=0.3, folder=tmp_path_factory.mktemp("faults"))


@pytest.fixture(scope="module", autouse=True)
def printed(report: Report, pytestconfig: pytest.Config) -> None:
    show(
        pytestconfig,
        "AWS faults: 100 ticks, 30 % of the functions' calls faulted",
        report.figures()
        | {
            "retries refused (quota dry)": dict(report.retries.refused),
            "backoff slept (uncompressed)": f"{report.retries.backoff_seconds:.0f} s",
            "resizes with no acting decision": report.unrecorded_actuations,
        },
    )


def test_the_faults_were_injected_and_some_outlasted_botocores_retries(report: Report) -> None:
    assert report.ticks == TICKS
    assert set(report.injected) == {"throttle", "5xx", "reset", "delay"}
    assert sum(report.injected.values()) > 0.3 * TICKS * 10  # ~20 calls a tick, 30 %
    assert report.dead_lettered > 0  # nodescaler's own retries and its DLQ were exercised


def test_no_decision_reached_aws_twice(report: Report) -> None:
    assert report.double_actuations == 0


def test_every_queued_evaluation_was_evaluated_or_dead_lettered_and_none_looped(
    report: Report,
) -> None:
    assert report.lost == 0
    assert report.max_receives <= MAX_RECEIVE_COUNT
    assert report.left_in_queue == 0
    assert report.evaluations + report.dead_lettered >= (TICKS - report.undispatched_ticks) * 3


def test_no_group_was_ever_sized_outside_its_bounds(report: Report) -> None:
    assert (report.out_of_bounds, report.refused_resizes) == (0, 0)


def test_every_group_is_right_within_two_ticks_of_the_faults_stopping(report: Report) -> None:
    assert report.converged_ticks is not None
    assert report.converged_ticks <= 2


def test_every_resize_has_the_decision_that_made_it_on_record(report: Report) -> None:
    assert report.unrecorded_actuations == []

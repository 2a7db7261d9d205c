"""`nodescaler status` and `explain` against moto: what an operator reads, and clear errors."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.sqs_queue import SqsQueueLength
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.optin import TagNames
from nodescaler.domain.policy import SqsQueueMetric
from nodescaler.service.evaluation import Evaluator
from nodescaler.service.policies import PolicyBook
from nodescaler.service.producers import Producers
from nodescaler_cli.main import main

from tests.aws import (
    aws,  # noqa: F401  (moto for every test here)
    client,
    fill_queue,
    make_asg,
    make_state_table,
)
from tests.builders import UNLIMITED, VirtualClock, policy, queue_metric

TABLE = "nodescaler-state"
TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "gpu"}


@pytest.fixture
def evaluated() -> None:
    """One group evaluated twice (0 → 10, then held), one rejected, one untagged."""
    dynamodb = make_state_table(TABLE)
    client("sqs").create_queue(QueueName="jobs")
    make_asg("gpu-ng", tags=TAGS, max_size=50)
    make_asg("typo-ng", tags=TAGS | {"nodescaler/policy": "gpux"})
    make_asg("untagged")
    clock = VirtualClock()
    evaluator = Evaluator(
        node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
        producers=Producers({SqsQueueMetric: SqsQueueLength(client("sqs"))}),
        state=DynamoStateStore(dynamodb, TABLE, audit_ttl=timedelta(days=1)),
        policies=PolicyBook(
            {"gpu": policy(queue_metric("jobs", per_node=4), name="gpu", max_replicas=50)}
        ),
        clock=clock,
    )
    fill_queue("jobs", 40)
    evaluator.evaluate("gpu-ng", "tick-1")
    clock.advance(minutes=1)
    evaluator.evaluate("gpu-ng", "tick-2")
    evaluator.evaluate("typo-ng", "tick-2")


@pytest.mark.usefixtures("evaluated")
def test_status_shows_each_managed_group_its_metrics_and_problems(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["status", "--table", TABLE]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].startswith("group | policy | current → desired")
    assert rows[1].startswith("gpu-ng | gpu | 10 → 10 | ")
    assert "jobs 40/4/replica" in rows[1]
    assert rows[2].startswith("typo-ng | gpux | 0 → - | ")
    assert "names no deployed policy" in rows[2]
    assert not any(r.startswith("untagged") for r in rows)


@pytest.mark.usefixtures("evaluated")
def test_explain_lists_the_latest_decisions_with_their_inputs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", "gpu-ng", "--table", TABLE]) == 0
    out = capsys.readouterr().out
    first, *_ = out.splitlines()
    assert "hold at 10" in first  # newest first
    assert "scale up 0 → 10" in out
    assert "- jobs (SQSQueue): 40 against 4/replica → 10 [ok]" in out


def test_status_and_explain_name_a_fallback_and_since_when(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dynamodb = make_state_table(TABLE)
    make_asg("api-ng", tags=TAGS | {"nodescaler/policy": "api"}, desired=6, max_size=50)
    gone = queue_metric("gone", per_node=4) | {"fallback": {"failureThreshold": 2, "replicas": 2}}
    clock = VirtualClock()
    evaluator = Evaluator(
        node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
        producers=Producers({SqsQueueMetric: SqsQueueLength(client("sqs"))}),
        state=DynamoStateStore(dynamodb, TABLE, audit_ttl=timedelta(days=1)),
        policies=PolicyBook({"api": policy(gone, name="api", behavior=UNLIMITED)}),
        clock=clock,
    )
    first = clock.now()
    for tick in ("tick-1", "tick-2"):  # no such queue: missing, then its fallback
        evaluator.evaluate("api-ng", tick)
        clock.advance(minutes=1)

    assert main(["status", "--table", TABLE]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    since = f"since {first:%Y-%m-%d %H:%M:%S}Z"
    assert row.startswith("api-ng | api | 2 → 2 | ")
    assert f"gone ?/4/replica (fallback replicas 2 {since})" in row
    assert main(["explain", "api-ng", "--table", TABLE]) == 0
    newest = capsys.readouterr().out.split("\n")
    assert (
        f"- gone (SQSQueue): - against 4/replica → 2 [fallback replicas 2 {since}]" in (newest[2])
    )


def test_errors_are_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "nope", "--table", "missing-table"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("nodescaler explain: An error occurred (ResourceNotFoundException)")
    assert "\n" not in err
    assert main(["status"]) == 1  # no --table, and no stack to find it in
    assert capsys.readouterr().err.startswith(
        "nodescaler status: no --table given, and stack nodescaler could not be read"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "absent.yaml"], "nodescaler simulate: absent.yaml: cannot read it"),
        (["invoke", "drain", "absent.json"], "nodescaler invoke: absent.json: cannot read it"),
    ],
)
def test_a_missing_scenario_or_event_is_one_line_not_a_traceback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(message)


def test_an_event_that_is_not_json_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = tmp_path / "event.json"
    event.write_text("{not json")
    assert main(["invoke", "dispatch", str(event)]) == 2
    assert capsys.readouterr().err.startswith(f"nodescaler invoke: {event}: not JSON:")

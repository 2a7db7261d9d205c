"""`nodescaler pause` and `resume` against moto: the pause stored with who, why and until
when; evaluations held in its direction, saying what they would have done; the paused tag;
and every bad input one line, a non-zero exit and nothing written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.groups.optin import PauseDirection, TagNames
from nodescaler.domain.policy import SqsQueueMetric
from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.pause import Pause
from nodescaler.errors import StateConflictError
from nodescaler.service.evaluation import EvaluationResult, Evaluator, Outcome
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers
from nodescaler_cli.main import main

from tests.aws import (
    aws,  # noqa: F401  (moto for every test here)
    client,
    desired_capacity,
    make_asg,
    make_state_table,
    set_tasks,
)
from tests.builders import EXACT, T0, VirtualClock, policy, queue_metric

TABLE = "nodescaler-state"
TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "web"}
AT = ["--table", TABLE]


class Group:
    """One opted-in group of 5 nodes on moto, sized by a queue at 4 tasks a node, with
    nothing between the metric and the size (no window, no rate limit)."""

    def __init__(self, tags: dict[str, str] | None = None) -> None:
        self.dynamodb = make_state_table(TABLE)
        client("sqs").create_queue(QueueName="jobs")
        make_asg("web-ng", tags=TAGS | (tags or {}), desired=5, max_size=50)
        self.store = DynamoStateStore(self.dynamodb, TABLE, audit_ttl=timedelta(days=1))
        self.clock = VirtualClock()
        self.ticks = 0
        self.evaluator = Evaluator(
            node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
            producers=Producers({SqsQueueMetric: SqsQueueLength(client("sqs"))}),
            state=self.store,
            policies=PolicyBook(
                {"web": policy(queue_metric("jobs", per_node=4), name="web", behavior=EXACT)}
            ),
            clock=self.clock,
        )

    def evaluate(self, tasks: int) -> EvaluationResult:
        set_tasks("jobs", tasks)
        self.ticks += 1
        self.clock.advance(minutes=1)
        return self.evaluator.evaluate("web-ng", f"tick-{self.ticks}")


def caller() -> str:
    return str(client("sts").get_caller_identity()["Arn"])


def items() -> list[dict[str, Any]]:
    return list(client("dynamodb").scan(TableName=TABLE)["Items"])


def test_a_pause_is_stored_with_who_why_which_way_and_until_and_resume_removes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = Group()
    argv = ["pause", "web-ng", "--scale-in", "--for", "30m", "--reason", "node upgrade", *AT]
    assert main(argv) == 0
    pause = group.store.load("web-ng").pause
    assert pause is not None and pause.at is not None and pause.until is not None
    assert (pause.direction, pause.by, pause.reason) == (
        PauseDirection.SCALE_IN,
        caller(),
        "node upgrade",
    )
    assert pause.until - pause.at == timedelta(minutes=30)
    assert capsys.readouterr().out.strip() == f"node group web-ng: {pause.describe()}"

    assert main(["pause", "web-ng", *AT]) == 0  # a new pause replaces it: both ways, no end
    again = group.store.load("web-ng").pause
    assert again is not None and (again.direction, again.until, again.reason) == (
        PauseDirection.BOTH,
        None,
        "",
    )
    capsys.readouterr()
    assert main(["resume", "web-ng", *AT]) == 0
    assert capsys.readouterr().out.strip() == f"node group web-ng: resumed (was {again.describe()})"
    assert group.store.load("web-ng").pause is None


def test_a_pause_writes_only_itself_beside_the_state_and_a_stale_evaluation_cannot_drop_it() -> (
    None
):
    group = Group()
    group.evaluate(tasks=20)  # 5 nodes: history, a decision, a demand
    before = group.store.load("web-ng")
    assert main(["pause", "web-ng", "--scale-out", *AT]) == 0
    after = group.store.load("web-ng")
    assert after.pause is not None and after.pause.direction is PauseDirection.SCALE_OUT
    assert after.version == before.version + 1
    assert (after.history, after.last_decision, after.recent_events, after.demand) == (
        before.history,
        before.last_decision,
        before.recent_events,
        before.demand,
    )
    # An evaluation that read the state before the pause fails its write (and is retried)
    with pytest.raises(StateConflictError):
        group.store.save(before)
    assert group.store.load("web-ng").pause == after.pause
    # and one that reads it after keeps the pause in what it writes.
    group.evaluate(tasks=20)
    assert group.store.load("web-ng").pause == after.pause


def test_an_evaluation_held_by_a_scale_in_pause_says_so_and_what_it_would_have_done() -> None:
    group = Group()
    assert main(["pause", "web-ng", "--scale-in", "--for", "2h", *AT]) == 0
    pause = group.store.load("web-ng").pause
    assert pause is not None and pause.until is not None

    result = group.evaluate(tasks=12)  # 12 tasks want 3 nodes
    decision = result.decision
    assert decision is not None and result.outcome is Outcome.UNCHANGED
    assert desired_capacity("web-ng") == 5
    assert (decision.desired, decision.would_desire) == (5, 3)
    assert Limit.PAUSED in decision.limited_by
    assert decision.reason.startswith(f"{pause.describe()}: would scale in 5 → 3 | ")
    assert group.store.decisions("web-ng", limit=1)[0] == decision  # the audit trail says so

    scaled_out = group.evaluate(tasks=40)  # a scale-in pause still scales out
    assert scaled_out.outcome is Outcome.ACTED and desired_capacity("web-ng") == 10
    assert scaled_out.decision is not None and scaled_out.decision.paused == pause.describe()

    group.clock.at = pause.until  # expired: the scale-in goes ahead, paused no more
    expired = group.evaluate(tasks=12)
    assert expired.outcome is Outcome.ACTED and desired_capacity("web-ng") == 3
    assert expired.decision is not None and expired.decision.paused == ""


def test_a_scale_out_pause_holds_scale_out_until_resumed() -> None:
    group = Group()
    assert main(["pause", "web-ng", "--scale-out", *AT]) == 0
    held = group.evaluate(tasks=40)
    assert held.decision is not None and (held.decision.desired, held.decision.would_desire) == (
        5,
        10,
    )
    assert desired_capacity("web-ng") == 5
    assert main(["resume", "web-ng", *AT]) == 0
    assert group.evaluate(tasks=40).outcome is Outcome.ACTED
    assert desired_capacity("web-ng") == 10


@pytest.mark.parametrize(
    ("value", "held_out", "held_in"),
    [("true", True, True), ("scale-out", True, False), ("scale-in", False, True)],
)
def test_the_paused_tag_holds_its_direction(value: str, held_out: bool, held_in: bool) -> None:
    group = Group({"nodescaler/paused": value})
    down = group.evaluate(tasks=8)  # 8 tasks want 2 nodes
    assert (desired_capacity("web-ng") == 5) is held_in
    direction = "both" if value == "true" else value
    assert down.decision is not None
    assert down.decision.paused == f"paused ({direction}) by tag nodescaler/paused"
    before = desired_capacity("web-ng")
    group.evaluate(tasks=80)  # 80 tasks want 20
    assert (desired_capacity("web-ng") == before) is held_out


def test_an_unreadable_paused_tag_pauses_both_ways_and_is_named_on_the_group() -> None:
    group = Group({"nodescaler/paused": "yes please"})
    result = group.evaluate(tasks=40)
    assert result.decision is not None and result.decision.would_desire == 10
    assert desired_capacity("web-ng") == 5
    assert result.problems == (
        "node group web-ng: tag nodescaler/paused='yes please' must be true, scale-in, "
        "scale-out or false; treating the group as paused both ways",
    )
    assert group.store.load("web-ng").problems == result.problems  # for nodescaler status


def test_status_notes_who_paused_a_group_and_until_when(
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = Group({"nodescaler/paused": "scale-out"})
    group.evaluate(tasks=20)
    assert main(["pause", "web-ng", "--scale-in", "--for", "1d", "--reason", "upgrade", *AT]) == 0
    pause = group.store.load("web-ng").pause
    assert pause is not None
    capsys.readouterr()
    assert main(["status", "-o", "wide", *AT]) == 0
    (row,) = [r for r in capsys.readouterr().out.splitlines() if r.startswith("web-ng")]
    assert f"paused (scale-in) by {caller()} until {pause.until:%Y-%m-%d %H:%M:%S}Z (upgrade)" in (
        row
    )
    assert "paused (scale-out) by tag nodescaler/paused" in row


@pytest.mark.parametrize(
    ("argv", "message", "code"),
    [
        (["pause", "nope-ng"], "node group nope-ng: no such Auto Scaling group; nothing paused", 1),
        (
            ["pause", "plain-ng"],
            "node group plain-ng: not opted in (no tag nodescaler/enabled=true), so nodescaler "
            "does not scale it; nothing paused",
            1,
        ),
        (
            ["pause", "web-ng", "--cluster", "prod"],
            "node group web-ng: not opted in (no tag nodescaler/enabled=true and "
            "nodescaler/cluster=prod)",
            1,
        ),
        (["pause", "web-ng", "--for=-5m"], "--for '-5m' is not a positive duration", 2),
        (["pause", "web-ng", "--for", "-5m"], "--for '-5m' is not a positive duration", 2),
        (["pause", "web-ng", "--for", "-1"], "--for '-1' is not a duration", 2),
        (["pause", "web-ng", "--for", "0m"], "--for '0m' is not a positive duration", 2),
        (["pause", "web-ng", "--for", "soon"], "--for 'soon' is not a duration", 2),
        (
            ["pause", "web-ng", "--scale-in", "--scale-out"],
            "--scale-in and --scale-out together: leave both out to pause both ways",
            2,
        ),
        (["resume", "web-ng"], "node group web-ng: not paused; nothing to resume", 1),
        (["resume", "nope-ng"], "node group nope-ng: no such Auto Scaling group", 1),
    ],
)
def test_each_bad_input_is_one_line_a_non_zero_exit_and_nothing_written(
    argv: list[str], message: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """What is in AWS (no such group, not opted in) exits 1; a bad command line exits 2."""
    Group()
    make_asg("plain-ng", desired=1)
    assert main([*argv, *AT]) == code
    err = capsys.readouterr().err
    assert err.startswith(f"nodescaler {argv[0]}: {message}")
    assert err.count("\n") == 1
    assert items() == []


def test_resuming_a_group_paused_by_its_tag_says_to_remove_the_tag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    Group({"nodescaler/paused": "true"})
    assert main(["resume", "web-ng", *AT]) == 1
    assert capsys.readouterr().err.strip() == (
        "nodescaler resume: node group web-ng: not paused by nodescaler pause, but by its tag "
        "nodescaler/paused; remove the tag to resume it"
    )
    assert main(["pause", "web-ng", "--scale-in", *AT]) == 0
    capsys.readouterr()
    assert main(["resume", "web-ng", *AT]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("; still paused by its tag nodescaler/paused; remove the tag to resume it")
    )


def test_resuming_an_expired_pause_removes_it_and_says_it_had_expired(
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = Group()
    ended = Pause(direction=PauseDirection.BOTH, by=caller(), at=T0, until=T0 + timedelta(hours=1))
    group.store.pause("web-ng", ended)
    assert main(["resume", "web-ng", *AT]) == 0
    assert capsys.readouterr().out.strip() == (
        f"node group web-ng: resumed (was {ended.describe()}, already expired)"
    )
    assert group.store.load("web-ng").pause is None


def test_an_unreadable_stored_pause_pauses_both_ways_until_resumed() -> None:
    group = Group()
    assert main(["pause", "web-ng", "--scale-out", *AT]) == 0
    client("dynamodb").update_item(
        TableName=TABLE,
        Key={"pk": {"S": "GROUP#web-ng"}, "sk": {"S": "STATE"}},
        UpdateExpression="SET #pause = :bad",
        ExpressionAttributeNames={"#pause": "pause"},
        ExpressionAttributeValues={":bad": {"S": '{"direction": "sideways"}'}},
    )
    held = group.evaluate(tasks=8)  # would scale in 5 → 2: a scale-out pause would not hold it
    assert held.decision is not None and held.decision.would_desire == 2
    assert "paused (both) by an unreadable pause" in held.decision.reason
    assert desired_capacity("web-ng") == 5
    assert main(["resume", "web-ng", *AT]) == 0
    assert group.evaluate(tasks=8).outcome is Outcome.ACTED
    assert desired_capacity("web-ng") == 2

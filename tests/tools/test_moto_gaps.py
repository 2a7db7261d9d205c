"""The lifecycle actions the sandbox supplies for moto: a held action answers heartbeats
and one completion, and is let go when its heartbeat timeout passes, as Auto Scaling does."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from botocore.exceptions import ClientError
from nodescaler_sandbox.moto_gaps import LifecycleActionRecorder

from tests.aws import aws, calls, client  # noqa: F401  (moto for every test here)

START = datetime.fromisoformat("2026-11-23T09:00:00+00:00")
TOKEN = "6f1a2c3e-0000-4000-8000-00000000a001"  # Auto Scaling's tokens are UUIDs
OTHER = "6f1a2c3e-0000-4000-8000-00000000b002"
ACTION = {
    "AutoScalingGroupName": "web",
    "LifecycleHookName": "drain",
    "InstanceId": "i-0a",
    "LifecycleActionToken": TOKEN,
}


def test_a_heartbeat_moves_the_timeout_on_and_an_overdue_action_is_let_go() -> None:
    now = START
    recorder = LifecycleActionRecorder(lambda: now, heartbeat_timeout=timedelta(minutes=5))
    autoscaling = recorder.watch(client("autoscaling"))
    recorder.hold("web", "drain", "i-0a", TOKEN)

    now = START + timedelta(minutes=4)
    autoscaling.record_lifecycle_action_heartbeat(**ACTION)  # due at 9:09 now
    recorder.expire_overdue(START + timedelta(minutes=8))
    assert recorder.held == {("web", "drain", "i-0a"): TOKEN}

    recorder.expire_overdue(START + timedelta(minutes=9))
    assert recorder.held == {}
    with pytest.raises(ClientError, match="No active Lifecycle Action found with instance ID"):
        autoscaling.complete_lifecycle_action(**ACTION, LifecycleActionResult="CONTINUE")


def test_a_completed_action_is_not_let_go_again_and_a_wrong_token_keeps_nothing_alive() -> None:
    now = START
    recorder = LifecycleActionRecorder(lambda: now, heartbeat_timeout=timedelta(minutes=5))
    autoscaling = recorder.watch(client("autoscaling"))
    recorder.hold("web", "drain", "i-0a", TOKEN)

    now = START + timedelta(minutes=4)
    with pytest.raises(ClientError):
        autoscaling.record_lifecycle_action_heartbeat(**ACTION | {"LifecycleActionToken": OTHER})
    recorder.expire_overdue(START + timedelta(minutes=5))  # still due at 9:05
    assert recorder.held == {}

    recorder.hold("web", "drain", "i-0a", TOKEN)
    autoscaling.complete_lifecycle_action(**ACTION, LifecycleActionResult="CONTINUE")
    recorder.expire_overdue(START + timedelta(hours=1))
    assert [c.accepted for c in recorder.calls] == [False, True]

"""The world in seconds, through the sandbox (moto's server and the loopback API server):
SQS's metrics published once a minute, an alarm evaluated on its period, pods of a minute
arriving within it, and Cluster Autoscaler answering them within seconds."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import controllers
from nodescaler_sandbox import runner as scenarios
from nodescaler_sandbox.cadence import steps
from nodescaler_sandbox.outages import Outages
from nodescaler_sandbox.sandbox import sandbox
from nodescaler_sandbox.scenario_file import Scenario, load_scenario
from nodescaler_sandbox.world import World

from tests.sandbox.conftest import SCENARIOS

pytestmark = pytest.mark.slow  # moto's server and the API server

QUEUE, ALARM = "ml-training-queue", "ml-training-queue-backlog"


def queue_burst(**changes: Any) -> Scenario:
    loaded = load_scenario(SCENARIOS / "1-queue-burst.yaml")
    return loaded.model_copy(update=changes)


def visible_published(cloudwatch: Any, burst: Scenario, *, minutes: int) -> list[Any]:
    """The queue's ApproximateNumberOfMessagesVisible datapoints SQS published."""
    return cloudwatch.get_metric_statistics(  # type: ignore[no-any-return]
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Dimensions=[{"Name": "QueueName", "Value": QUEUE}],
        StartTime=burst.start,
        EndTime=burst.start + timedelta(minutes=minutes),
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]


def test_sqs_publishes_once_a_minute_and_the_alarm_fires_on_its_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given 30 tasks sent from 00:00:30 (within the minute from minute 0.5), a queue's
    # alarm of a 60-second period on "more than 0 visible", a world of 10-second steps
    # and the stack's tick every 2 minutes
    burst = queue_burst(minutes=4, tick_minutes=2)
    queue = burst.queues[0].model_copy(update={"tasks": {0.5: 30}, "max_workers": 30})
    burst = burst.model_copy(update={"queues": [queue]})
    depths, states = {}, {}
    with sandbox(burst.policies_path, tmp_path, boot=timedelta(minutes=3)) as box:
        world = World(burst, box, hooks=True)
        act = controllers.acting(burst, scenarios.NODESCALER, box, world, Outages([], box))
        cloudwatch = box.client("cloudwatch")
        ticks, tick = [], box.tick
        monkeypatch.setattr(box, "tick", lambda: (ticks.append(box.clock.now()), tick()))
        # When the world steps through two minutes under nodescaler
        for at in steps(burst.minutes, burst.step_seconds):
            world.step(at)
            act(at, burst.step_seconds)  # the step ending at `at`
            depths[at] = world.queue_depths(visible_only=True)[QUEUE]
            (alarm,) = cloudwatch.describe_alarms(AlarmNames=[ALARM])["MetricAlarms"]
            states[at] = alarm["StateValue"]
            box.advance(burst.step_seconds / 60, between=world.react)
        published = visible_published(cloudwatch, burst, minutes=5)
    # Then SQS published once a minute, on the minute, what the queue held visible then
    # ("pushed to CloudWatch at one-minute intervals":
    # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html)
    by_second = {
        int((p["Timestamp"] - burst.start).total_seconds()): p["Maximum"] for p in published
    }
    assert by_second == {minute * 60: depths[minute * 60] for minute in range(5)}
    assert by_second[0] == 0
    assert depths[30] > 0 and depths[60] > depths[30]  # tasks came within the minute
    # and the alarm, evaluated every minute on the minute's datapoint (an alarm of a
    # period of 60 s or more: "Alarm evaluation",
    # https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html),
    # stays OK while the tasks wait between two, and fires at 00:01:00
    assert [states[at] for at in (0, 30, 40, 50)] == ["OK"] * 4
    assert states[60] == "ALARM"
    # and nodescaler's tick came at the stack's rate, not at every step
    assert ticks == [burst.start + timedelta(minutes=m) for m in (0, 2, 4)]


def test_a_worker_at_work_has_received_its_message_in_flight_not_visible(
    tmp_path: Path,
) -> None:
    # Given 8 tasks sent at 00:00, their workers Ready once their nodes boot (3 minutes)
    burst = queue_burst(minutes=6)
    burst = burst.model_copy(
        update={"queues": [burst.queues[0].model_copy(update={"tasks": {0: 8}})]}
    )
    seen: dict[int, tuple[int, int, str]] = {}
    with sandbox(burst.policies_path, tmp_path, boot=timedelta(minutes=3)) as box:
        world = World(burst, box, hooks=True)
        act = controllers.acting(burst, scenarios.NODESCALER, box, world, Outages([], box))
        sqs, cloudwatch = box.client("sqs"), box.client("cloudwatch")
        url = sqs.get_queue_url(QueueName=QUEUE)["QueueUrl"]
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        # When the world steps under nodescaler
        for at in steps(burst.minutes, burst.step_seconds):
            world.step(at)
            act(at, burst.step_seconds)
            counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
            (alarm,) = cloudwatch.describe_alarms(AlarmNames=[ALARM])["MetricAlarms"]
            seen[at] = (*(int(counts[n]) for n in names), alarm["StateValue"])
            box.advance(burst.step_seconds / 60, between=world.react)
        published = visible_published(cloudwatch, burst, minutes=6)
    # Then the tasks wait visible until their workers are at work, then are in flight (a
    # received message is hidden until deleted: "Amazon SQS visibility timeout",
    # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html)
    assert seen[60][:2] == (8, 0)
    assert seen[300][:2] == (0, 8)
    # and SQS publishes the visible ones: the alarm on "more than 0 visible" fired, then
    # went back to OK as the workers took them, while the queue still holds all 8
    by_minute = {
        int((p["Timestamp"] - burst.start).total_seconds()) // 60: p["Maximum"] for p in published
    }
    assert by_minute[1] == 8 and by_minute[5] == 0
    assert seen[60][2] == "ALARM" and seen[330][2] == "OK"


def test_an_alarm_is_evaluated_on_the_minute_not_at_every_step(tmp_path: Path) -> None:
    # Given an alarm of a 60-second period on "more than 0 visible", and a datapoint of 5
    # at 00:00:30 (between two of SQS's, as a hand-made timeline)
    burst = queue_burst(minutes=2)
    with sandbox(burst.policies_path, tmp_path, boot=timedelta(minutes=3)) as box:
        World(burst, box, hooks=True)
        cloudwatch = box.client("cloudwatch")
        box.publish_queue_metrics({QUEUE: 0})
        box.evaluate_alarms()
        states = {}
        for at in range(10, 70, 10):
            box.advance(10 / 60)
            if at == 30:
                box.publish_queue_metrics({QUEUE: 5})
            # When the sandbox is asked to evaluate at every 10-second step
            box.evaluate_alarms()
            (alarm,) = cloudwatch.describe_alarms(AlarmNames=[ALARM])["MetricAlarms"]
            states[at] = alarm["StateValue"]
    # Then the alarm is evaluated on the minute only (a period of 60 s or more: every
    # minute, "Alarm evaluation",
    # https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html):
    # OK until then, ALARM at 00:01:00 on the minute's datapoint
    assert states == {10: "OK", 20: "OK", 30: "OK", 40: "OK", 50: "OK", 60: "ALARM"}


def test_pods_of_a_minute_arrive_within_it_and_cluster_autoscaler_answers_in_seconds(
    tmp_path: Path,
) -> None:
    # Given a deployment of 48 one-core pods growing from none at minute 0 to 48 at minute 1
    ramp = load_scenario(SCENARIOS / "2-capacity-reservation.yaml")
    api = ramp.deployments[0].model_copy(update={"replicas": {0: 0, 1: 48}})
    ramp = ramp.model_copy(update={"minutes": 3, "deployments": [api]})
    # When it runs under both controllers, the world stepping every 10 s
    both = (scenarios.NODESCALER, scenarios.BASELINE)
    summary = scenarios.run(ramp, out=tmp_path, write=lambda _: None, controllers=both, chart=False)
    pods = json.loads((tmp_path / "pods.json").read_text())
    created = {run: sorted(p["created"] for p in pods[run]) for run in pods}
    # Then the pods come within minute 1, at several of its steps, the same in both runs
    ours = created[scenarios.NODESCALER]
    assert len(ours) == 48 and all(1 <= minute < 2 for minute in ours)
    assert len(set(ours)) > 3
    assert created[scenarios.BASELINE] == ours
    # and Cluster Autoscaler, scanning every 10 s, asks for nodes as they come: more than
    # once within the minute, not once on the minute
    asked = [r["minute"] for r in summary[scenarios.BASELINE]["scale_requests"]]
    assert len(asked) > 1 and all(1 <= minute < 2 for minute in asked), asked

"""End to end through the handlers: tick and alarm → FIFO queue → evaluate → resize, on moto."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from nodescaler.deadline import Deadline
from nodescaler.errors import MalformedEventError
from nodescaler_sandbox.lambda_local import LocalContext

from functions.evaluate import handler as evaluate
from tests.aws import CallCounter, client, desired_capacity, fill_queue, make_asg
from tests.builders import StaleReads
from tests.e2e.conftest import Deployment, evaluation_record, event

OPTED_IN = {"nodescaler/enabled": "true"}
GPU = OPTED_IN | {"nodescaler/policy": "gpu-training"}
WEB = OPTED_IN | {"nodescaler/policy": "business-hours"}
TRAINING_QUEUE = "ml-training-queue"  # the queue policies/gpu-training.yaml reads


def training_tasks(count: int) -> None:
    client("sqs").create_queue(QueueName=TRAINING_QUEUE)
    fill_queue(TRAINING_QUEUE, count)


def test_given_three_groups_a_tick_scales_only_the_queue_driven_one_to_600_then_back_to_min(
    deployment: Deployment, calls: CallCounter, output: Any
) -> None:
    make_asg("untagged", desired=2)
    make_asg("bad-policy", tags=GPU | {"nodescaler/policy": "no-such-policy"}, desired=2)
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(2400)

    deliveries = deployment.tick()

    assert [d.failed for d in deliveries] == [()]
    assert desired_capacity("gpu") == 600  # 2400 tasks at 4 per node, in one decision
    assert (desired_capacity("untagged"), desired_capacity("bad-policy")) == (2, 2)
    printed = output()
    assert printed.metric("DesiredNodes", "gpu") == [600]
    assert printed.metric("NodesAdded", "gpu") == [600]
    assert printed.metric("NodeGroupRejected", "bad-policy") == [1]
    assert printed.metric("EvaluationsQueued") == [2]  # the untagged group is not even queued
    assert (
        "node group bad-policy: tag nodescaler/policy='no-such-policy' names no deployed policy "
        "(deployed: business-hours, gpu-training, microservices, prometheus-queue, web, "
        "web-predictive, web-warm)"
    ) in printed.messages("WARNING")

    # Queue drained: the group keeps its nodes for the 600 s window, then goes to min (0).
    client("sqs").purge_queue(
        QueueUrl=client("sqs").get_queue_url(QueueName=TRAINING_QUEUE)["QueueUrl"]
    )
    sizes = []
    for _ in range(11):
        deployment.clock.advance(minutes=1)
        deployment.tick()
        sizes.append(desired_capacity("gpu"))
    assert sizes == [600] * 9 + [0, 0]
    assert calls.calls["SetDesiredCapacity"] == 2
    assert deployment.dead_letters() == []


def test_given_an_alarm_named_in_a_policy_its_state_change_acts_without_a_tick(
    deployment: Deployment, output: Any
) -> None:
    make_asg("web", tags=WEB, desired=2, min_size=2, max_size=40)
    make_asg("gpu", tags=GPU, max_size=600)

    result = deployment.dispatch(event("alarm-state-change.json"))
    deployment.evaluations.drain()

    assert result == {"cause": "alarm web-requests-high: OK → ALARM", "queued": ["web"]}
    # Monday 10:04 in Paris: office hours ask for 10 nodes. The request-rate metric has no
    # data in moto; it is reported, and it only holds back a scale-in.
    assert (desired_capacity("web"), desired_capacity("gpu")) == (10, 0)
    printed = output()
    assert printed.metric("MetricsUnavailable", "web") == [1]
    decision = next(line["decision"] for line in printed.logs if line.get("node_group") == "web")
    assert decision["metrics"][1]["status"] == "missing"
    assert "CloudWatch returned no datapoint in the last 600s" in decision["metrics"][1]["detail"]


def test_an_alarm_no_policy_names_queues_nothing_and_says_so(
    deployment: Deployment, output: Any
) -> None:
    make_asg("web", tags=WEB, desired=2, min_size=2, max_size=40)
    alarm = event("alarm-state-change.json")
    alarm["detail"]["alarmName"] = "someone-elses-alarm"
    assert deployment.dispatch(alarm)["queued"] == []
    assert output().messages("WARNING") == [
        "alarm someone-elses-alarm: no managed node group's policy lists it"
    ]


def test_an_alarm_named_with_a_terminal_escape_is_said_on_one_clean_line(
    deployment: Deployment, output: Any
) -> None:
    # Given an alarm state change, sent by anyone allowed to invoke dispatch, whose name
    # carries a terminal escape
    alarm = event("alarm-state-change.json")
    alarm["detail"]["alarmName"] = "\x1b]0;pwned\x07" + "x" * 240

    # When it is dispatched
    result = deployment.dispatch(alarm)

    # Then what is shown and stored of the name is one clean line
    (warning,) = output().messages("WARNING")
    assert warning == f"alarm ]0;pwned {'x' * 240}: no managed node group's policy lists it"
    assert result["cause"] == f"alarm ]0;pwned {'x' * 240}: OK → ALARM"


def test_a_tick_over_250_managed_groups_describes_them_in_at_most_3_calls(
    deployment: Deployment, calls: CallCounter
) -> None:
    for index in range(250):
        make_asg(f"ng-{index:03}", tags=GPU)
    make_asg("untagged")
    calls.watch(deployment.clients.sqs)
    calls.calls.clear()

    result = deployment.dispatch(event("schedule-tick.json"))

    assert len(result["queued"]) == 250
    assert calls.calls["DescribeAutoScalingGroups"] <= 3
    assert calls.calls["SendMessageBatch"] == 25
    waiting = client("sqs").get_queue_attributes(
        QueueUrl=deployment.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    assert waiting["Attributes"]["ApproximateNumberOfMessages"] == "250"


def test_evaluations_that_change_nothing_write_nothing_to_auto_scaling_or_eks(
    deployment: Deployment, calls: CallCounter
) -> None:
    make_asg("gpu", tags=GPU)
    make_asg(
        "eks-gpu",
        tags=GPU | {"eks:cluster-name": "prod", "eks:nodegroup-name": "gpu"},
    )
    training_tasks(0)
    for _ in range(3):
        deployment.tick()
        deployment.clock.advance(minutes=1)
    assert calls.calls["SetDesiredCapacity"] + calls.calls["UpdateNodegroupConfig"] == 0
    assert calls.calls["DescribeAutoScalingGroups"] > 0  # the counter does see this client


class CountsWrites:
    """The state store, noting the version of each write it accepted."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.written: list[int] = []

    def load(self, group: str) -> Any:
        return self._store.load(group)

    def save(self, state: Any, **kwargs: Any) -> Any:
        saved = self._store.save(state, **kwargs)
        self.written.append(saved.version)
        return saved


# 0: the group's first state item; 3: one already written three times, whose write is
# conditional on the version read rather than on the item being new.
@pytest.mark.parametrize("earlier_evaluations", [0, 3])
def test_two_evaluations_racing_on_one_group_resize_it_once(
    deployment: Deployment, calls: CallCounter, output: Any, earlier_evaluations: int
) -> None:
    # Given a group whose state is at version n, n evaluations having held it at 0
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(0)
    store = CountsWrites(deployment.evaluator.state)
    evaluator = replace(deployment.evaluator, state=store)
    for index in range(earlier_evaluations):
        evaluate.handler(
            evaluation_record("gpu", f"tick-{index}", f"m-{index}"),
            LocalContext(),
            evaluator=evaluator,
        )
    version = earlier_evaluations
    assert store.load("gpu").version == version
    # and 40 tasks, seen by two evaluations that both read the state at version n
    fill_queue(TRAINING_QUEUE, 40)
    racing = replace(evaluator, state=StaleReads(store))
    racing.state.load("gpu")  # it read the group's state before the first one wrote
    store.written.clear()
    first, second = (
        evaluation_record("gpu", event_id, message_id)
        for event_id, message_id in (("tick-race", "m-race"), ("alarm-race", "m-alarm"))
    )

    # When the first resizes the group, then the second writes what it decided
    won = evaluate.handler(first, LocalContext(), evaluator=evaluator)
    with pytest.raises(BatchProcessingError):  # its only record failed: the batch is retried
        evaluate.handler(second, LocalContext(), evaluator=racing)
    retried = evaluate.handler(second, LocalContext(), evaluator=evaluator)

    # Then the group is resized once, and version n+1 was written once: the second's write
    # of it was refused, and its retry wrote after the first's
    assert won == {"batchItemFailures": []}
    assert retried == {"batchItemFailures": []}  # it reads the new state: nothing left to do
    assert (desired_capacity("gpu"), calls.calls["SetDesiredCapacity"]) == (10, 1)
    assert store.written == [version + 1, version + 2, version + 3]  # claim, record, retry
    assert any(
        m.startswith("node group gpu: evaluation failed, will retry: node group gpu: state changed")
        for m in output().messages("ERROR")
    )


class LosesTheRecordOfAResize:
    """A store whose write after a resize fails once (DynamoDB unreachable at that moment)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.failed = False

    def load(self, group: str) -> Any:
        return self._store.load(group)

    def save(self, state: Any, **kwargs: Any) -> Any:
        if state.acting is None and kwargs.get("audit") and not self.failed:
            self.failed = True
            raise ConnectionError("DynamoDB did not answer")
        return self._store.save(state, **kwargs)


def test_a_resize_whose_record_was_lost_is_recorded_by_the_retry_not_decided_again(
    deployment: Deployment, calls: CallCounter
) -> None:
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(40)
    flaky = replace(deployment.evaluator, state=LosesTheRecordOfAResize(deployment.evaluator.state))
    request = evaluation_record("gpu", "tick-1", "m-1")
    with pytest.raises(BatchProcessingError):  # resized, then the record failed
        evaluate.handler(request, LocalContext(), evaluator=flaky)
    assert desired_capacity("gpu") == 10
    retried = evaluate.handler(request, LocalContext(), evaluator=deployment.evaluator)
    assert retried == {"batchItemFailures": []}
    state = deployment.evaluator.state.load("gpu")
    assert (state.acting, state.seen("tick-1")) == (None, True)
    assert [e.change for e in state.history.scale_events] == [10]  # the rate policies see it
    (audited,) = deployment.evaluator.state.decisions("gpu")
    assert (audited.current, audited.desired) == (0, 10)
    assert calls.calls["SetDesiredCapacity"] == 1


# --- bad input: named, counted, retried a bounded number of times, never blocking others ---


def test_malformed_tags_are_reported_and_those_groups_left_alone_while_others_scale(
    deployment: Deployment, output: Any
) -> None:
    make_asg("gpu", tags=GPU, max_size=600)
    make_asg("no-policy-tag", tags=OPTED_IN, desired=3)
    make_asg("policy-typo", tags=GPU | {"nodescaler/policy": "GPU Training"}, desired=3)
    make_asg("enabled-yes", tags=GPU | {"nodescaler/enabled": "yes"}, desired=3)
    make_asg("dry-run-maybe", tags=GPU | {"nodescaler/dry-run": "maybe"}, desired=3)
    training_tasks(40)

    deployment.tick()

    assert desired_capacity("gpu") == 10
    for untouched in ("no-policy-tag", "policy-typo", "enabled-yes", "dry-run-maybe"):
        assert desired_capacity(untouched) == 3, untouched
    warnings = output().messages("WARNING")
    assert "node group no-policy-tag: tag nodescaler/policy is missing or empty" in warnings
    assert (
        "node group policy-typo: tag nodescaler/policy='GPU Training' is not a policy name "
        "(lowercase letters, digits and '-')"
    ) in warnings
    assert (
        "node group dry-run-maybe: tag nodescaler/dry-run='maybe' must be true or false; "
        "treating the group as dry-run"
    ) in warnings
    assert not any("enabled-yes" in w for w in warnings)  # not opted in: not ours to judge


def test_a_missing_queue_or_a_metric_without_data_holds_the_group_and_names_the_cause(
    deployment: Deployment, policies: Any, output: Any
) -> None:
    (policies / "orphan.yaml").write_text(
        (policies / "gpu-training.yaml")
        .read_text()
        .replace("name: gpu-training", "name: orphan")
        .replace("queue: ml-training-queue", "queue: no-such-queue")
    )
    deployment.deploy()
    make_asg("orphan", tags=OPTED_IN | {"nodescaler/policy": "orphan"}, desired=3)
    make_asg("gpu", tags=GPU, max_size=600)
    deployment.clock.advance(hours=12)  # 22:00 in Paris: the schedule alone would say 2
    make_asg("web", tags=WEB, desired=5, min_size=2, max_size=40)
    training_tasks(40)

    deployment.tick()

    # neither scales in on a metric it cannot read; the healthy group is not held up
    assert (desired_capacity("orphan"), desired_capacity("web")) == (3, 5)
    assert desired_capacity("gpu") == 10
    printed = output()
    assert printed.metric("MetricsUnavailable", "orphan") == [1]
    assert printed.metric("MetricsUnavailable", "web") == [1]
    orphan = next(line for line in printed.logs if line.get("node_group") == "orphan")
    assert "missing-metric" in orphan["decision"]["limited_by"]
    assert "queue no-such-queue: AWS.SimpleQueueService.NonExistentQueue" in str(orphan)


def test_a_throttled_resize_is_retried_then_dead_lettered_without_holding_up_other_groups(
    deployment: Deployment, output: Any
) -> None:
    make_asg("throttled", tags=GPU, max_size=600)
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(40)
    deployment.clients.autoscaling.meta.events.register(
        "before-call.auto-scaling.SetDesiredCapacity", _throttle_group("throttled")
    )

    deliveries = deployment.tick()

    assert desired_capacity("gpu") == 10
    assert desired_capacity("throttled") == 0
    assert sum(len(d.failed) for d in deliveries) == 3  # received 3 times (maxReceiveCount)
    (dead,) = deployment.dead_letters()
    assert '"node_group":"throttled"' in dead["Body"]
    errors = output().messages("ERROR")
    assert len(errors) == 3
    assert errors[0].startswith(
        "node group throttled: evaluation failed, will retry: node group throttled: "
        "resizing 0 → 10 failed: An error occurred (Throttling)"
    )


def _throttle_group(group: str) -> Any:
    """A botocore hook answering SetDesiredCapacity for `group` as AWS does once its retries
    are spent: HTTP 400, Throttling."""

    class Response:
        status_code = 400

    def hook(params: dict[str, Any], **_: Any) -> Any:
        if params["body"].get("AutoScalingGroupName") != group:  # the request as serialized
            return None
        return Response(), {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}

    return hook


def test_a_malformed_evaluation_message_is_dead_lettered_at_once_and_holds_up_nothing(
    deployment: Deployment, output: Any
) -> None:
    make_asg("gpu", tags=GPU, max_size=600)
    training_tasks(40)
    # A malformed request in the gpu group's own FIFO stream, before the tick's request:
    # retrying it cannot help, and the request behind it must not wait for it, nor die with it.
    client("sqs").send_message(
        QueueUrl=deployment.queue_url,
        MessageBody='{"node_group": "gpu", "cause": "tick"}',
        MessageGroupId="gpu",
        MessageDeduplicationId="junk-1",
    )

    deliveries = deployment.tick()

    assert desired_capacity("gpu") == 10
    assert sum(d.received for d in deliveries) == 2  # each received once: no retry
    (dead,) = deployment.dead_letters()
    assert dead["Body"] == '{"node_group": "gpu", "cause": "tick"}'
    assert dead["MessageAttributes"]["reason"]["StringValue"].startswith(
        "malformed evaluation message"
    )
    printed = output()
    (malformed, moved) = printed.messages("ERROR")
    assert "body.event_id: Field required; body.requested_at: Field required" in malformed
    assert "moved to the dead-letter queue, not retried" in moved
    assert printed.metric("MalformedEvents") == [1]
    assert printed.metric("DeadLettered") == [1]


def test_a_malformed_eventbridge_event_fails_the_invocation_naming_the_field(
    deployment: Deployment, output: Any
) -> None:
    broken = event("alarm-state-change.json")
    del broken["detail"]["alarmName"]
    with pytest.raises(MalformedEventError, match=r"detail\.alarmName: Field required"):
        deployment.dispatch(broken)
    printed = output()
    assert printed.metric("MalformedEvents") == [1]
    assert printed.messages("ERROR") == [
        "event c4c1c1c9-6542-e61b-6ef0-8c4d36933a92 is not a scheduled tick, a CloudWatch alarm "
        "state change or an Auto Scaling launch failure: CloudWatch Alarm State Change.detail."
        "alarmName: Field required"
    ]


def test_a_failed_evaluation_shows_again_within_seconds_not_after_the_visibility_timeout(
    deployment: Deployment, output: Any
) -> None:
    make_asg("throttled", tags=GPU, max_size=600)
    training_tasks(40)
    deployment.clients.autoscaling.meta.events.register(
        "before-call.auto-scaling.SetDesiredCapacity", _throttle_group("throttled")
    )
    waited: list[float] = []
    pass_time = deployment.wait
    deployment.wait = lambda delay: (waited.append(delay.total_seconds()), pass_time(delay))[1]

    deliveries = deployment.tick()

    # Tried again after 5 s, then 10 s (the queue's timeout is 360 s); 20 s after the third
    # failure the queue moves it to its dead-letter queue: the group's stream is held up
    # 35 s, not the 18 minutes three timeouts would take.
    assert [len(d.failed) for d in deliveries] == [1, 1, 1]
    assert waited == [5.0, 10.0, 20.0]
    assert len(deployment.dead_letters()) == 1


def queued_event_ids(deployment: Deployment) -> list[str]:
    messages = (
        client("sqs")
        .receive_message(QueueUrl=deployment.queue_url, MaxNumberOfMessages=10)
        .get("Messages", [])
    )
    return [json.loads(m["Body"])["event_id"] for m in messages]


def test_given_two_ticks_sending_one_id_each_is_evaluated_as_its_own_tick(
    deployment: Deployment,
) -> None:
    # Given ticks whose ids are alike (as a keyword left unreplaced inside a string would
    # make them), when each is dispatched,
    make_asg("gpu", tags=GPU)
    for time in ("2026-11-23T08:59:00Z", "2026-11-23T09:00:00Z"):
        deployment.dispatch(event("schedule-tick.json", id="same-id", time=time))
    # then each queued the group's evaluation under its own scheduled time: neither was
    # dropped as a duplicate, nor skipped downstream as seen.
    assert queued_event_ids(deployment) == [
        "tick-2026-11-23T08:59:00Z",
        "tick-2026-11-23T09:00:00Z",
    ]


def test_given_a_tick_with_an_unreplaced_scheduler_keyword_it_is_refused_by_name_not_failed(
    deployment: Deployment, output: Any
) -> None:
    make_asg("gpu", tags=GPU)
    placeholder = event("schedule-tick.json", id="tick-<aws.scheduler.scheduled-time>")

    result = deployment.dispatch(placeholder)  # no failure to retry: the next tick comes

    refusal = (
        "tick tick-<aws.scheduler.scheduled-time>: id: an EventBridge Scheduler context "
        "attribute (<aws.scheduler.…>) left unreplaced: refused, the next tick comes in its place"
    )
    assert result == {"cause": "tick", "queued": [], "refused": refusal}
    printed = output()
    assert printed.messages("ERROR") == [refusal]
    assert printed.metric("MalformedEvents") == [1]
    assert queued_event_ids(deployment) == []


def test_given_too_little_time_left_then_the_unstarted_records_fail_alone_and_are_retried(
    deployment: Deployment, output: Any
) -> None:
    # Given three groups to evaluate, each evaluation taking 25 s (its queue read, on a fake
    # clock), and invocations with 35 s left (3 s kept to record results)
    for group in ("gpu-a", "gpu-b", "gpu-c"):
        make_asg(group, tags=GPU, max_size=600)
    evaluations_taking_25_s_with_35_s_left(deployment)

    # When a tick queues them and the function is invoked until none is left
    deliveries = deployment.tick()

    # Then each invocation evaluates one and sends the others, not started, back to the
    # queue as new messages: evaluated by later invocations, none lost, none dead-lettered
    assert [(d.received, len(d.failed)) for d in deliveries] == [(3, 0), (2, 0), (1, 0)]
    assert [desired_capacity(g) for g in ("gpu-a", "gpu-b", "gpu-c")] == [10, 10, 10]
    assert deployment.dead_letters() == []
    warned = output().messages("WARNING")
    assert len(warned) == 3 and all("not started, 7.0s left of the invocation" in w for w in warned)


def test_given_a_request_not_started_in_more_invocations_than_max_receive_count_then_it_is_not_dead_lettered(
    deployment: Deployment, output: Any
) -> None:
    """Every receive counts towards the redrive policy's maxReceiveCount (3 here), however
    the message came back: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html"""
    # Given five groups to evaluate, each evaluation taking 25 s, and invocations with 35 s
    groups = [f"gpu-{name}" for name in "abcde"]
    for group in groups:
        make_asg(group, tags=GPU, max_size=600)
    evaluations_taking_25_s_with_35_s_left(deployment)

    # When a tick queues them: the last is not started by four invocations in a row
    deliveries = deployment.tick()

    # Then every group is evaluated, and nothing is dead-lettered: a request nobody tried
    # spent no receive
    assert len(deliveries) == 5
    assert [desired_capacity(g) for g in groups] == [10] * 5
    assert deployment.dead_letters() == []
    assert output().metric("DeadLettered") == []


def evaluations_taking_25_s_with_35_s_left(deployment: Deployment) -> None:
    """40 training tasks queued; each evaluation's queue read takes 25 s on a fake clock,
    and each invocation has 35 s left."""
    training_tasks(40)
    clock = [0.0]

    def slow_read(params: dict[str, Any], **_: Any) -> None:
        if TRAINING_QUEUE in params.get("QueueUrl", ""):
            clock[0] += 25

    deployment.clients.sqs.meta.events.register(
        "provide-client-params.sqs.GetQueueAttributes", slow_read
    )
    evaluator = replace(deployment.evaluator, deadline=Deadline(monotonic=lambda: clock[0]))
    deployment.evaluations.handler = partial(
        evaluate.handler, evaluator=evaluator, redelivery=deployment.redelivery
    )
    deployment.evaluations.context = lambda: LocalContext(remaining_ms=35_000)

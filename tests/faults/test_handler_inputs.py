"""Given whatever a handler may be handed — the sample events mutated (fields missing, of the
wrong type, NaN, ±inf, huge, oversize), SQS batches mixing good and bad messages, odd tags
on the Auto Scaling groups, odd policy documents, metrics reading NaN, ±inf, negative, huge
or nothing — then no unexpected exception escapes, no record is lost, every refusal names
what was wrong, and no group leaves [min, max] or scales in on a metric it could not read.

The real handlers, wired by `nodescaler.wiring`, over moto in process (and, for drain, the
loopback Kubernetes API server). A test's examples share its deployment: each example that
sizes groups makes its own, so none sees another's.
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import logging
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.awsrequest import AWSResponse
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from nodescaler.deployment import DEFAULT_DRAIN_HOOK
from nodescaler.domain.policy.parsing import parse_policy
from nodescaler.errors import (
    DrainFailedError,
    LifecycleActionExpiredError,
    MalformedEventError,
    PolicyError,
)
from nodescaler.events import LIFECYCLE_ACTION
from nodescaler.events.evaluation_record import EvaluationRecord
from nodescaler.observability.reports import logger as functions_log
from nodescaler_sandbox.lambda_local import LocalContext
from pydantic import ValidationError

from functions.evaluate import handler as evaluate
from tests import aws as moto_aws
from tests.aws import client, desired_capacity, fill_queue, make_asg
from tests.e2e import conftest as e2e
from tests.e2e import test_drain_handler as drain_tests
from tests.e2e.conftest import ROOT, Deployment, LogLines, Output, event
from tests.faults.inputs import ODD_NUMBERS, ODD_STRINGS, OVERSIZE, TEXT, mostly, mutated

aws, calls = moto_aws.aws, moto_aws.calls  # moto in process, fresh for each test
policies, clock, deployment = e2e.policies, e2e.clock, e2e.deployment
function = drain_tests.function  # the drain function on the loopback API server

# Each test shares its deployment across examples; the examples are independent of it.
SHARED = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

OPTED_IN = {"nodescaler/enabled": "true"}
GPU = OPTED_IN | {"nodescaler/policy": "gpu-training"}  # 4 tasks per node, up to 600
WEB = OPTED_IN | {"nodescaler/policy": "business-hours"}
TRAINING_QUEUE = "ml-training-queue"

DISPATCH_SAMPLES = ("schedule-tick.json", "alarm-state-change.json", "launch-unsuccessful.json")
DRAIN_SAMPLES = (
    "lifecycle-terminate.json",
    "spot-interruption.json",
    "rebalance-recommendation.json",
)
DETAIL_TYPES = st.sampled_from(
    [event(name)["detail-type"] for name in DISPATCH_SAMPLES + DRAIN_SAMPLES]
    + ["EC2 Instance Launch Successful", "autoscaling:TEST_NOTIFICATION"]
)
EVENT_FIELDS = st.sampled_from(["id", "time", "source", "detail-type", "detail", "Event"])


@contextmanager
def printed() -> Iterator[Callable[[], Output]]:
    """What the functions print during one example: log lines and EMF records."""
    lines = LogLines()
    functions_logger = logging.getLogger(functions_log.name)
    functions_logger.addHandler(lines)
    stdout = io.StringIO()
    try:
        with redirect_stdout(stdout):
            yield lambda: Output(lines.lines, stdout.getvalue())
    finally:
        functions_logger.removeHandler(lines)


def assert_names_the_fields(problems: str) -> None:
    """`field.path: what is wrong; ...`: each problem names its field (the event as a whole
    only when it has no detail-type to tell its kind by)."""
    for problem in problems.split("; "):
        field, _, what = problem.partition(": ")
        assert field and what, problem
        if field == "(event)":
            assert re.search(r"detail.type|dictionary|object", what), problem


def assert_refused(error: MalformedEventError, output: Output, expected: str) -> None:
    """Refused naming the event and each field at fault; logged once, counted once."""
    message = str(error)
    head, _, problems = message.partition(f" {expected}: ")
    assert head.startswith("event ") and problems, message
    assert_names_the_fields(problems)
    assert output.messages("ERROR") == [message]
    assert output.metric("MalformedEvents") == [1]


def events_from(samples: tuple[str, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(samples).flatmap(
        lambda name: mutated(event(name), also=DETAIL_TYPES, keys=EVENT_FIELDS | st.text(TEXT))
    )


# --- dispatch: EventBridge events ----------------------------------------------------------


@pytest.fixture
def dispatching(deployment: Deployment) -> Deployment:
    """The groups the samples name: web lists the alarm, spot-ng had a launch fail."""
    make_asg("web", tags=WEB, desired=0, max_size=40)
    make_asg("gpu", tags=GPU)
    make_asg("spot-ng", tags=GPU)
    return deployment


@settings(SHARED, max_examples=150)
@given(incoming=events_from(DISPATCH_SAMPLES))
@example(incoming=event("schedule-tick.json", time="2026-11-23T09:00:00"))  # no time zone
@example(incoming=event("alarm-state-change.json", id="x" * 129))
@example(incoming=event("launch-unsuccessful.json", id=""))
@example(incoming=event("schedule-tick.json", time=1_795_424_700_001))  # 5 min ahead, and 1 ms
def test_dispatch_queues_or_refuses_any_event_naming_the_field(
    dispatching: Deployment, incoming: Any
) -> None:
    with printed() as output:
        try:
            result = dispatching.dispatch(incoming)
        except MalformedEventError as error:
            if "ahead of this function's clock" in str(error):  # well formed, dated ahead
                assert str(error).startswith(f"event {incoming['id']}: time: dated ")
                assert output().metric("MalformedEvents") == [1]
                return
            assert_refused(error, output(), "or an Auto Scaling launch failure")
            return
    json.dumps(result)  # what Lambda can serialize
    assert set(result["queued"]) <= {"web", "gpu", "spot-ng"}
    assert output().metric("MalformedEvents") == []


# --- drain: lifecycle actions and Spot warnings ---------------------------------------------


@settings(SHARED, max_examples=150)
@given(incoming=events_from(DRAIN_SAMPLES))
def test_drain_drains_or_refuses_any_event_and_completes_each_action_once(
    function: drain_tests.DrainFunction, incoming: Any
) -> None:
    drain_tests.hold(function)
    function.node_for(drain_tests.LIFECYCLE["EC2InstanceId"])
    function.node_for(drain_tests.SPOT_INSTANCE)
    completed = len(function.recorder.completed())
    with printed() as output:
        try:
            result = function(incoming)
        except MalformedEventError as error:
            assert_refused(error, output(), "or an EC2 Spot warning")
            assert len(function.recorder.completed()) == completed  # nothing to complete
            return
        except LifecycleActionExpiredError as error:  # not ours to hold: it names whose
            assert output().messages("ERROR") == [
                f"{error}; the event is kept in the dead-letter queue"
            ]
            assert output().metric("LifecycleActionsExpired") == [1]
            result = None
        except DrainFailedError as error:
            assert output().messages("ERROR") == [str(error)]
            assert output().metric("DrainFailures") == [1]
            result = None
    if result is not None:
        json.dumps(result)
    if (
        isinstance(incoming, dict)
        and incoming.get("detail-type") == LIFECYCLE_ACTION
        and (result is None or result.get("outcome") != "test-notification")
    ):
        # completed once when the group is ours (the stack hooked "web"), the hook is this
        # deployment's and Auto Scaling holds the instance there; else left alone
        ours = result is None or result.get("outcome") not in ("not-ours", "unconfirmed")
        assert len(function.recorder.completed()) == completed + ours
        if not ours:
            assert result is not None
            own_hook = incoming["detail"]["LifecycleHookName"] == DEFAULT_DRAIN_HOOK
            held = (incoming["detail"]["EC2InstanceId"], result["node_group"]) == (
                drain_tests.LIFECYCLE["EC2InstanceId"],
                "web",
            )
            assert not (held and own_hook)


# --- evaluate: SQS batches -------------------------------------------------------------------

BATCH_GROUPS = ("gpu", "web", "untagged", "bad-policy", "gone")
SQS_RECORD = event("evaluate-batch.json")["Records"][0]


@st.composite
def batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1 to 6 records, each a request for one of the groups: as dispatch writes it, mutated,
    or not JSON at all; in its group's message group, another, or none."""
    records = []
    for index in range(draw(st.integers(1, 6))):
        group = draw(st.sampled_from(BATCH_GROUPS))
        request = {
            "node_group": group,
            "event_id": draw(st.sampled_from(["tick-1", "tick-2", "alarm-1"])),
            "cause": "tick",
            "requested_at": "2026-11-23T09:00:00Z",
        }
        kind = draw(st.sampled_from(["as sent", "as sent", "mutated", "not JSON"]))
        body = draw(
            {
                "as sent": st.just(request),
                "mutated": mutated(request),
                "not JSON": st.text(TEXT, max_size=40) | ODD_STRINGS | OVERSIZE,
            }[kind]
        )
        if not isinstance(body, str):
            body = json.dumps(body)
        attributes = dict(SQS_RECORD["attributes"])
        if draw(st.integers(0, 9)) == 0:  # the envelope's attributes mangled too
            attributes = draw(mutated(attributes).filter(lambda a: isinstance(a, dict)))
        attributes["MessageGroupId"] = draw(st.sampled_from([group, "other", None]))
        records.append(
            SQS_RECORD | {"messageId": f"m-{index}", "body": body, "attributes": attributes}
        )
    return records


@pytest.fixture
def evaluating(deployment: Deployment) -> Deployment:
    make_asg("gpu", tags=GPU, max_size=600)
    make_asg("web", tags=WEB, desired=2, min_size=2, max_size=40)
    make_asg("untagged", desired=1)
    make_asg("bad-policy", tags=OPTED_IN | {"nodescaler/policy": "no-such-policy"}, desired=1)
    client("sqs").create_queue(QueueName=TRAINING_QUEUE)
    fill_queue(TRAINING_QUEUE, 40)
    return deployment


def message_group(record: dict[str, Any]) -> Any:
    attributes = record.get("attributes")
    return attributes.get("MessageGroupId") if isinstance(attributes, dict) else None


@settings(SHARED, max_examples=40)
@given(records=batches())
@example(records=[SQS_RECORD | {"attributes": {"MessageGroupId": "gpu"}}])  # no receive count
def test_evaluate_processes_or_reports_every_record_of_a_batch(
    evaluating: Deployment, records: list[dict[str, Any]]
) -> None:
    ids = [r["messageId"] for r in records]
    with printed() as output:
        try:
            response = evaluate.handler(
                {"Records": records}, LocalContext(), evaluator=evaluating.evaluator
            )
        except BatchProcessingError:  # all of them failed: Lambda retries the whole batch
            failed = set(ids)
        else:
            json.dumps(response)
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed <= set(ids)
    printed_ = output()
    errors = printed_.messages("ERROR")
    malformed = 0
    for record in records:
        # Requests are commutative: a failure holds back nothing after it, even in its group.
        mid = record["messageId"]
        try:
            group = EvaluationRecord.model_validate(record).body.node_group
        except ValidationError:
            malformed += 1
            assert mid in failed, record  # never taken as done
            (error,) = [e for e in errors if e.startswith(f"malformed evaluation message {mid}: ")]
            assert_names_the_fields(error.split(": ", 1)[1])
            continue
        if mid in failed:
            assert any(e.startswith(f"node group {group}: evaluation failed") for e in errors)
    assert printed_.metric("MalformedEvents") == [1] * malformed
    # each record processed reported its result
    assert len([line for line in printed_.logs if "outcome" in line]) == len(ids) - len(failed)


# --- tags on the Auto Scaling groups ---------------------------------------------------------

ENABLED, POLICY, DRY_RUN = "nodescaler/enabled", "nodescaler/policy", "nodescaler/dry-run"
DISCOVERED = ("true", "True", "TRUE")  # what the tick's tag filter lets through
TAG_VALUES = st.one_of(
    st.sampled_from(["false", "yes", "1", " true ", "tRue", "GPU Training", "no-such-policy"]),
    ODD_STRINGS,
    st.text(TEXT, max_size=256),
    st.just("x" * 256),  # the longest value Auto Scaling takes
)


@st.composite
def tag_sets(draw: st.DrawFn) -> dict[str, str]:
    """A group's tags: mostly opted in with a usable policy, each tag now and then odd or
    missing."""
    tags = {
        ENABLED: draw(mostly(st.sampled_from(DISCOVERED), TAG_VALUES)),
        POLICY: draw(
            mostly(st.sampled_from(["gpu-training", "gpu-training ", "no-such"]), TAG_VALUES)
        ),
        DRY_RUN: draw(mostly(st.sampled_from(["false", "true", "False"]), TAG_VALUES)),
        # no cluster is configured: a group naming one (any value) is that cluster's
        "nodescaler/cluster": draw(TAG_VALUES),
        "nodescaler/min-size": draw(TAG_VALUES),  # no such nodescaler tag: ignored
    }
    return {key: value for key, value in tags.items() if draw(st.integers(0, 5))}


@pytest.fixture
def tagging(deployment: Deployment) -> Iterator[tuple[Deployment, Iterator[int]]]:
    client("sqs").create_queue(QueueName=TRAINING_QUEUE)
    fill_queue(TRAINING_QUEUE, 4)  # one node's worth
    yield deployment, itertools.count()


def bad_tags(tags: dict[str, str], deployed: set[str]) -> set[str]:
    """The opt-in tags nodescaler can't use, for a group the tick finds."""
    bad = set()
    if (tags.get(POLICY) or "").strip() not in deployed:
        bad.add(POLICY)
    if tags.get(DRY_RUN, "false").strip().lower() not in ("true", "false"):
        bad.add(DRY_RUN)
    return bad


@settings(SHARED, max_examples=20)
@given(tag_sets=st.lists(tag_sets(), min_size=1, max_size=4))
def test_groups_with_unusable_tags_are_named_and_left_alone_while_the_others_scale(
    tagging: tuple[Deployment, Iterator[int]], tag_sets: list[dict[str, str]]
) -> None:
    deployment, examples = tagging
    example_ = next(examples)
    healthy = f"healthy-{example_}"
    names = [f"tagged-{example_}-{index}" for index in range(len(tag_sets))]
    make_asg(healthy, tags=GPU)
    for name, tags in zip(names, tag_sets, strict=True):
        make_asg(name, tags=tags)
    try:
        with printed() as output:
            deliveries = deployment.tick()
        sizes = {name: desired_capacity(name) for name in (healthy, *names)}
    finally:
        for name in (healthy, *names):
            client("autoscaling").delete_auto_scaling_group(
                AutoScalingGroupName=name, ForceDelete=True
            )
    assert all(not d.failed for d in deliveries)
    assert deployment.dead_letters() == []
    assert sizes[healthy] == 1
    warnings = output().messages("WARNING")
    deployed = set(deployment.evaluator.policies.policies)
    for name, tags in zip(names, tag_sets, strict=True):
        about = [w for w in warnings if f"node group {name}: " in w]
        # not opted in, or another cluster's: not ours to judge
        if tags.get(ENABLED) not in DISCOVERED or "nodescaler/cluster" in tags:
            assert (sizes[name], about) == (0, []), tags
            continue
        bad = bad_tags(tags, deployed)
        for key in bad:
            assert any(f"node group {name}: tag {key}" in w for w in about), (key, about)
        rejected = output().metric("NodeGroupRejected", name)
        assert rejected == ([1] if POLICY in bad else []), tags
        scaled = not bad and tags.get(DRY_RUN, "false").strip().lower() == "false"
        if (tags.get(POLICY) or "").strip() == "gpu-training":
            assert sizes[name] == (1 if scaled else 0), tags
        elif not scaled:
            assert sizes[name] == 0, tags


# --- metric values ---------------------------------------------------------------------------

FUZZED_QUEUE = "fuzzed-queue"
AMOUNTS = st.floats(min_value=5e-324, max_value=1e308)  # any target a policy may set
TOTALS = st.one_of(
    st.builds(lambda v: {"type": "Value", "value": v}, AMOUNTS),
    st.builds(lambda v: {"type": "AverageValue", "averageValue": v}, AMOUNTS),
)
TARGETS = TOTALS | st.builds(
    lambda v: {"type": "Utilization", "averageUtilization": v}, st.floats(5e-324, 100)
)
READINGS = mostly(st.floats(0, 1000), st.floats() | ODD_NUMBERS | st.none())
# CloudWatch's answer: datapoints (seconds old, value), no series at all, or an error
DATAPOINTS = mostly(
    st.lists(
        st.tuples(st.integers(-60, 290), READINGS), min_size=1, max_size=3, unique_by=lambda p: p[0]
    ),
    st.lists(st.tuples(st.integers(-60, 900), READINGS), max_size=3, unique_by=lambda p: p[0])
    | st.sampled_from(["no series", "mismatched", "error"]),
)
# SQS's answer: visible and in-flight counts, as the strings it sends, or an error
COUNTS = mostly(st.integers(0, 500).map(str), st.sampled_from(["-3", "NaN", "1e400", "", "4.5"]))
QUEUE_ANSWERS = mostly(st.tuples(COUNTS, COUNTS), st.just("error"))


class MetricAnswers:
    """CloudWatch's GetMetricData and SQS's GetQueueAttributes (of FUZZED_QUEUE) answered, on
    the functions' own clients, with whatever the test sets: also what AWS should never send."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.datapoints: Any = []
        self.queue: Any = "error"

    def watch(self, clients: Any) -> None:
        clients.cloudwatch.meta.events.register(
            "before-call.cloudwatch.GetMetricData", self._metric_data
        )
        clients.sqs.meta.events.register("before-call.sqs.GetQueueAttributes", self._queue)

    @staticmethod
    def _answer(parsed: dict[str, Any], status: int = 200) -> tuple[Any, dict[str, Any]]:
        parsed["ResponseMetadata"] = {"HTTPStatusCode": status, "HTTPHeaders": {}}
        return AWSResponse("https://aws.invalid/", status, {}, None), parsed

    def _error(self) -> tuple[Any, dict[str, Any]]:
        # not one botocore retries: its backoff would sleep for real
        return self._answer({"Error": {"Code": "AccessDenied", "Message": "not allowed"}}, 400)

    def _metric_data(self, **_: Any) -> tuple[Any, dict[str, Any]]:
        if self.datapoints == "error":
            return self._error()
        if self.datapoints == "no series":
            return self._answer({"MetricDataResults": []})
        now = self.clock.now()
        points = [] if self.datapoints == "mismatched" else self.datapoints
        series = {
            "Id": "value",
            "Timestamps": [now - timedelta(seconds=age) for age, _ in points],
            "Values": [value for _, value in points] + [1.0] * (self.datapoints == "mismatched"),
        }
        return self._answer({"MetricDataResults": [series]})

    def _queue(self, params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
        if FUZZED_QUEUE not in str(params.get("body")):
            return None  # another queue: moto answers
        if self.queue == "error":
            return self._error()
        visible, in_flight = self.queue
        attributes = {
            "ApproximateNumberOfMessages": visible,
            "ApproximateNumberOfMessagesNotVisible": in_flight,
        }
        return self._answer({"Attributes": attributes})

    def unusable(self) -> bool:
        """Whether a metric can't be read now: no datapoint, a stale or non-finite or negative
        latest one, an error, counts that aren't counts."""
        cloudwatch = self.datapoints
        if isinstance(cloudwatch, str) or not cloudwatch:
            return True
        age, value = min(cloudwatch, key=lambda p: p[0])
        return age > 300 or value is None or not math.isfinite(value) or value < 0

    def queue_unusable(self) -> bool:
        if self.queue == "error":
            return True
        try:
            return sum(int(count) for count in self.queue) < 0
        except ValueError:
            return True


@st.composite
def scaling_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A group (its own MinSize, MaxSize and size), the policy it names, and up to three
    ticks' answers from CloudWatch and SQS."""
    low = draw(st.integers(0, 4))
    high = draw(st.integers(max(low, 1), 12))  # moto launches every instance: kept small
    policy_low = draw(st.integers(0, 6))
    metrics: list[dict[str, Any]] = [
        {
            "type": "CloudWatch",
            "name": "load",
            "cloudWatch": {"metric": {"namespace": "App", "metricName": "load"}},
            "target": draw(TARGETS),
        }
    ]
    reads_queue = draw(st.booleans())
    if reads_queue:
        metrics.append(
            {
                "type": "SQSQueue",
                "name": "backlog",
                "sqsQueue": {"queue": FUZZED_QUEUE},
                "target": draw(TOTALS),
            }
        )
    return {
        "min": low,
        "max": high,
        "desired": draw(st.integers(low, high)),
        "spec": {
            "minReplicas": policy_low,
            "maxReplicas": draw(st.integers(max(policy_low, 1), 20)),
            "metrics": metrics,
            # scale-in at once, so a bad reading would show at once
            "behavior": {
                "scaleDown": {
                    "stabilizationWindowSeconds": 0,
                    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 60}],
                }
            },
        },
        "ticks": draw(
            st.lists(
                st.tuples(DATAPOINTS, QUEUE_ANSWERS if reads_queue else st.just(None)),
                min_size=1,
                max_size=3,
            )
        ),
    }


@pytest.fixture
def measuring(
    deployment: Deployment, policies: Path
) -> Iterator[tuple[Deployment, Path, MetricAnswers, Iterator[int]]]:
    client("sqs").create_queue(QueueName=FUZZED_QUEUE)
    answers = MetricAnswers(deployment.clock)
    answers.watch(deployment.clients)
    yield deployment, policies, answers, itertools.count()


@settings(SHARED, max_examples=30)
@given(case=scaling_cases())
def test_no_metric_value_takes_a_group_outside_its_bounds_or_an_unreadable_one_scales_it_in(
    measuring: tuple[Deployment, Path, MetricAnswers, Iterator[int]], case: dict[str, Any]
) -> None:
    deployment, folder, answers, examples = measuring
    group = f"measured-{next(examples)}"
    policy = {"metadata": {"name": group}, "spec": case["spec"]}
    (folder / f"{group}.yaml").write_text(yaml.safe_dump(policy))
    deployment.deploy()
    make_asg(
        group,
        tags=OPTED_IN | {"nodescaler/policy": group},
        min_size=case["min"],
        max_size=case["max"],
        desired=case["desired"],
    )
    # the policy's bounds inside the group's own
    lowest, highest = (
        min(max(case["spec"][bound], case["min"]), case["max"])
        for bound in ("minReplicas", "maxReplicas")
    )
    try:
        for datapoints, queue in case["ticks"]:
            answers.datapoints, answers.queue = datapoints, queue
            current = desired_capacity(group)
            with printed():
                deliveries = deployment.tick()
            desired = desired_capacity(group)
            assert all(not d.failed for d in deliveries)
            assert case["min"] <= desired <= case["max"]
            assert lowest <= desired <= highest
            unreadable = answers.unusable() or (queue is not None and answers.queue_unusable())
            if unreadable and lowest <= current <= highest:
                assert desired >= current, (current, desired)
            deployment.clock.advance(minutes=1)
    finally:
        client("autoscaling").delete_auto_scaling_group(
            AutoScalingGroupName=group, ForceDelete=True
        )
        (folder / f"{group}.yaml").unlink()


# --- policy documents ------------------------------------------------------------------------

SHIPPED = {
    path.name: yaml.safe_load(path.read_text()) for path in (ROOT / "policies").glob("*.yaml")
}


def in_time_zone(zone: str) -> dict[str, Any]:
    """The business-hours policy, its schedule in `zone`."""
    document = copy.deepcopy(SHIPPED["business-hours.yaml"])
    document["spec"]["metrics"][0]["schedule"]["timeZone"] = zone
    return document


POLICY_FIELDS = st.sampled_from(
    ["metadata", "spec", "minReplicas", "maxReplicas", "metrics", "target", "timeZone", "type"]
)


@settings(max_examples=200, deadline=None)
@given(
    document=st.sampled_from(sorted(SHIPPED)).flatmap(
        lambda name: mutated(SHIPPED[name], most=4, keys=POLICY_FIELDS | st.text(TEXT))
    )
)
@example(document=in_time_zone("Europe"))  # a folder of zones, not a zone
@example(document=in_time_zone("Europe/" + "x" * 300))  # longer than a file name may be
def test_a_policy_document_loads_or_each_problem_names_the_file_and_field(document: Any) -> None:
    source = "policies/fuzzed.yaml"
    try:
        parse_policy(yaml.safe_dump(document), source)
    except PolicyError as error:
        assert error.problems
        for problem in error.problems:
            where, _, what = problem.removeprefix(f"{source}: ").partition(": ")
            assert problem.startswith(f"{source}: ") and where and what, problem

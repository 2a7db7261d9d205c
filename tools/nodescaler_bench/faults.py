"""AWS on a bad day: the sandbox's pipeline through the fault proxy, then the faults stop.

Each tick is what EventBridge and Lambda would do: the real dispatch handler with the
sample tick event (retried twice if it fails, as the schedule's retry policy does), then
Lambda's SQS event source (`SqsEventSource`) hands the evaluations to the real evaluate
handler until the FIFO queue is empty or dead-lettered. A few groups follow a seeded
random workload (tasks in their own SQS queue, four per node, the group's bounds [1, 10]
tighter than what the workload asks for at times). `rate` of the functions' own AWS calls
go through `nodescaler_sandbox.faults` faulted: throttled, 5xx, reset or late. The
event source and the world (the workload, the checks) reach moto directly.

Then the faults stop, the workload holds still, and the run reports what a user would
notice: writes that reached AWS twice for one decision, resizes without the decision that
made them on record, messages lost, crash loops, sizes outside [min, max], and how many
ticks the groups take to reach the size the workload asks for.

Retry time is compressed: botocore's backoff sleeps and its adaptive rate limiter's clock
run `SPEEDUP` times faster, so 100 faulty ticks take seconds instead of many minutes;
which calls are retried, how often, and in what order is botocore's own.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
import types
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any, TextIO

import boto3
from nodescaler_sandbox.faults import Call, FaultProxy, Forwarded
from nodescaler_sandbox.lambda_local import LocalContext, SqsEventSource
from nodescaler_sandbox.moto_gaps import AwsRefusal
from nodescaler_sandbox.provision import (
    create_evaluation_queue,
    create_group,
    create_state_table,
    launch_configuration,
    set_queue_depth,
)
from nodescaler_sandbox.sandbox import ROOT, load_handler
from nodescaler_sandbox.virtual_clock import START, VirtualClock

from nodescaler_bench.aws import REGION, fake_credentials, functions_output, moto_server

SPEEDUP = 1000  # retry time: botocore backs off and rate-limits in milliseconds, not seconds
# A faulted call's retry is faulted again with this chance: about 1 call in 40 outlasts
# botocore's six attempts, so nodescaler's own retries and dead-lettering are exercised.
PERSISTENCE = 0.6
MIN_SIZE, MAX_SIZE = 1, 10
PER_NODE = 4  # tasks a node takes
MAX_RECEIVE_COUNT = 3
SCHEDULE_ATTEMPTS = 3  # EventBridge Scheduler: the invocation and two retries
TABLE = "nodescaler-state"
POLICY = """\
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata:
  name: {group}
spec:
  minReplicas: 0
  maxReplicas: 50
  metrics:
    - type: SQSQueue
      sqsQueue: {{queue: tasks-{group}}}
      target: {{type: AverageValue, averageValue: {per_node}}}
  behavior:  # follow the workload at once, so convergence is plain to see
    scaleUp:
      stabilizationWindowSeconds: 0
      tolerance: 0
      policies: [{{type: Replicas, value: 100, periodSeconds: 60}}]
    scaleDown:
      stabilizationWindowSeconds: 0
      tolerance: 0
      policies: [{{type: Percent, value: 100, periodSeconds: 60}}]
"""


@dataclass
class Retries:
    """What botocore's retry machinery did: backoff slept (uncompressed seconds), and the
    retries it refused because a client's retry quota had run dry, by operation."""

    backoff_seconds: float = 0.0
    refused: Counter[str] = field(default_factory=Counter)


@contextlib.contextmanager
def botocore_retries(speedup: float = SPEEDUP) -> Iterator[Retries]:
    """botocore's retry backoff and adaptive rate limiter run `speedup` times faster, and
    its retry quota's refusals are counted; which calls it retries, and when, is its own."""
    import botocore.endpoint
    from botocore.retries import bucket, standard

    retries = Retries()

    class FastClock(bucket.Clock):  # type: ignore[misc]
        def __init__(self) -> None:
            self._start = time.time()

        def sleep(self, amount: float) -> None:
            time.sleep(amount / speedup)

        def current_time(self) -> float:
            return self._start + (time.time() - self._start) * speedup

    class FastTokenBucket(bucket.TokenBucket):  # type: ignore[misc]
        def _sleep_amount(self, amount: float) -> float:
            return float(super()._sleep_amount(amount)) / speedup  # waited on a real Condition

    def sleep(seconds: float) -> None:
        retries.backoff_seconds += seconds
        time.sleep(seconds / speedup)

    acquire = standard.RetryQuotaChecker.acquire_retry_quota

    def acquire_retry_quota(checker: Any, context: Any) -> bool:
        granted = bool(acquire(checker, context))
        if not granted:
            retries.refused[context.operation_model.name] += 1
        return granted

    saved = (
        botocore.endpoint.time,
        bucket.Clock,
        bucket.TokenBucket,
        standard.RetryQuotaChecker.acquire_retry_quota,
    )
    botocore.endpoint.time = types.SimpleNamespace(sleep=sleep)
    bucket.Clock, bucket.TokenBucket = FastClock, FastTokenBucket
    standard.RetryQuotaChecker.acquire_retry_quota = acquire_retry_quota
    try:
        yield retries
    finally:
        (
            botocore.endpoint.time,
            bucket.Clock,
            bucket.TokenBucket,
            standard.RetryQuotaChecker.acquire_retry_quota,
        ) = saved


def functions_only(call: Call) -> bool:
    """Only the functions' calls are faulted (their botocore Config marks them)."""
    return "nodescaler" in call.user_agent


class Workload:
    """Tasks waiting per group: a seeded random walk while faults last, then held still."""

    def __init__(self, sqs: Any, groups: list[str], seed: int) -> None:
        self._sqs = sqs
        self._rng = random.Random(seed)
        self._urls = {g: sqs.create_queue(QueueName=f"tasks-{g}")["QueueUrl"] for g in groups}
        self.depth = dict.fromkeys(groups, 0)

    def step(self) -> None:
        for group in self.depth:
            if self._rng.random() < 0.5:  # MAX_SIZE + 4: past the group's max at times
                self._set(group, PER_NODE * self._rng.randint(0, MAX_SIZE + 4))

    def _set(self, group: str, depth: int) -> None:
        set_queue_depth(self._sqs, self._urls[group], self.depth[group], depth)
        self.depth[group] = depth

    def wanted(self, group: str) -> int:
        """The size the policy asks for, inside the group's bounds."""
        return min(MAX_SIZE, max(MIN_SIZE, math.ceil(self.depth[group] / PER_NODE)))


@dataclass
class Ledger:
    """What the event source delivered: per (group, event), deliveries and successes."""

    receives: Counter[tuple[str, str]] = field(default_factory=Counter)
    processed: Counter[tuple[str, str]] = field(default_factory=Counter)

    def wrap(self, handler: Any) -> Any:
        def delivered(event: dict[str, Any], context: Any) -> Any:
            keys = {}
            for record in event["Records"]:
                body = json.loads(record["body"])
                keys[record["messageId"]] = (body["node_group"], body["event_id"])
                self.receives[keys[record["messageId"]]] += 1
            response = handler(event, context)  # an exception fails the whole batch
            failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
            for message_id, key in keys.items():
                if message_id not in failed:
                    self.processed[key] += 1
            return response

        return delivered


class CountingRefusal(AwsRefusal):
    """The sandbox's stand-in for AWS refusing a size outside [min, max], counted."""

    refused = 0

    def __call__(self, params: dict[str, Any], **kwargs: Any) -> Any:
        answer = super().__call__(params, **kwargs)
        self.refused += answer is not None
        return answer


@dataclass
class Report:
    """What a user would notice after the bad day; `figures()` is what `make bench` keeps."""

    ticks: int
    groups: int
    injected: dict[str, int]
    retries: Retries
    undispatched_ticks: int  # all three tries failed: the event waits in dispatch's DLQ
    evaluations: int  # (group, tick) evaluated to the end
    dead_lettered: int
    lost: int  # queued, but neither evaluated nor dead-lettered
    max_receives: int
    left_in_queue: int
    double_actuations: int  # SetDesiredCapacity reaching AWS more than once per decision
    unrecorded_actuations: list[str]  # resized, but no audited decision says it acted
    refused_resizes: int  # SetDesiredCapacity outside [min, max], refused by "AWS"
    out_of_bounds: int  # a group seen outside [min, max] after a tick
    converged_ticks: int | None  # ticks after the faults stop until every size is right
    seconds: float = 0.0

    def figures(self) -> dict[str, float | int | None]:
        return {
            "faults_ticks": self.ticks,
            "faults_injected": sum(self.injected.values()),
            **{f"faults_injected_{kind}": count for kind, count in sorted(self.injected.items())},
            "faults_retries_refused_no_quota": sum(self.retries.refused.values()),
            "faults_undispatched_ticks": self.undispatched_ticks,
            "faults_dead_lettered": self.dead_lettered,
            "faults_lost": self.lost,
            "faults_max_receives": self.max_receives,
            "faults_double_actuations": self.double_actuations,
            "faults_unrecorded_actuations": len(self.unrecorded_actuations),
            "faults_out_of_bounds": self.out_of_bounds + self.refused_resizes,
            "faults_converged_ticks": self.converged_ticks,
            "faults_s": round(self.seconds, 1),
        }


def run(
    ticks: int = 100,
    *,
    groups: int = 3,
    rate: float = 0.3,
    persistence: float = PERSISTENCE,
    seed: int = 7,
    settle: int = 3,
    folder: Path = Path("out/bench/faults"),
    log: TextIO | None = None,
) -> Report:
    """`ticks` ticks with `rate` of the functions' calls faulted, then `settle` without.
    The functions' log lines and EMF records go to `log`, else to `folder`/logs.jsonl."""
    started = time.perf_counter()
    names = [f"ng-{index}" for index in range(groups)]
    policies = folder / "policies"
    policies.mkdir(parents=True, exist_ok=True)
    for group in names:
        (policies / f"{group}.yaml").write_text(POLICY.format(group=group, per_node=PER_NODE))
    with contextlib.ExitStack() as stack:
        stack.enter_context(fake_credentials())
        retries = stack.enter_context(botocore_retries())
        moto = stack.enter_context(moto_server())
        proxy = stack.enter_context(
            FaultProxy(moto, persistence=persistence, seed=seed, faulted=functions_only)
        )
        if log is None:
            log = stack.enter_context((folder / "logs.jsonl").open("w"))
        stack.enter_context(functions_output(log))

        def world(service: str) -> Any:  # the world's own calls: straight to moto, never faulted
            return boto3.client(service, region_name=REGION, endpoint_url=moto)

        pipeline = Pipeline(world, proxy.url, policies, names)
        workload = Workload(world("sqs"), names, seed)
        for tick in range(ticks + settle):
            proxy.rate = rate if tick < ticks else 0.0
            if tick < ticks:
                workload.step()
            before = len(proxy.forwarded)
            pipeline.tick(tick)
            pipeline.record(proxy.forwarded[before:])
        report = pipeline.report(ticks, settle, workload)
        report.injected = {str(kind): count for kind, count in proxy.injected.items()}
        report.retries = retries
    report.seconds = time.perf_counter() - started
    return report


class Pipeline:
    """The deployed functions in miniature: their clients through the proxy, wired as in
    Lambda; the event source and the checks through `world`, straight to moto."""

    def __init__(self, world: Any, endpoint: str, policies: Path, groups: list[str]) -> None:
        from nodescaler import wiring
        from nodescaler.config import DispatchSettings, EvaluateSettings

        self.groups = groups
        self.world = world
        self.clock = VirtualClock(START)
        create_state_table(world("dynamodb"), TABLE)
        self.queue_url = create_evaluation_queue(
            world("sqs"), "evaluations", max_receive_count=MAX_RECEIVE_COUNT
        )
        autoscaling = world("autoscaling")
        launch_configuration(autoscaling, "nodes", "m5.large")
        for group in groups:
            create_group(
                autoscaling,
                group,
                region=REGION,
                tags={"nodescaler/enabled": "true", "nodescaler/policy": group},
                min_size=MIN_SIZE,
                max_size=MAX_SIZE,
            )
        environment = {
            "STATE_TABLE_NAME": TABLE,
            "EVALUATION_QUEUE_URL": self.queue_url,
            "DEAD_LETTER_QUEUE_URL": self.queue_url.replace(".fifo", "-dlq.fifo"),
            "POLICIES_PATH": str(policies),
        }
        # Each function its own clients, as each Lambda function has (and its own retry quota).
        session = boto3.Session(region_name=REGION)
        self.dispatcher = wiring.dispatcher(
            DispatchSettings.from_environment(environment),
            wiring.AwsClients(session, endpoint_url=endpoint),
            self.clock,
        )
        clients = wiring.AwsClients(session, endpoint_url=endpoint)
        self.refusal = CountingRefusal(world("autoscaling"))
        clients.autoscaling.meta.events.register(
            "before-call.auto-scaling.SetDesiredCapacity", self.refusal
        )
        evaluate_settings = EvaluateSettings.from_environment(environment)
        self.evaluator = wiring.evaluator(evaluate_settings, clients, self.clock)
        redelivery = wiring.redelivery(evaluate_settings, clients)
        self._dispatch = load_handler("dispatch").handler
        evaluate = load_handler("evaluate").handler
        self.ledger = Ledger()
        self.source = SqsEventSource(
            world("sqs"),
            self.queue_url,
            self.ledger.wrap(partial(evaluate, evaluator=self.evaluator, redelivery=redelivery)),
            clock=self.clock,
        )
        self.source.watch(clients.sqs)  # the function asks for its retries' delays
        self.sample = json.loads((ROOT / "events" / "schedule-tick.json").read_text())
        self.dispatched: list[str] = []  # event ids of the ticks that queued their groups
        self.undispatched = 0
        self.writes: list[Counter[tuple[str, int]]] = []  # per tick: (group, size) resizes
        self.desired: list[dict[str, int]] = []  # per tick: each group's size after it

    def tick(self, index: int) -> None:
        self.clock.at = START + timedelta(minutes=index)
        event = self.sample | {
            "id": event_id(index),
            "time": self.clock.at.isoformat().replace("+00:00", "Z"),
        }
        for _ in range(SCHEDULE_ATTEMPTS):
            try:
                self._dispatch(event, LocalContext("nodescaler-dispatch"), self.dispatcher)
            except Exception:  # retried as the schedule's retry policy retries it
                continue
            self.dispatched.append(event["id"])
            break
        else:
            self.undispatched += 1
        self.source.drain()

    def sizes(self) -> dict[str, int]:
        described = self.world("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=self.groups
        )["AutoScalingGroups"]
        return {g["AutoScalingGroupName"]: int(g["DesiredCapacity"]) for g in described}

    def dead_letters(self) -> set[tuple[str, str]]:
        sqs = self.world("sqs")
        url = self.queue_url.replace(".fifo", "-dlq.fifo")
        found: set[tuple[str, str]] = set()
        # Read and delete: a FIFO queue holds back a group's next message until this one goes.
        while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get(
            "Messages", []
        ):
            for message in messages:
                body = json.loads(message["Body"])
                found.add((body["node_group"], body["event_id"]))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        return found

    def left_in_queue(self) -> int:
        attributes = self.world("sqs").get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(v) for v in attributes.values())

    def acting_decisions(self) -> set[tuple[str, str]]:
        """(group, event) of every audited decision that changed the group's size."""
        from nodescaler.adapters.aws.state_table import DynamoStateStore

        store = DynamoStateStore(self.world("dynamodb"), TABLE, audit_ttl=timedelta(days=1))
        acting = set()
        for group in self.groups:
            items = store.decisions(group, limit=10_000)
            acting |= {(group, d.at) for d in items if d.desired != d.current}
        return {(g, event_id_at(at)) for g, at in acting}

    def record(self, forwarded: list[Forwarded]) -> None:
        """After a tick: the resizes that reached AWS in it, and every group's size."""
        self.writes.append(
            Counter(
                (
                    str(c.params.get("AutoScalingGroupName")),
                    int(c.params.get("DesiredCapacity", -1)),
                )
                for c in forwarded
                if c.operation == "SetDesiredCapacity" and c.status < 300
            )
        )
        self.desired.append(self.sizes())

    def report(self, ticks: int, settle: int, workload: Workload) -> Report:
        dead = self.dead_letters()
        expected = {(g, e) for e in self.dispatched for g in self.groups}
        done = {key for key, count in self.ledger.processed.items() if count}
        acting = self.acting_decisions()
        unrecorded = [
            f"{group} {event_id(tick)} → {desired}"
            for tick, writes in enumerate(self.writes)
            for group, desired in writes
            if (group, event_id(tick)) not in acting
        ]
        converged = next(
            (
                after
                for after in range(1, settle + 1)
                if all(
                    self.desired[ticks + later - 1][g] == workload.wanted(g)
                    for later in range(after, settle + 1)
                    for g in self.groups
                )
            ),
            None,
        )
        return Report(
            ticks=ticks,
            groups=len(self.groups),
            injected={},
            retries=Retries(),
            undispatched_ticks=self.undispatched,
            evaluations=len(done),
            dead_lettered=len(dead),
            lost=len(expected - done - dead),
            max_receives=max(self.ledger.receives.values(), default=0),
            left_in_queue=self.left_in_queue(),
            double_actuations=sum(
                count - 1
                for writes in self.writes
                for count in Counter(group for group, _ in writes.elements()).values()
                if count > 1
            ),
            unrecorded_actuations=unrecorded,
            refused_resizes=self.refusal.refused,
            out_of_bounds=sum(
                not MIN_SIZE <= size <= MAX_SIZE
                for sizes in self.desired
                for size in sizes.values()
            ),
            converged_ticks=converged,
        )


def event_id(tick: int) -> str:
    """The tick's identity as dispatch keys its evaluations: its scheduled time
    (`events.dispatch.ScheduledEvent.identity`), which the tick's id also carries here."""
    at = START + timedelta(minutes=tick)
    return "tick-" + at.isoformat().replace("+00:00", "Z")


def event_id_at(at: Any) -> str:
    """The tick whose virtual time a decision carries (one tick a minute from START)."""
    return event_id(int((at - START).total_seconds() // 60))

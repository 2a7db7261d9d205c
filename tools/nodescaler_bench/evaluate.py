"""One warm evaluation of one node group, through the real evaluate handler, many times.

Each repetition hands the handler an SQS batch of one record, as Lambda's event source
delivers it, for the `gpu-training` group of the shipped policies (its SQS queue metric).
The queue's depth changes every other repetition, so half the evaluations act (claim,
SetDesiredCapacity, record) and half record an unchanged decision: the two paths a tick
takes. AWS is moto's server in its own process (see `bench.aws`); the time spent on the
wire is subtracted to give nodescaler's own share. Log lines and EMF records are written
as in Lambda, to a sink instead of the terminal.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time
import uuid
from datetime import timedelta
from typing import Any

import boto3
from nodescaler_sandbox.lambda_local import LocalContext
from nodescaler_sandbox.provision import (
    create_evaluation_queue,
    create_group,
    create_state_table,
    launch_configuration,
    set_queue_depth,
)
from nodescaler_sandbox.sandbox import ROOT, load_handler
from nodescaler_sandbox.virtual_clock import START, VirtualClock

from nodescaler_bench import reference
from nodescaler_bench.aws import (
    REGION,
    AwsStopwatch,
    fake_credentials,
    functions_output,
    moto_server,
    percentile,
)

GROUP = "gpu-training"
TASKS = "ml-training-queue"
DEPTHS = (40, 48)  # tasks, 4 a node: 10 and 12 nodes (moto launches only the difference)
TABLE = "nodescaler-state"
WARM_UP = 20
REPETITIONS = 500  # moto's server takes ~50 ms a repetition: under a minute


def _setup(endpoint: str) -> dict[str, str]:
    """The stack's table and queue, one managed group and its task queue; the environment."""

    def client(service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=endpoint)

    create_state_table(client("dynamodb"), TABLE)
    queue_url = create_evaluation_queue(client("sqs"), "evaluations")
    client("sqs").create_queue(QueueName=TASKS)
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "nodes", "g5.xlarge")
    create_group(
        autoscaling,
        GROUP,
        region=REGION,
        tags={"nodescaler/enabled": "true", "nodescaler/policy": GROUP},
        max_size=600,
    )
    return {
        "STATE_TABLE_NAME": TABLE,
        "EVALUATION_QUEUE_URL": queue_url,
        "POLICIES_PATH": str(ROOT / "policies"),
    }


class TaskQueue:
    """The workload: sets the task queue's depth between evaluations (never timed)."""

    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs
        self._url = sqs.get_queue_url(QueueName=TASKS)["QueueUrl"]
        self.depth = 0

    def fill(self, depth: int) -> None:
        set_queue_depth(self._sqs, self._url, self.depth, depth)
        self.depth = depth


def sqs_event(group: str, event_id: str, at: str) -> dict[str, Any]:
    """An SQS batch of one evaluation request, shaped as Lambda's event source sends it."""
    body = json.dumps(
        {"node_group": group, "event_id": event_id, "cause": "tick", "requested_at": at}
    )
    now_ms = str(int(time.time() * 1000))
    record = {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": uuid.uuid4().hex,
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": now_ms,
            "SequenceNumber": "18880734530461104128",
            "MessageGroupId": group,
            "SenderId": "AROAEXAMPLEROLEID:nodescaler-dispatch",
            "MessageDeduplicationId": hashlib.sha256(f"{group}\n{event_id}".encode()).hexdigest(),
            "ApproximateFirstReceiveTimestamp": now_ms,
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:evaluations.fifo",
        "awsRegion": REGION,
    }
    return {"Records": [record]}


def run(repetitions: int = REPETITIONS) -> dict[str, float]:
    from nodescaler import wiring
    from nodescaler.config import EvaluateSettings

    with fake_credentials(), moto_server() as endpoint:
        environment = _setup(endpoint)
        clients = wiring.AwsClients(boto3.Session(region_name=REGION), endpoint_url=endpoint)
        stopwatch = AwsStopwatch()
        stopwatch.watch(
            clients.autoscaling,
            clients.sqs,
            clients.dynamodb,
            clients.cloudwatch,
            clients.ec2,
            clients.eks,
            clients.sts,
        )
        clock = VirtualClock(START)
        evaluate = load_handler("evaluate")
        evaluator = wiring.evaluator(EvaluateSettings.from_environment(environment), clients, clock)
        tasks = TaskQueue(boto3.client("sqs", region_name=REGION, endpoint_url=endpoint))
        totals: list[float] = []
        own: list[float] = []
        beside: list[float] = []  # the reference workload, once after each evaluation
        calls: list[int] = []
        acted = 0
        with functions_output():
            for index in range(WARM_UP + repetitions):
                tasks.fill(DEPTHS[index // 2 % 2])
                # past the scale-down stabilization window: a shallower queue acts at once
                clock.at += timedelta(minutes=11)
                event = sqs_event(GROUP, f"bench-{index}", clock.at.isoformat())
                stopwatch.reset()
                started = time.perf_counter()
                response = evaluate.handler(event, LocalContext("nodescaler-evaluate"), evaluator)
                elapsed = time.perf_counter() - started
                if response != {"batchItemFailures": []}:
                    raise AssertionError(f"evaluation {index} failed: {response}")
                if index < WARM_UP:
                    continue
                totals.append(elapsed)
                beside.append(reference.timed())
                own.append(elapsed - stopwatch.seconds)
                calls.append(sum(stopwatch.calls.values()))
                acted += stopwatch.calls["SetDesiredCapacity"]
    return {
        "evaluate_ms_p50": round(statistics.median(totals) * 1000, 2),
        "evaluate_ms_p99": round(percentile(totals, 0.99) * 1000, 2),
        "evaluate_own_ms_p50": round(statistics.median(own) * 1000, 2),
        "evaluate_own_ms_p99": round(percentile(own, 0.99) * 1000, 2),
        "evaluate_reference_ms_p99": round(percentile(beside, 0.99) * 1000, 2),
        "evaluate_aws_calls_p50": statistics.median(calls),
        "evaluate_acted_share": round(acted / repetitions, 2),
    }

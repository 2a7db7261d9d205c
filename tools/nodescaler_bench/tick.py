"""One tick over 1,000 managed groups: the real dispatch handler and the sample tick event.

The groups are tagged ASGs in moto's server (its own process, see `bench.aws`); the
handler discovers them with DescribeAutoScalingGroups and queues one FIFO message per
group, several batches at a time. Each tick is timed whole, in a warm function (clients
made, a first call made); the time with a call on the wire is AWS's, the rest is
nodescaler's own, and each operation's waits are summed apart (the batches overlap, so
their sum may exceed the tick). Each tick queues into a new, empty queue, as a real tick
finds its queue drained by the evaluations of the minute before.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from typing import Any

import boto3
from nodescaler_sandbox.lambda_local import LocalContext
from nodescaler_sandbox.provision import (
    create_evaluation_queue,
    create_group,
    create_state_table,
    launch_configuration,
)
from nodescaler_sandbox.sandbox import ROOT, load_handler

from nodescaler_bench import reference
from nodescaler_bench.aws import (
    REGION,
    AwsStopwatch,
    fake_credentials,
    functions_output,
    moto_server,
)

TICKS = 3
TABLE = "nodescaler-state"


def _groups(autoscaling: Any, count: int) -> None:
    """`count` opted-in groups, each with one of the shipped policies."""
    launch_configuration(autoscaling, "nodes", "m5.large")
    policies = ("gpu-training", "business-hours", "microservices")
    for index in range(count):
        name = f"ng-{index:04d}"
        tags = {"nodescaler/enabled": "true", "nodescaler/policy": policies[index % 3]}
        create_group(autoscaling, name, region=REGION, tags=tags)


def run(groups: int = 1000, ticks: int = TICKS) -> dict[str, float]:
    """The median of `ticks` ticks; figures are named after the number of groups."""
    from nodescaler import wiring
    from nodescaler.config import DispatchSettings

    sample = json.loads((ROOT / "events" / "schedule-tick.json").read_text())
    with fake_credentials(), moto_server() as endpoint, functions_output():

        def client(service: str) -> Any:
            return boto3.client(service, region_name=REGION, endpoint_url=endpoint)

        _groups(client("autoscaling"), groups)
        create_state_table(client("dynamodb"), TABLE)
        clients = wiring.AwsClients(boto3.Session(region_name=REGION), endpoint_url=endpoint)
        clients.autoscaling.describe_auto_scaling_groups(MaxRecords=1)  # the warm container
        clients.sqs.list_queues()
        stopwatch = AwsStopwatch()
        stopwatch.watch(clients.autoscaling, clients.sqs, clients.dynamodb)
        dispatch = load_handler("dispatch")
        measured: list[tuple[float, float, dict[str, float], int]] = []
        beside: list[float] = []  # the reference workload, after each tick
        for tick in range(ticks):
            environment = {
                "EVALUATION_QUEUE_URL": create_evaluation_queue(client("sqs"), f"tick-{tick}"),
                "POLICIES_PATH": str(ROOT / "policies"),
                "STATE_TABLE_NAME": TABLE,
            }
            dispatcher = wiring.dispatcher(DispatchSettings.from_environment(environment), clients)
            event = sample | {"id": str(uuid.uuid4())}
            stopwatch.reset()
            started = time.perf_counter()
            result = dispatch.handler(event, LocalContext("nodescaler-dispatch"), dispatcher)
            elapsed = time.perf_counter() - started
            if len(result["queued"]) != groups:
                raise AssertionError(f"tick {tick} queued {len(result['queued'])} of {groups}")
            describes = stopwatch.calls["DescribeAutoScalingGroups"]
            measured.append((elapsed, stopwatch.seconds, dict(stopwatch.waiting), describes))
            beside.append(reference.seconds())
    if len({describes for *_, describes in measured}) != 1:
        raise AssertionError(f"ticks made different numbers of describe calls: {measured}")
    elapsed, on_wire, waiting, describes = sorted(measured, key=lambda m: m[0])[len(measured) // 2]
    name = f"tick_{groups}_groups"
    return {
        f"{name}_s": round(elapsed, 3),
        f"{name}_describe_calls": describes,
        f"{name}_describe_wait_s": round(waiting.get("DescribeAutoScalingGroups", 0.0), 3),
        f"{name}_send_wait_s": round(waiting.get("SendMessageBatch", 0.0), 3),
        f"{name}_aws_wait_s": round(on_wire, 3),
        f"{name}_own_s": round(elapsed - on_wire, 3),
        f"{name}_reference_s": round(statistics.median(beside), 4),
    }

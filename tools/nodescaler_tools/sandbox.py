"""The local sandbox: the real Lambda handlers against real parts on loopback.

- AWS is moto's server on a loopback port, started here; the handlers reach it through
  the same `nodescaler.wiring` they use in Lambda, only with its endpoint.
- Kubernetes is the loopback API server (`nodescaler_tools.kube`), with a simulated
  cluster: an instance the ASG launches registers as a Ready node after a boot delay.
- Time is a virtual clock: a tick is one call, so an hour runs in seconds.

What moto does not do, the sandbox supplies, and says so: SetDesiredCapacity outside the
group's [min, max] is refused as AWS refuses it; EventBridge does not invoke Lambda, so the
sandbox delivers the tick and the launch-failure events; moto always launches, so for a
group the scenario says has no capacity the sandbox takes back what moto launched and
sends the `EC2 Instance Launch Unsuccessful` event AWS would; Lambda's SQS event source
is `lambda_local.SqsEventSource`. A small scheduler binds pending pods to Ready nodes
with room (CPU and memory requests) and leaves the rest `Unschedulable`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import socket
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
from nodescaler.domain.cluster import millicores, whole_units

from nodescaler_tools.kube import write_kubeconfig
from nodescaler_tools.kube.apiserver import Cluster, KubeApiServer
from nodescaler_tools.lambda_local import LocalContext, SqsEventSource
from nodescaler_tools.provision import (
    create_evaluation_queue,
    create_state_table,
    fail_launches,
)

REGION = "eu-west-1"
TABLE = "nodescaler-state"
START = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday morning


ROOT = Path(__file__).resolve().parents[2]  # the repository


def load_handler(function: str) -> Any:
    """functions/<function>/handler.py as Lambda loads it: a top-level module from a file."""
    path = ROOT / "functions" / function / "handler.py"
    spec = importlib.util.spec_from_file_location(f"nodescaler_function_{function}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class VirtualClock:
    at: datetime = START

    def now(self) -> datetime:
        return self.at


class AwsRefusal:
    """What moto lets through and AWS does not: a desired capacity outside [min, max]."""

    def __init__(self, autoscaling: Any) -> None:
        self._autoscaling = autoscaling

    def __call__(self, params: dict[str, Any], **_: Any) -> Any:
        body = params.get("body") or {}
        group, desired = body.get("AutoScalingGroupName"), body.get("DesiredCapacity")
        if group is None or desired is None:
            return None
        described = self._autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group])
        asg = described["AutoScalingGroups"][0]
        desired = int(desired)
        if asg["MinSize"] <= desired <= asg["MaxSize"]:
            return None
        side, bound = (
            ("above max", asg["MaxSize"])
            if desired > asg["MaxSize"]
            else ("below min", asg["MinSize"])
        )
        message = (
            f"New SetDesiredCapacity value {desired} is {side} value {bound} for the "
            "AutoScalingGroup."
        )
        return _Response(400), {"Error": {"Code": "ValidationError", "Message": message}}


@dataclass
class _Response:
    status_code: int


@dataclass
class SimulatedCluster:
    """Nodes follow the ASGs' instances: Ready `boot` after launch, gone when terminated."""

    store: Cluster
    boot: timedelta
    allocatable: dict[str, str] = field(
        default_factory=lambda: {"cpu": "16", "memory": "20Gi", "pods": "110"}
    )
    launched: dict[str, tuple[str, datetime]] = field(default_factory=dict)  # id → (group, at)

    def sync(self, autoscaling: Any, now: datetime) -> None:
        """Nodes come and go with the instances; then the scheduler runs."""
        current: dict[str, str] = {}
        for page in autoscaling.get_paginator("describe_auto_scaling_groups").paginate():
            for asg in page["AutoScalingGroups"]:
                for instance in asg.get("Instances", []):
                    current[instance["InstanceId"]] = asg["AutoScalingGroupName"]
        for instance_id, group in current.items():
            self.launched.setdefault(instance_id, (group, now))
        for instance_id in list(self.launched):
            group, at = self.launched[instance_id]
            name = f"ip-{instance_id}"
            if instance_id not in current:
                del self.launched[instance_id]
                self.store.delete("nodes", ("", name))
            elif now - at >= self.boot and ("", name) not in self.store.objects["nodes"]:
                self.store.put("nodes", self._node(name, instance_id))
        self.schedule()

    def _node(self, name: str, instance_id: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"providerID": f"aws:///{REGION}a/{instance_id}"},
            "status": {
                "allocatable": self.allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def schedule(self) -> int:
        """Bind pending pods to Ready nodes with room for their requests; returns how many
        are left pending (and marked Unschedulable, as the scheduler does)."""
        free: dict[str, list[int]] = {}
        for found in self.store.objects["nodes"].values():
            allocatable = found["status"]["allocatable"]
            free[found["metadata"]["name"]] = [
                millicores(allocatable["cpu"]),
                whole_units(allocatable["memory"]),
            ]
        pending = []
        for pod in self.store.objects["pods"].values():
            cpu, memory = _requests(pod)
            if pod["spec"].get("nodeName") in free:
                free[pod["spec"]["nodeName"]][0] -= cpu
                free[pod["spec"]["nodeName"]][1] -= memory
            elif not pod["spec"].get("nodeName"):
                pending.append((pod, cpu, memory))
        left = 0
        for pod, cpu, memory in pending:
            node = next(
                (n for n, room in free.items() if room[0] >= cpu and room[1] >= memory), None
            )
            if node is None:
                left += 1
                continue
            free[node][0] -= cpu
            free[node][1] -= memory
            pod["spec"]["nodeName"] = node
            pod["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            }
            self.store.put("pods", pod)
        return left

    def ready_nodes(self, group: str) -> int:
        ids = {i for i, (g, _) in self.launched.items() if g == group}
        return sum(
            1
            for n in self.store.objects["nodes"].values()
            if n["spec"]["providerID"].rsplit("/", 1)[-1] in ids
        )


def _requests(pod: dict[str, Any]) -> tuple[int, int]:
    cpu = memory = 0
    for container in pod["spec"].get("containers", []):
        requests = container.get("resources", {}).get("requests", {})
        cpu += millicores(requests.get("cpu", "0"))
        memory += whole_units(requests.get("memory", "0"))
    return cpu, memory


class Sandbox:
    """`with Sandbox(policies) as sandbox:` — AWS and Kubernetes up, functions wired."""

    def __init__(
        self,
        policies: Path,
        out: Path,
        *,
        boot: timedelta,
        environment: dict[str, str] | None = None,  # the functions' settings, e.g. EXPANDERS
    ) -> None:
        self.policies = policies
        self.out = out
        self.clock = VirtualClock()
        self.cluster = SimulatedCluster(Cluster(), boot)
        self.writes: dict[str, int] = {}
        self.no_capacity: set[str] = set()  # groups whose launches fail, as the scenario says
        self.launch_failures: list[tuple[datetime, str]] = []  # (when, group)
        self._environment = environment or {}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Sandbox:
        from moto.server import ThreadedMotoServer

        for name, value in {
            "AWS_ACCESS_KEY_ID": "sandbox",
            "AWS_SECRET_ACCESS_KEY": "sandbox",
            "AWS_DEFAULT_REGION": REGION,
            "POWERTOOLS_LOG_LEVEL": "WARNING",  # decisions go to the timeline and logs.jsonl
        }.items():
            self._stack.callback(_restore, name, os.environ.get(name))
            os.environ[name] = value
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server: one line a call
        port = _free_port()
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        moto.start()
        self._stack.callback(moto.stop)
        self.endpoint = f"http://127.0.0.1:{port}"
        # moto's stores live in this process: start from nothing, whatever ran before
        urllib.request.urlopen(
            urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        )
        self.api_server = self._stack.enter_context(KubeApiServer(self.cluster.store))
        self._wire()
        return self

    def __exit__(self, *_: object) -> None:
        self._stack.close()

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=self.endpoint)

    def _wire(self) -> None:
        from nodescaler import wiring
        from nodescaler.config import DispatchSettings, EvaluateSettings

        dispatch, evaluate = load_handler("dispatch"), load_handler("evaluate")

        create_state_table(self.client("dynamodb"), TABLE)
        self.queue_url = create_evaluation_queue(self.client("sqs"), "evaluations")
        kubeconfig = write_kubeconfig(self.out / "kubeconfig", self.api_server.url)
        environment = {
            "STATE_TABLE_NAME": TABLE,
            "EVALUATION_QUEUE_URL": self.queue_url,
            "POLICIES_PATH": str(self.policies),
            "KUBECONFIG_PATH": str(kubeconfig),
        } | self._environment
        clients = wiring.AwsClients(boto3.Session(region_name=REGION), endpoint_url=self.endpoint)
        clients.autoscaling.meta.events.register(
            "before-call.auto-scaling.SetDesiredCapacity", AwsRefusal(self.client("autoscaling"))
        )
        clients.autoscaling.meta.events.register(
            "before-call.auto-scaling.SetDesiredCapacity", self._count_write
        )
        self.clients = clients
        self._dispatcher = wiring.dispatcher(
            DispatchSettings.from_environment(environment), clients
        )
        evaluator = wiring.evaluator(
            EvaluateSettings.from_environment(environment), clients, self.clock
        )
        self._dispatch = dispatch.handler
        self._evaluations = SqsEventSource(
            clients.sqs,
            self.queue_url,
            lambda event, context: evaluate.handler(event, context, evaluator=evaluator),
        )
        self.state = evaluator.state

    def _count_write(self, params: dict[str, Any], **_: Any) -> None:
        group = (params.get("body") or {}).get("AutoScalingGroupName", "?")
        self.writes[group] = self.writes.get(group, 0) + 1

    def tick(self, log: io.TextIOBase) -> None:
        """What EventBridge Scheduler and Lambda would do at this minute."""
        self.cluster.sync(self.clients.autoscaling, self.clock.now())
        event = {
            "version": "0",
            "id": f"tick-{self.clock.now().isoformat()}",
            "detail-type": "Scheduled Event",
            "source": "aws.scheduler",
            "account": "123456789012",
            "time": self.clock.now().isoformat().replace("+00:00", "Z"),
            "region": REGION,
            "resources": [],
            "detail": {},
        }
        with contextlib.redirect_stdout(log), _logs_to(log):  # EMF and log lines: logs.jsonl
            self._dispatch(event, LocalContext("nodescaler-dispatch"), dispatcher=self._dispatcher)
            self._evaluations.drain()
            for group in sorted(self.no_capacity):
                self._fail_launches(group)

    def _fail_launches(self, group: str) -> None:
        """What EC2 does to a group with no capacity: its launches fail, and Auto Scaling
        says so on EventBridge (moto launched them; the sandbox takes them back)."""
        launched = fail_launches(self.client("ec2"), group, region=REGION)
        if not launched:
            return
        at = self.clock.now().isoformat().replace("+00:00", "Z")
        activity = f"launch-{group}-{len(self.launch_failures)}"
        message = (
            "We currently do not have sufficient capacity in the Availability Zone you "
            f"requested ({REGION}a)."
        )
        event = {
            "version": "0",
            "id": f"failure-{activity}",
            "detail-type": "EC2 Instance Launch Unsuccessful",
            "source": "aws.autoscaling",
            "account": "123456789012",
            "time": at,
            "region": REGION,
            "resources": [],
            "detail": {
                "StatusCode": "Failed",
                "AutoScalingGroupName": group,
                "ActivityId": activity,
                "StatusMessage": message,
                "Cause": f"At {at} {len(launched)} instances were started and failed to launch.",
            },
        }
        self.launch_failures.append((self.clock.now(), group))
        self._dispatch(event, LocalContext("nodescaler-dispatch"), dispatcher=self._dispatcher)
        self._evaluations.drain()

    def advance(self, minutes: float = 1) -> None:
        self.clock.at += timedelta(minutes=minutes)


@contextlib.contextmanager
def _logs_to(log: io.TextIOBase) -> Iterator[None]:
    """The functions' log lines into `log` (Powertools' handler keeps the stdout it
    started with, so redirecting stdout alone misses them)."""
    handlers = [
        h for h in logging.getLogger("nodescaler").handlers if isinstance(h, logging.StreamHandler)
    ]
    streams = [h.setStream(log) for h in handlers]
    try:
        yield
    finally:
        for handler, stream in zip(handlers, streams, strict=True):
            handler.setStream(stream)


def _restore(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def sandbox(
    policies: Path, out: Path, *, boot: timedelta, environment: dict[str, str] | None = None
) -> Iterator[Sandbox]:
    out.mkdir(parents=True, exist_ok=True)
    with Sandbox(policies, out, boot=boot, environment=environment) as running:
        yield running

"""Given a group scaled on an SQS queue and on the cluster's CPU reservation and pending
pods, when the Kubernetes API is down, slow (beyond the client's timeout), or answers 401
or 500, then the group never scales in, and still scales up when its queue asks for more;
a group scaled on its queue alone follows it both ways.

100 trials, each one fault and one workload drawn with a seeded RNG, each one tick of the
real handlers (dispatch → SQS FIFO → evaluate) on moto in process, the cluster read by the
real `kubernetes` client from the loopback API server (`KubeApiServer.failing`). After a
trial that held a scale-in, a healthy tick must make it: the fault, nothing else, held it.
One run is shared by the tests below; its figures are printed (`-s` not needed).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from nodescaler.domain.scaling.decision import MetricStatus
from nodescaler_sandbox.kube.apiserver import Fault, KubeApiServer

from tests import aws
from tests.aws import CallCounter, client, make_asg, set_tasks
from tests.builders import EXACT, VirtualClock, policy_document, queue_metric, reservation_metric
from tests.e2e.conftest import Deployment
from tests.faults.figures import show
from tests.kube import kubeconfig, node

# the loopback API server, 100 trials: ~40 s, one for the file (--dist loadfile)
pytestmark = pytest.mark.slow

TRIALS = 100
SEED = 7
TIMEOUT_SECONDS = 0.2  # the client's, through the evaluate function's settings
SLOW_SECONDS = 5.0  # how late the slow server answers: far beyond the client's timeout
PER_NODE = 1  # tasks a node takes, in both policies: few messages, for moto
MIN_SIZE, MAX_SIZE = 1, 12
MIXED, QUEUE_ONLY = "queue-and-cluster", "queue-only"
KUBERNETES_METRICS = ("reservation-cpu", "pending-pods")  # their names in decisions
CLUSTER_METRICS = (reservation_metric("cpu", 60), {"type": "PendingPods"})


def policy(group: str, *, cluster: bool) -> str:
    """A task a node from the group's queue (and the cluster's say, if `cluster`),
    followed exactly and at once: a scale-in, if allowed, happens on the very tick."""
    metrics = [queue_metric(f"{group}-tasks", per_node=PER_NODE)]
    if cluster:
        metrics += CLUSTER_METRICS
    return policy_document(
        group, *metrics, min_replicas=MIN_SIZE, max_replicas=MAX_SIZE, behavior=EXACT
    )


# What a missing metric's detail says, for each fault: the operator's view of the cause.
CAUSES = {
    Fault.DOWN: "Connection refused",
    Fault.SLOW: f"Kubernetes API: no answer within {TIMEOUT_SECONDS:g}s",
    Fault.UNAUTHORIZED: "Kubernetes API: 401 Unauthorized",
    Fault.SERVER_ERROR: "Kubernetes API: 500 Internal Server Error",
}
# Requests one faulted tick makes of the API server: one listing for both groups'
# evaluations (the second reuses the first's failure), not retried by the client; a 401
# renews the credentials and tries once more. DOWN's are refused before the server.
REQUESTS_PER_TICK = {Fault.SLOW: 1, Fault.SERVER_ERROR: 1, Fault.UNAUTHORIZED: 2}


@dataclass
class Report:
    trials: Counter[Fault] = field(default_factory=Counter)
    scale_ups_asked: Counter[Fault] = field(default_factory=Counter)
    scale_ups_made: Counter[Fault] = field(default_factory=Counter)
    scale_ins_asked: Counter[Fault] = field(default_factory=Counter)
    scale_ins_held: Counter[Fault] = field(default_factory=Counter)
    scale_ins: list[str] = field(default_factory=list)  # made while the API was faulted
    missed_scale_ups: list[str] = field(default_factory=list)
    released_when_healthy: int = 0  # held scale-ins made on the next, healthy, tick
    queue_only_followed: int = 0  # trials in which the other group reached its queue's size
    failed_evaluations: list[str] = field(default_factory=list)  # message ids retried
    causes: Counter[tuple[Fault, str]] = field(default_factory=Counter)
    readable_under_fault: list[str] = field(default_factory=list)
    faulted_requests: Counter[Fault] = field(default_factory=Counter)
    seconds: float = 0.0

    def figures(self) -> dict[str, Any]:
        def by_kind(counts: Counter[Fault]) -> str:
            return ", ".join(f"{kind} {counts[kind]}" for kind in Fault)

        return {
            "trials per fault": by_kind(self.trials),
            "scale-ups asked / made, per fault": (
                f"{by_kind(self.scale_ups_asked)} / {by_kind(self.scale_ups_made)}"
            ),
            "scale-ins asked / held, per fault": (
                f"{by_kind(self.scale_ins_asked)} / {by_kind(self.scale_ins_held)}"
            ),
            "scale-ins seen under a fault": len(self.scale_ins),
            "held scale-ins made once healthy": self.released_when_healthy,
            "queue-only group followed its queue": f"{self.queue_only_followed} / {TRIALS}",
            "evaluations failed (retried)": len(self.failed_evaluations),
            "requests the faulty server answered": by_kind(self.faulted_requests),
            "run time": f"{self.seconds:.1f} s",
        }


def register_nodes(server: KubeApiServer, instances: set[str]) -> None:
    """The group's instances are Ready nodes as soon as Auto Scaling has them, and gone with
    them. No pods: the cluster's own metrics never ask for more than the queue does."""
    cluster = server.cluster
    for key, registered in list(cluster.objects["nodes"].items()):
        if registered["spec"]["providerID"].rsplit("/", 1)[-1] not in instances:
            cluster.delete("nodes", key)
    for instance in instances:
        if ("", f"ip-{instance}") not in cluster.objects["nodes"]:
            provider = f"aws:///{aws.REGION}a/{instance}"
            cluster.put("nodes", node(f"ip-{instance}", None, provider_id=provider))


class Run:
    def __init__(self, folder: Path, server: KubeApiServer) -> None:
        policies = folder / "policies"
        policies.mkdir()
        for group, cluster in ((MIXED, True), (QUEUE_ONLY, False)):
            (policies / f"{group}.yaml").write_text(policy(group, cluster=cluster))
        self.server = server
        self.clock = VirtualClock(at=datetime.fromisoformat("2026-11-23T09:00:00+00:00"))
        self.deployment = Deployment(
            policies,
            CallCounter(),
            self.clock,
            {
                "KUBECONFIG_PATH": str(kubeconfig(folder / "kubeconfig", server.url)),
                "KUBERNETES_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
            },
        )
        for group in (MIXED, QUEUE_ONLY):
            client("sqs").create_queue(QueueName=f"{group}-tasks")
            opt_in = {"nodescaler/enabled": "true", "nodescaler/policy": group}
            make_asg(group, tags=opt_in, desired=4, min_size=MIN_SIZE, max_size=MAX_SIZE)
        self.report = Report()
        self.look()

    def look(self) -> None:
        """The groups' sizes, and the mixed group's nodes registered, after a tick."""
        described = client("autoscaling").describe_auto_scaling_groups(
            AutoScalingGroupNames=[MIXED, QUEUE_ONLY]
        )["AutoScalingGroups"]
        self.size = {g["AutoScalingGroupName"]: g["DesiredCapacity"] for g in described}
        (mixed,) = (g for g in described if g["AutoScalingGroupName"] == MIXED)
        register_nodes(self.server, {i["InstanceId"] for i in mixed["Instances"]})

    def tick(self) -> None:
        self.clock.advance(minutes=1)
        for delivery in self.deployment.tick():
            self.report.failed_evaluations += delivery.failed
        self.look()

    def trial(self, rng: random.Random) -> None:
        report = self.report
        fault = rng.choice(list(Fault))
        before = self.size[MIXED]
        up = before < MAX_SIZE - 3 and (before <= MIN_SIZE + 1 or rng.random() < 0.5)
        step = rng.randint(1, 3)
        wanted = before + step if up else max(before - step, MIN_SIZE)
        other = rng.randint(MIN_SIZE, 10)
        set_tasks(f"{MIXED}-tasks", wanted * PER_NODE)
        set_tasks(f"{QUEUE_ONLY}-tasks", other * PER_NODE)

        with self.server.failing(fault):
            self.tick()

        report.trials[fault] += 1
        after = self.size[MIXED]
        seen = f"{fault}: {before} → {after} with the queue asking for {wanted}"
        if up:
            report.scale_ups_asked[fault] += 1
            if after == wanted:
                report.scale_ups_made[fault] += 1
            else:
                report.missed_scale_ups.append(seen)
        else:
            report.scale_ins_asked[fault] += 1
            if after < before:
                report.scale_ins.append(seen)
            else:
                report.scale_ins_held[fault] += after == before
        report.queue_only_followed += self.size[QUEUE_ONLY] == other
        (decision,) = self.deployment.evaluator.state.decisions(MIXED, limit=1)
        for metric in decision.metrics:
            if metric.name not in KUBERNETES_METRICS:
                continue
            if metric.status is MetricStatus.MISSING:
                report.causes[fault, metric.detail] += 1
            else:
                report.readable_under_fault.append(f"{fault}: {metric.name} {metric.status}")

        if not up and after == before:  # the API answers again
            self.tick()
            report.released_when_healthy += self.size[MIXED] == wanted


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    started = time.perf_counter()
    rng = random.Random(SEED)
    with aws.moto(), KubeApiServer() as server:
        server.slow_seconds = SLOW_SECONDS
        run = Run(tmp_path_factory.mktemp("kubernetes-faults"), server)
        for _ in range(TRIALS):
            run.trial(rng)
        run.report.faulted_requests = server.faulted
    run.report.seconds = time.perf_counter() - started
    return run.report


@pytest.fixture(scope="module", autouse=True)
def printed(report: Report, pytestconfig: pytest.Config) -> None:
    show(pytestconfig, f"Kubernetes API faults: {TRIALS} trials, one fault each", report.figures())


def test_every_fault_was_tried_and_made_the_clusters_metrics_missing_for_its_cause(
    report: Report,
) -> None:
    assert sum(report.trials.values()) == TRIALS
    assert min(report.trials[kind] for kind in Fault) >= 15, report.trials
    assert report.readable_under_fault == []
    for fault, detail in report.causes:
        assert CAUSES[fault] in detail, (fault, detail)
    assert {fault for fault, _ in report.causes} == set(Fault)


def test_no_group_scaled_in_while_the_kubernetes_api_was_faulted(report: Report) -> None:
    assert report.scale_ins == []
    assert report.scale_ins_held == report.scale_ins_asked
    assert min(report.scale_ins_asked[kind] for kind in Fault) >= 5, report.scale_ins_asked


def test_the_queue_still_scaled_the_group_up_under_every_fault(report: Report) -> None:
    assert report.missed_scale_ups == []
    assert min(report.scale_ups_made[kind] for kind in Fault) >= 5, report.scale_ups_made


def test_every_held_scale_in_was_made_once_the_api_answered_again(report: Report) -> None:
    # the hold came from the fault: the same workload, healthy, scales in
    assert report.released_when_healthy == sum(report.scale_ins_held.values())


def test_a_group_without_kubernetes_metrics_followed_its_queue_and_nothing_failed(
    report: Report,
) -> None:
    assert report.queue_only_followed == TRIALS
    assert report.failed_evaluations == []


def test_a_faulty_api_server_was_asked_once_per_tick_not_once_per_metric_or_retry(
    report: Report,
) -> None:
    # a slow server costs a tick one client timeout, whatever the number of metrics
    assert {kind: report.faulted_requests[kind] for kind in REQUESTS_PER_TICK} == {
        kind: report.trials[kind] * per_tick for kind, per_tick in REQUESTS_PER_TICK.items()
    }

"""A fallback end to end: a CloudWatch metric with no data, tick after tick, through the
dispatch and evaluate handlers on moto; its failure run lives in the group's state item."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler_sandbox.kube.apiserver import Fault, KubeApiServer
from nodescaler_sandbox.lambda_local import LocalContext

from tests.aws import CallCounter, client, desired_capacity, make_asg
from tests.builders import VirtualClock, policy_document, reservation_metric
from tests.drip import Drip
from tests.e2e.conftest import TABLE, Deployment, event
from tests.kube import cluster_of, kubeconfig, node

ERRORS = {
    "type": "CloudWatch",
    "name": "errors",
    "cloudWatch": {"metric": {"namespace": "App", "metricName": "Errors", "statistic": "Sum"}},
    "target": {"type": "Value", "value": 10},
    "fallback": {"failureThreshold": 2, "replicas": 2},  # more than 2 failures: the third
}
FAST_DOWN = {"scaleDown": {"stabilizationWindowSeconds": 0}}


def _failures_item() -> dict[str, Any] | None:
    item = client("dynamodb").get_item(
        TableName=TABLE, Key={"pk": {"S": "GROUP#api"}, "sk": {"S": "STATE"}}
    )["Item"]
    return item.get("failures")


def test_given_a_cloudwatch_metric_that_keeps_failing_then_its_fallback_applies_from_the_third_tick(
    deployment: Deployment, policies: Path, output: Any
) -> None:
    document = policy_document("api", ERRORS, min_replicas=1, max_replicas=10, behavior=FAST_DOWN)
    (policies / "api.yaml").write_text(document)
    deployment.deploy()
    make_asg("api", tags={"nodescaler/enabled": "true", "nodescaler/policy": "api"}, desired=8)
    first_tick = deployment.clock.now()
    store = DynamoStateStore(client("dynamodb"), TABLE)

    sizes, counts = [], []
    for _ in range(4):
        deployment.tick()
        sizes.append(desired_capacity("api"))
        counts.append(store.load("api").failures.runs["errors"].count)
        deployment.clock.advance(minutes=1)

    # two ticks held by the missing metric, each counted in the state item; from the third
    # it falls back to 2 nodes, at most 5 a minute (the default scale-down rate), and says
    # so with the first failure's time
    assert sizes == [8, 8, 3, 2]
    assert counts == [1, 2, 3, 4]
    decision = store.load("api").last_decision
    assert decision is not None
    assert "fallback" in decision.limited_by
    assert f"errors in fallback replicas 2 → 2 since {first_tick:%Y-%m-%d %H:%M:%S}Z" in (
        decision.reason
    )

    # data again: the metric decides (20 against 10 at 2 nodes: 4) and its run is gone
    client("cloudwatch").put_metric_data(
        Namespace="App",
        MetricData=[
            {
                "MetricName": "Errors",
                "Timestamp": deployment.clock.now() - timedelta(seconds=30),
                "Value": 20,
            }
        ],
    )
    deployment.tick()
    assert desired_capacity("api") == 4
    assert _failures_item() is None
    assert store.load("api").failures.runs == {}
    # a metric voting its fallback is still a metric unavailable
    assert output().metric("MetricsUnavailable", "api") == [1, 1, 1, 1, 0]


def test_given_a_cluster_read_cut_by_the_invocations_end_then_no_failure_counts_and_it_is_retried(
    policies: Path, calls: CallCounter, clock: VirtualClock, tmp_path: Path, output: Any
) -> None:
    # Given a group scaled on the cluster's CPU reservation, with a fallback after one
    # failure, and an API server answering late (its own timeout 5 s)
    reservation = reservation_metric("cpu", 60) | {
        "fallback": {"failureThreshold": 1, "replicas": 2}
    }
    (policies / "api.yaml").write_text(policy_document("api", reservation, max_replicas=10))
    with KubeApiServer(cluster_of(("nodes", node("a-1", "a")))) as server:
        environment = {
            "KUBECONFIG_PATH": str(kubeconfig(tmp_path / "kubeconfig", server.url)),
            "KUBERNETES_TIMEOUT_SECONDS": "5",
        }
        deployment = Deployment(policies, calls, clock, environment)
        make_asg("api", tags={"nodescaler/enabled": "true", "nodescaler/policy": "api"}, desired=8)
        deployment.dispatch(event("schedule-tick.json", id=str(uuid.uuid4())))
        # When the evaluation's state read leaves its invocation 0.3 s (of 32 s) for the cluster
        seconds = [0.0]

        def slow_aws(**_: Any) -> None:
            seconds[0] = 31.7

        deployment.evaluator.deadline._monotonic = lambda: seconds[0]
        deployment.evaluations.context = lambda: LocalContext(remaining_ms=35_000)
        deployment.clients.dynamodb.meta.events.register(
            "provide-client-params.dynamodb.GetItem", slow_aws
        )
        with server.failing(Fault.SLOW):
            (delivery,) = deployment.evaluations.drain()

    # Then the record fails, to be retried by a later invocation: out of time, not the
    # metric's failure, so no run towards its fallback is counted, nothing changes
    assert len(delivery.failed) == 1
    assert DynamoStateStore(client("dynamodb"), TABLE).load("api").failures.runs == {}
    assert desired_capacity("api") == 8
    assert deployment.dead_letters() == []
    assert any(
        "no answer within 0.3s (the invocation's time left)" in w
        for w in output().messages("WARNING")
    )


def test_given_a_prometheus_read_cut_by_the_invocations_end_then_no_failure_counts_and_it_is_retried(
    policies: Path, calls: CallCounter, clock: VirtualClock, output: Any
) -> None:
    # Given a group scaled on a Prometheus query, with a fallback after one failure, and a
    # server dripping its answer (its timeoutSeconds 20)
    with Drip("body", b'{"status":"success","data":{"resultType":"vector","result":[]}}') as drip:
        query = {"query": "sum(jobs_waiting)", "serverAddress": drip.address, "timeoutSeconds": 20}
        backlog = {
            "type": "Prometheus",
            "prometheus": query,
            "target": {"type": "AverageValue", "averageValue": 4},
            "fallback": {"failureThreshold": 1, "replicas": 2},
        }
        (policies / "api.yaml").write_text(policy_document("api", backlog, max_replicas=10))
        deployment = Deployment(policies, calls, clock)
        make_asg("api", tags={"nodescaler/enabled": "true", "nodescaler/policy": "api"}, desired=8)
        deployment.dispatch(event("schedule-tick.json", id=str(uuid.uuid4())))
        # When the evaluation's state read leaves its invocation 0.3 s (of 32 s) for the query
        seconds = [0.0]

        def slow_aws(**_: Any) -> None:
            seconds[0] = 31.7

        deployment.evaluator.deadline._monotonic = lambda: seconds[0]
        deployment.evaluations.context = lambda: LocalContext(remaining_ms=35_000)
        deployment.clients.dynamodb.meta.events.register(
            "provide-client-params.dynamodb.GetItem", slow_aws
        )
        (delivery,) = deployment.evaluations.drain()

    # Then the record fails, to be retried by a later invocation: out of time, not the
    # metric's failure, so no run towards its fallback is counted, nothing changes
    assert len(delivery.failed) == 1
    assert DynamoStateStore(client("dynamodb"), TABLE).load("api").failures.runs == {}
    assert desired_capacity("api") == 8
    assert deployment.dead_letters() == []
    assert any(
        "Prometheus query 'sum(jobs_waiting)'" in w
        and "no answer within 0.3s, the deadline of the invocation's remaining time" in w
        for w in output().messages("WARNING")
    )

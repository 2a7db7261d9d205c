"""The fast path through its handler, over moto and the loopback API server: it asks for an
evaluation of the groups concerned within a look of something new (unschedulable pods, a
queue past its target), once per group however many pods, and backs off when the API
server or SQS fails, while the tick runs as before."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from nodescaler import wiring
from nodescaler.config import FastPathSettings
from nodescaler.observability.metric_names import MetricName
from nodescaler.observability.reports import report_fast_look
from nodescaler.service.fast_path import FastPath
from nodescaler_sandbox.kube.apiserver import Fault, KubeApiServer
from nodescaler_sandbox.lambda_local import LocalContext
from nodescaler_sandbox.moto_server import free_port
from nodescaler_sandbox.prometheus import (
    GaugeTarget,
    PrometheusMissingError,
    PrometheusServer,
    prometheus_scraping,
)

from functions.fast_path import handler as fast_path_handler
from tests.aws import REGION, CallCounter, client, fill_queue, make_asg
from tests.builders import VirtualClock, policy_document, queue_metric
from tests.e2e.conftest import TABLE, Deployment
from tests.integration.test_node_groups import eks_node_group
from tests.kube import kubeconfig, node, pod

BATCH = "apiVersion: nodescaler.io/v1alpha1\nkind: NodeGroupPolicy\nmetadata: {name: batch}\n"
BATCH += "spec: {minReplicas: 0, maxReplicas: 20, metrics: [{type: PendingPods}]}\n"


def queue_only(name: str) -> str:
    """A queue policy whose group never grows for pending pods (`ownPendingPods: false`):
    the pods below are the PendingPods groups' (a test below turns it back on)."""
    document = yaml.safe_load(policy_document(name, queue_metric(name, 4)))
    document["spec"]["ownPendingPods"] = False
    return yaml.safe_dump(document, sort_keys=False)


def opted_in(policy: str) -> dict[str, str]:
    return {"nodescaler/enabled": "true", "nodescaler/policy": policy}


@pytest.fixture
def api_server() -> Iterator[KubeApiServer]:
    with KubeApiServer(token="secret") as server:
        yield server


@pytest.fixture
def fast(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
) -> Callable[..., tuple[Deployment, FastPath]]:
    """The deployment, and its fast path wired from its settings; its sleeps pass virtual
    time, each recorded in `slept`."""
    (policies / "batch.yaml").write_text(BATCH)
    for name in ("jobs", "reports"):
        (policies / f"{name}.yaml").write_text(queue_only(name))
    for name in ("jobs", "reports"):
        client("sqs").create_queue(QueueName=name)
    config = str(kubeconfig(tmp_path / "kubeconfig", api_server.url))

    def deployed(clients: wiring.AwsClients | None = None) -> tuple[Deployment, FastPath]:
        deployment = Deployment(policies, calls, clock, {"KUBECONFIG_PATH": config})
        settings = FastPathSettings.from_environment(
            {
                "STATE_TABLE_NAME": TABLE,
                "EVALUATION_QUEUE_URL": deployment.queue_url,
                "POLICIES_PATH": str(policies),
                "KUBECONFIG_PATH": config,
                "KUBERNETES_TIMEOUT_SECONDS": "0.5",
            }
        )
        from nodescaler.observability.reports import report_fast_look

        path = wiring.fast_path(
            settings,
            clients or deployment.clients,
            clock,
            sleep=lambda seconds: (slept.append(seconds), clock.advance(seconds=seconds)),
            report=report_fast_look,
        )
        return deployment, path

    return deployed


slept: list[float] = []


@pytest.fixture(autouse=True)
def _no_sleeps_yet() -> None:
    slept.clear()


def run_one_minute(path: FastPath) -> dict[str, Any]:
    result: dict[str, Any] = fast_path_handler.handler(
        {}, LocalContext("nodescaler-fast-path"), fast_path=path
    )
    return result


def queued(deployment: Deployment) -> list[dict[str, Any]]:
    """Every evaluation request waiting in the evaluation queue."""
    sqs, found = deployment.clients.sqs, []
    while messages := sqs.receive_message(
        QueueUrl=deployment.queue_url, MaxNumberOfMessages=10
    ).get("Messages", []):
        found += [json.loads(m["Body"]) for m in messages]
    return found


def groups() -> None:
    make_asg("batch-a", tags=opted_in("batch"), desired=1)
    make_asg("batch-b", tags=opted_in("batch"), desired=1)
    make_asg("jobs-nodes", tags=opted_in("jobs"), desired=1)
    make_asg("reports-nodes", tags=opted_in("reports"), desired=1)


def test_given_a_flood_of_unschedulable_pods_when_it_looks_for_a_minute_then_one_request_per_pending_pods_group(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer, output: Any
) -> None:
    deployment, path = fast()
    groups()
    api_server.cluster.put("nodes", node("ip-1", None))
    api_server.cluster.put("pods", pod("bound", "ip-1"))  # bound: not the fast path's
    for i in range(600):  # more than a page of 500
        api_server.cluster.put("pods", pod(f"burst-{i}"))

    result = run_one_minute(path)

    requests = queued(deployment)
    assert sorted(r["node_group"] for r in requests) == ["batch-a", "batch-b"]
    assert all(r["cause"] == "fast path: 600 new unschedulable pods" for r in requests)
    assert all(r["event_id"].startswith("fast-") for r in requests)
    assert result["looks"] > 1  # it went on looking: the same pods asked nothing more
    pod_lists = [r for r in api_server.requests if r.startswith("GET /api/v1/pods")]
    assert pod_lists and all(
        "fieldSelector=spec.nodeName%3D%2Cstatus.phase%3DPending" in r and "limit=500" in r
        for r in pod_lists
    )
    assert output().metric(MetricName.FAST_PATH_QUEUED) == [2]


def test_given_a_queue_group_that_counts_its_own_pending_pods_then_a_new_pod_asks_it_too(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer, policies: Path
) -> None:
    # Given the jobs policy as written, with no PendingPods metric: its group grows for its
    # own pending pods (`domain.scaling.own_pods`), and has no live node to rule a pod out
    (policies / "jobs.yaml").write_text(policy_document("jobs", queue_metric("jobs", 4)))
    deployment, path = fast()
    groups()
    api_server.cluster.put("pods", pod("worker-0"))
    run_one_minute(path)
    # Then the jobs group is asked with the PendingPods groups; reports (opted out) is not
    requested = sorted(r["node_group"] for r in queued(deployment))
    assert requested == ["batch-a", "batch-b", "jobs-nodes"]


def test_given_a_pending_pod_the_scheduler_has_not_marked_when_it_looks_then_nothing_is_asked(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer
) -> None:
    """Cluster Autoscaler acts only on pods the scheduler marked unschedulable (FAQ, "How
    does scale-up work?": /work/shared/reference, PodScheduled=False, Unschedulable)."""
    deployment, path = fast()
    groups()
    waiting = pod("just-created")
    waiting["status"]["conditions"] = []
    api_server.cluster.put("pods", waiting)

    run_one_minute(path)

    assert queued(deployment) == []


def test_given_new_pods_after_the_first_look_when_it_looks_again_then_the_groups_are_asked_again(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer
) -> None:
    deployment, path = fast()
    groups()
    api_server.cluster.put("pods", pod("first"))
    watch = path.watch()
    path.act(path.look(watch))
    path.act(path.look(watch))  # nothing new
    api_server.cluster.put("pods", pod("second"))
    path.clock.advance(seconds=10)  # type: ignore[attr-defined]  # the next slot

    path.act(path.look(watch))

    causes = [r["cause"] for r in queued(deployment)]
    assert causes == ["fast path: 1 new unschedulable pods"] * 4


def instance_of(group: str) -> str:
    described = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return str(described["AutoScalingGroups"][0]["Instances"][0]["InstanceId"])


def pools(api_server: KubeApiServer, *names: str) -> None:
    """Groups batch-<name>, each with one node labelled pool=<name> (of its own instance)."""
    for name in names:
        make_asg(f"batch-{name}", tags=opted_in("batch"), desired=1)
        provider = f"aws:///eu-west-1a/{instance_of(f'batch-{name}')}"
        labels = {"pool": name}
        api_server.cluster.put(
            "nodes", node(f"node-{name}", None, provider_id=provider, labels=labels)
        )


def for_pool(name: str, pool: str) -> dict[str, Any]:
    return pod(name, spec={"nodeSelector": {"pool": pool}})


def test_given_a_new_pod_only_some_groups_can_take_when_it_looks_then_only_those_are_asked(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer
) -> None:
    # Given two pending-pods groups whose nodes differ (pool=a, pool=b), and a pod for pool b
    deployment, path = fast()
    pools(api_server, "a", "b")
    api_server.cluster.put("pods", for_pool("render", "b"))

    # When it looks for a minute
    run_one_minute(path)

    # Then only batch-b, whose nodes could take it (the planner's test), is asked; the
    # nodes were read once, with the first new pod
    assert [r["node_group"] for r in queued(deployment)] == ["batch-b"]
    assert len([r for r in api_server.requests if r.startswith("GET /api/v1/nodes")]) == 1


def test_given_a_new_pod_every_5_seconds_for_one_of_5_groups_then_it_asks_that_group_6_times_a_minute(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer
) -> None:
    # Given five pending-pods groups, and a new pod every look (5 s) that only pool 0 takes
    deployment, path = fast()
    pools(api_server, "0", "1", "2", "3", "4")
    watch = path.watch()

    # When it looks for a minute, a pod arriving before each look
    for index in range(12):
        api_server.cluster.put("pods", for_pool(f"job-{index}", "0"))
        path.act(path.look(watch))
        path.clock.advance(seconds=5)  # type: ignore[attr-defined]

    # Then batch-0 alone is asked, at most once in 10 s, each request for all the pods new
    # since its last (the last pod waits for the next look): 6 requests, not 12 x 5
    causes = [(r["node_group"], r["cause"]) for r in queued(deployment)]
    assert (
        causes
        == [("batch-0", "fast path: 1 new unschedulable pods")]
        + [("batch-0", "fast path: 2 new unschedulable pods")] * 5
    )


def test_given_a_second_new_pod_within_10_seconds_then_it_is_asked_at_the_next_look_not_dropped(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer
) -> None:
    # Given a pod, asked for at a look
    deployment, path = fast()
    groups()
    watch = path.watch()
    api_server.cluster.put("pods", pod("first"))
    path.act(path.look(watch))

    # When another appears and it looks 3 s later, then 10 s after the first look
    api_server.cluster.put("pods", pod("second"))
    path.clock.advance(seconds=3)  # type: ignore[attr-defined]
    path.act(path.look(watch))
    path.clock.advance(seconds=7)  # type: ignore[attr-defined]
    path.act(path.look(watch))

    # Then each group is asked for each pod, once: the second request is neither dropped by
    # the FIFO queue as a duplicate of the first nor taken as asked meanwhile
    requests = sorted((r["node_group"], r["cause"]) for r in queued(deployment))
    once = "fast path: 1 new unschedulable pods"
    assert requests == [("batch-a", once)] * 2 + [("batch-b", once)] * 2


def test_given_a_message_sent_first_with_a_predictable_id_then_the_fast_paths_request_still_arrives(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer
) -> None:
    """Anyone allowed sqs:SendMessage on the evaluation queue could take an id made of the
    time alone (`fast-<10-s slot>`) first; SQS then accepts and drops ours for five
    minutes: https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-key-terms.html"""
    # Given a message sent to the evaluation queue for batch-a, with the id that a request
    # of this 10-s slot would have had
    deployment, path = fast()
    groups()
    api_server.cluster.put("pods", pod("waiting"))
    slot = int(path.clock.now().timestamp()) // 10
    taken = hashlib.sha256(f"batch-a\nfast-{slot}".encode()).hexdigest()
    deployment.clients.sqs.send_message(
        QueueUrl=deployment.queue_url,
        MessageBody="{}",
        MessageGroupId="batch-a",
        MessageDeduplicationId=taken,
    )

    # When it looks
    path.act(path.look(path.watch()))

    # Then its request for batch-a is queued all the same
    assert sorted(r.get("node_group", "(forged)") for r in queued(deployment)) == [
        "(forged)",
        "batch-a",
        "batch-b",
    ]


def test_given_sqs_refusing_one_groups_request_then_only_that_group_is_asked_again(
    fast: Callable[..., tuple[Deployment, FastPath]], api_server: KubeApiServer, output: Any
) -> None:
    # Given SQS refusing batch-a's request (a batch entry failed), once
    deployment, path = fast()
    groups()
    api_server.cluster.put("pods", pod("waiting"))
    refused: list[dict[str, Any]] = []

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if not refused:
            refused.extend(e for e in params["Entries"] if e["MessageGroupId"] == "batch-a")
            params["Entries"] = [e for e in params["Entries"] if e not in refused]

    def say_so(parsed: dict[str, Any], **_: Any) -> None:
        failed = [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError"} for e in refused]
        parsed["Failed"] = parsed.get("Failed", []) + failed

    events = deployment.clients.sqs.meta.events
    events.register("provide-client-params.sqs.SendMessageBatch", refuse)
    events.register_first("after-call.sqs.SendMessageBatch", say_so)
    watch = path.watch()

    # When it looks, and again after the slot
    first = path.act(path.look(watch))
    events.unregister("after-call.sqs.SendMessageBatch", say_so)
    path.clock.advance(seconds=10)  # type: ignore[attr-defined]
    path.act(path.look(watch))

    # Then batch-a is asked again, batch-b (taken the first time) is not; the first look
    # counts the one request SQS took
    assert first.send_error and "batch-a" in first.send_error
    report_fast_look(first, 0)
    assert output().metric(MetricName.FAST_PATH_QUEUED) == [1]
    assert sorted(r["node_group"] for r in queued(deployment)) == ["batch-a", "batch-b"]


def test_given_a_queue_past_its_target_when_it_looks_then_its_group_alone_is_asked(
    fast: Callable[..., tuple[Deployment, FastPath]],
) -> None:
    deployment, path = fast()
    groups()
    fill_queue("jobs", 20)  # 4 a node: 5 nodes, the group has 1
    fill_queue("reports", 4)  # on target: nothing to ask

    run_one_minute(path)

    requests = queued(deployment)
    assert [r["node_group"] for r in requests] == ["jobs-nodes"]
    assert requests[0]["cause"] == "fast path: queue jobs holds 20, asks for 5 nodes (desired 1)"


def test_given_a_queue_within_the_tolerance_when_it_looks_then_nothing_is_asked(
    fast: Callable[..., tuple[Deployment, FastPath]],
) -> None:
    deployment, path = fast()
    make_asg("jobs-nodes", tags=opted_in("jobs"), desired=10)
    fill_queue("jobs", 42)  # 1.05 of target: within the HPA's 10 % tolerance

    run_one_minute(path)

    assert queued(deployment) == []


def test_given_a_deleted_queue_when_it_looks_then_it_is_named_counted_and_the_others_still_read(
    fast: Callable[..., tuple[Deployment, FastPath]], output: Any
) -> None:
    deployment, path = fast()
    groups()
    sqs = client("sqs")
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName="reports")["QueueUrl"])
    fill_queue("jobs", 20)

    run_one_minute(path)

    assert [r["node_group"] for r in queued(deployment)] == ["jobs-nodes"]
    printed = output()
    assert any(
        "node group reports-nodes: queue reports" in m and "NonExistentQueue" in m
        for m in printed.messages("ERROR")
    )
    assert printed.metric(MetricName.FAST_PATH_QUEUES_GONE)
    assert not slept or max(slept) == path.interval_seconds  # not a reason to back off


@pytest.mark.parametrize("fault", [Fault.DOWN, Fault.SLOW])
def test_given_the_api_server_failing_when_it_looks_then_it_backs_off_asks_nothing_and_the_tick_runs(
    fast: Callable[..., tuple[Deployment, FastPath]],
    api_server: KubeApiServer,
    output: Any,
    fault: Fault,
) -> None:
    deployment, path = fast()
    groups()
    api_server.cluster.put("pods", pod("waiting"))
    api_server.slow_seconds = 2.0  # past the fast path's 0.5 s

    with api_server.failing(fault):
        run_one_minute(path)

    assert queued(deployment) == []  # no storm: nothing is known, nothing is asked
    assert slept == sorted(slept) and slept[-1] > slept[0]  # waits grow
    printed = output()
    assert any("backing off" in m for m in printed.messages("WARNING"))
    assert printed.metric(MetricName.FAST_PATH_FAILURES)
    deployment.tick()  # the minute tick is the fast path's fallback: it still decides
    assert "batch-a" in {line.get("node_group") for line in output().logs}


def test_given_sqs_throttling_when_it_looks_then_it_backs_off(
    fast: Callable[..., tuple[Deployment, FastPath]], output: Any
) -> None:
    """SQS answers a throttled request 400 ThrottlingException:
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/CommonErrors.html"""
    once = Config(retries={"mode": "standard", "max_attempts": 1})  # no real sleeps
    clients = wiring.AwsClients(boto3.Session(region_name=REGION), config=once)
    deployment, path = fast(clients)
    groups()
    fill_queue("jobs", 20)

    def throttle(**_: Any) -> tuple[Any, dict[str, Any]]:
        error = {"Code": "ThrottlingException", "Message": "Rate exceeded"}
        metadata = {"HTTPStatusCode": 400, "HTTPHeaders": {}}
        return AWSResponse("https://aws.invalid/", 400, {}, None), {
            "Error": error,
            "ResponseMetadata": metadata,
        }

    clients.sqs.meta.events.register_first("before-call.sqs.GetQueueAttributes", throttle, "t")
    run_one_minute(path)

    assert slept == sorted(slept) and slept[-1] > slept[0]
    assert output().metric(MetricName.FAST_PATH_FAILURES)
    assert all(r["node_group"] != "jobs-nodes" for r in queued(deployment))


# --- a backlog as Prometheus records it: the policy's instant query, each look ------------

WORKSPACE = "ws-0a1b2c3d-4e5f-6789-abcd-ef0123456789"


def prometheus_policy(name: str) -> str:
    """One node per 4 jobs of `name` waiting, as its exporter's gauge in an AMP workspace."""
    query = {"workspace": WORKSPACE, "query": f'sum(jobs_waiting{{queue="{name}"}})'}
    backlog = {"type": "Prometheus", "prometheus": query}
    return policy_document(name, backlog | {"target": {"type": "AverageValue", "averageValue": 4}})


@pytest.fixture(scope="module")
def prometheus() -> Iterator[tuple[PrometheusServer, GaugeTarget]]:
    """A real Prometheus server scraping the exporters' gauges: render's backlog past its
    target (20 jobs, 4 a node, 1 node), thumbs' on it (4)."""
    try:
        with prometheus_scraping() as (server, target):
            target.set("jobs_waiting", 20, queue="render")
            target.set("jobs_waiting", 4, queue="thumbs")
            server.wait_for('jobs_waiting{queue="render"}', 20)
            server.wait_for('jobs_waiting{queue="thumbs"}', 4)
            yield server, target
    except PrometheusMissingError as missing:
        pytest.fail(str(missing), pytrace=False)


def with_prometheus_policies(policies: Path, amp_endpoint: str) -> wiring.AwsClients:
    """Render's and thumbs' groups, their policies scaling on Prometheus queries of an AMP
    workspace that `amp_endpoint` answers for (SigV4-signed, as AMP's query API wants:
    https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-onboard-query-APIs.html)."""
    for name in ("render", "thumbs"):
        (policies / f"{name}.yaml").write_text(prometheus_policy(name))
        make_asg(f"{name}-nodes", tags=opted_in(name), desired=1)
    once = Config(retries={"mode": "standard", "max_attempts": 1})
    session = boto3.Session(region_name=REGION)
    return wiring.AwsClients(session, config=once, amp_endpoint_url=amp_endpoint)


def test_given_a_prometheus_backlog_past_its_target_when_it_looks_once_then_its_group_alone_is_asked(
    fast: Callable[..., tuple[Deployment, FastPath]],
    policies: Path,
    prometheus: tuple[PrometheusServer, GaugeTarget],
) -> None:
    clients = with_prometheus_policies(policies, prometheus[0].address)
    deployment, path = fast(clients)

    look = path.act(path.look(path.watch()))

    requests = queued(deployment)
    assert [r["node_group"] for r in requests] == ["render-nodes"]  # thumbs is on target
    assert requests[0]["cause"] == (
        "fast path: Prometheus query 'sum(jobs_waiting{queue=\"render\"})' holds 20, "
        "asks for 5 nodes (desired 1)"
    )
    assert not look.failed


def test_given_a_prometheus_backlog_on_its_target_when_it_looks_for_a_minute_then_nothing_is_asked(
    fast: Callable[..., tuple[Deployment, FastPath]],
    policies: Path,
    prometheus: tuple[PrometheusServer, GaugeTarget],
) -> None:
    clients = with_prometheus_policies(policies, prometheus[0].address)
    (policies / "render.yaml").unlink()  # render's backlog is past its target: not watched
    deployment, path = fast(clients)

    result = run_one_minute(path)

    assert queued(deployment) == []
    assert result["looks"] > 1
    assert not slept or max(slept) == path.interval_seconds  # no failure: no backoff


def test_given_prometheus_down_when_it_looks_then_it_backs_off_counts_and_asks_nothing(
    fast: Callable[..., tuple[Deployment, FastPath]], policies: Path, output: Any
) -> None:
    clients = with_prometheus_policies(policies, f"http://127.0.0.1:{free_port()}")  # closed
    deployment, path = fast(clients)

    run_one_minute(path)

    assert queued(deployment) == []  # no storm: nothing is known, nothing is asked
    assert slept == sorted(slept) and slept[-1] > slept[0]  # waits grow
    printed = output()
    assert any(
        "node group render-nodes: Prometheus query" in m and "unreachable" in m
        for m in printed.messages("WARNING")
    )
    assert any("backing off" in m for m in printed.messages("WARNING"))
    assert printed.metric(MetricName.FAST_PATH_FAILURES)


def test_given_an_eks_managed_group_when_it_looks_then_it_asks_eks_nothing_its_role_refuses(
    fast: Callable[..., tuple[Deployment, FastPath]],
    api_server: KubeApiServer,
    calls: CallCounter,
) -> None:
    """The fast path's role holds no eks:DescribeNodegroup (infra/fast_path.py): a managed
    group's scalingConfig is evaluate's to read, and each call would be refused."""
    # Given an EKS managed node group whose policy reads pending pods, and a pending pod
    deployment, path = fast()
    eks_node_group("prod", "batch")
    managed = {"eks:cluster-name": "prod", "eks:nodegroup-name": "batch"}
    make_asg("batch-a", tags=opted_in("batch") | managed, desired=1)
    api_server.cluster.put("pods", pod("burst-0"))

    # When it looks for a minute
    run_one_minute(path)

    # Then the group is asked for, and EKS was never called
    assert [r["node_group"] for r in queued(deployment)] == ["batch-a"]
    assert calls.calls["DescribeNodegroup"] == 0

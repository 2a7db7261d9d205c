"""Capacity reservation read through the real `kubernetes` client from the loopback API
server: paging, group membership, and every way it can fail without a scale-in."""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
from kubernetes.client import CoreV1Api
from nodescaler.adapters.k8s.connection import EksConnection, KubeconfigConnection, eks_token
from nodescaler.adapters.k8s.core_api import CoreApi, KubernetesCluster
from nodescaler.deadline import RECORDING_MARGIN, Deadline
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable
from nodescaler.errors import KubernetesUnavailableError, OutOfTimeError
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler_sandbox.kube.apiserver import Cluster, Fault, KubeApiServer

from tests.builders import T0, VirtualClock, metric, reservation_metric
from tests.drip import Drip
from tests.kube import cluster_of, kubeconfig, node, pod

GROUP_A = NodeGroup("asg-a", 1, 0, 10, 1, eks_cluster="prod", eks_nodegroup="a")
CPU_60 = metric(reservation_metric("cpu", 60))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[KubeApiServer, KubernetesClusterView]]:
    server = KubeApiServer(Cluster(), token="secret")
    with server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kubeconfig", server.url))
        yield server, KubernetesClusterView(KubernetesCluster(connection))


def test_the_reference_example_reads_68_75_percent_of_cpu_reserved(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    server, metrics = served
    server.cluster.put("nodes", node("a-1", "a"))
    for i in range(11):
        server.cluster.put("pods", pod(f"p{i}", "a-1"))
    reading = metrics.read(CPU_60, GROUP_A, T0)
    assert isinstance(reading, MetricReading)
    assert (reading.value, reading.detail) == (
        68.75,
        "11 pods request 11 of 16 cores on 1 nodes (68.8%)",
    )


def test_nodes_without_the_eks_label_belong_by_instance_id(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    server, metrics = served
    server.cluster.put("nodes", node("n1", None, provider_id="aws:///eu-west-1a/i-0abc"))
    server.cluster.put("nodes", node("n2", None, provider_id="aws:///eu-west-1a/i-0def"))
    server.cluster.put("pods", pod("p", "n1", cpu="4"))
    server.cluster.put("pods", pod("q", "n2", cpu="8"))
    plain = NodeGroup("asg-plain", 1, 0, 10, 1, instance_ids=frozenset({"i-0abc"}))
    reading = metrics.read(CPU_60, plain, T0)
    assert isinstance(reading, MetricReading) and reading.value == 25.0


def test_pods_are_read_in_pages_of_500_and_one_snapshot_serves_a_batch(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    server, metrics = served
    for n in range(10):
        server.cluster.put("nodes", node(f"a-{n}", "a"))
    for i in range(1200):
        server.cluster.put("pods", pod(f"p{i}", f"a-{i % 10}", cpu="100m"))
    first = metrics.read(CPU_60, GROUP_A, T0)
    again = metrics.read(CPU_60, GROUP_A, T0 + timedelta(seconds=5))
    assert isinstance(first, MetricReading) and first.value == 75.0  # 120 cores of 160
    assert first.measured_nodes == 10  # the proportional rule scales what it measured
    assert again == first.model_copy(update={"at": T0 + timedelta(seconds=5)})
    pod_pages = [r for r in server.requests if r.startswith("GET /api/v1/pods")]
    assert len(pod_pages) == 3
    assert "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed" in pod_pages[0]


def test_a_pod_with_an_unparsable_request_makes_only_its_groups_reading_unavailable(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    server, metrics = served
    server.cluster.put("nodes", node("a-1", "a"))
    server.cluster.put("nodes", node("b-1", "b"))
    server.cluster.put("pods", pod("bad", "a-1", cpu="12x"))
    server.cluster.put("pods", pod("good", "b-1", cpu="8"))
    broken = metrics.read(CPU_60, GROUP_A, T0)
    fine = metrics.read(CPU_60, NodeGroup("asg-b", 1, 0, 10, 1, eks_nodegroup="b"), T0)
    assert broken == MetricUnavailable(
        reason="node group asg-a: pod default/bad: resources.requests: '12x' is not a quantity"
    )
    assert isinstance(fine, MetricReading) and fine.value == 50.0


def test_a_group_with_no_ready_schedulable_node_has_no_reading(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    server, metrics = served
    server.cluster.put("nodes", node("a-1", "a", ready=False))
    server.cluster.put("nodes", node("a-2", "a", unschedulable=True))
    assert metrics.read(CPU_60, GROUP_A, T0) == MetricUnavailable(
        reason="node group asg-a: no Ready, schedulable node is registered"
    )


def test_a_group_at_zero_nodes_reads_nothing_requested_not_a_missing_metric(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    # (a GPU group waiting at zero is not a broken metric: its dashboards stay quiet)
    _, metrics = served
    at_zero = NodeGroup("asg-a", 0, 0, 10, 0, eks_nodegroup="a")
    reading = metrics.read(CPU_60, at_zero, T0)
    assert isinstance(reading, MetricReading) and reading.value == 0
    assert reading.detail == "asg-a is at zero nodes"


def test_a_401_renews_the_credentials_once_then_reports_the_group_unavailable(
    tmp_path: Path,
) -> None:
    with KubeApiServer(cluster_of(("nodes", node("a-1", "a"))), token="secret") as server:
        wrong = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url, token="stale"))
        reading = KubernetesClusterView(KubernetesCluster(wrong)).read(CPU_60, GROUP_A, T0)
    assert reading == MetricUnavailable(reason="Kubernetes API: 401 Unauthorized")
    assert len([r for r in server.requests if r.startswith("GET /api/v1/nodes")]) == 2


def test_an_unreachable_api_server_reports_the_group_unavailable(tmp_path: Path) -> None:
    with KubeApiServer() as server:
        url = server.url
    connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", url))
    reading = KubernetesClusterView(KubernetesCluster(connection)).read(CPU_60, GROUP_A, T0)
    assert isinstance(reading, MetricUnavailable)
    assert reading.reason.startswith("Kubernetes API unreachable:")


def test_a_server_answering_late_is_given_up_on_at_the_timeout_and_asked_once_per_batch(
    tmp_path: Path,
) -> None:
    """Given an API server that answers 5 s late, when a group's metric is read twice and its
    protection once within a batch, with a 0.2 s timeout, then every read says it timed out,
    and the server was asked once: not again by the client, nor by the next reads."""
    with KubeApiServer(cluster_of(("nodes", node("a-1", "a")))) as server:
        server.slow_seconds = 5
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
        metrics = KubernetesClusterView(KubernetesCluster(connection, timeout_seconds=0.2))
        with server.failing(Fault.SLOW):
            readings = [metrics.read(CPU_60, GROUP_A, T0 + timedelta(seconds=s)) for s in (0, 5)]
            protected = metrics.protected(GROUP_A, T0 + timedelta(seconds=10))
        assert server.faulted[Fault.SLOW] == 1
        # Then, the batch over, the cluster is listed afresh.
        again = metrics.read(CPU_60, GROUP_A, T0 + timedelta(seconds=20))
    assert all(
        isinstance(r, MetricUnavailable) and "no answer within 0.2s" in r.reason for r in readings
    ), readings
    assert protected is None  # scale-in protection unknown: nothing changes
    assert isinstance(again, MetricReading)


def invocation_with(seconds_left: float) -> Deadline:
    """An evaluate invocation with `seconds_left` to work in (its clock standing still)."""
    deadline = Deadline(monotonic=lambda: 100.0)
    deadline.start(int((seconds_left + RECORDING_MARGIN) * 1000))
    return deadline


def test_given_an_invocation_nearly_out_of_time_a_late_server_is_given_up_on_by_its_end(
    tmp_path: Path,
) -> None:
    """Given kubernetesTimeoutSeconds of 5 but half a second left of the invocation, when a
    group's metric is read from a server answering late, then the read ends with the
    invocation's time, not its own five seconds: out of time, the evaluation tried again
    by a later invocation, never a metric failure (which would count towards a fallback)."""
    with KubeApiServer(cluster_of(("nodes", node("a-1", "a")))) as server:
        server.slow_seconds = 30
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
        cluster = KubernetesCluster(connection, timeout_seconds=5, deadline=invocation_with(0.5))
        with server.failing(Fault.SLOW), pytest.raises(OutOfTimeError) as raised:
            KubernetesClusterView(cluster).read(CPU_60, GROUP_A, T0)
    assert "Kubernetes API: no answer within 0.5s (the invocation's time left)" in str(raised.value)


def test_given_an_invocation_out_of_time_the_cluster_is_not_asked_and_it_is_out_of_time(
    tmp_path: Path,
) -> None:
    with KubeApiServer(cluster_of(("nodes", node("a-1", "a")))) as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.url))
        cluster = KubernetesCluster(connection, timeout_seconds=5, deadline=invocation_with(0))
        with pytest.raises(OutOfTimeError) as raised:
            KubernetesClusterView(cluster).read(CPU_60, GROUP_A, T0)
        asked = list(server.requests)
    assert "Kubernetes API: not asked, the invocation has no time left" in str(raised.value)
    assert asked == []


# --- EKS authentication ---------------------------------------------------------------


def sts() -> object:
    session = boto3.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="eu-west-1"
    )
    return session.client("sts", endpoint_url="https://sts.eu-west-1.amazonaws.com")


def test_the_eks_token_is_a_presigned_get_caller_identity_bound_to_the_cluster() -> None:
    token = eks_token(sts(), "prod")
    assert token.startswith("k8s-aws-v1.")
    encoded = token.removeprefix("k8s-aws-v1.")
    url = urlparse(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode())
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert url.hostname == "sts.eu-west-1.amazonaws.com"
    assert query["Action"] == "GetCallerIdentity"
    assert query["X-Amz-Expires"] == "60"
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"].split(";")


def sent(configuration: Any) -> str:
    """The Authorization header the client sends with this configuration."""
    return str(configuration.auth_settings()["BearerToken"]["value"])


class FakeEks:
    def __init__(self) -> None:
        self.describes = 0

    def describe_cluster(self, name: str) -> dict[str, object]:
        self.describes += 1
        ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
        return {
            "cluster": {
                "endpoint": f"https://{name}.eks.example",
                "certificateAuthority": {"data": ca},
            }
        }


def test_the_eks_connection_describes_the_cluster_once_and_renews_the_token_after_14_minutes() -> (
    None
):
    clock = VirtualClock()
    eks = FakeEks()
    connection = EksConnection(eks, sts(), "prod", clock)
    configuration = connection.api().configuration
    first = sent(configuration)
    clock.advance(minutes=13)
    assert sent(configuration) == first
    clock.advance(minutes=1)
    renewed = sent(configuration)
    connection.renew()
    forced = sent(configuration)
    assert first.startswith("Bearer k8s-aws-v1.")
    assert configuration.host == "https://prod.eks.example"
    assert (eks.describes, connection.api().configuration is configuration) == (1, True)
    assert renewed.startswith("Bearer k8s-aws-v1.") and forced.startswith("Bearer k8s-aws-v1.")


def test_given_a_cluster_eks_does_not_know_then_its_metrics_are_missing_not_an_error() -> None:
    # Given a deployment naming a cluster EKS (moto's) has never heard of
    from tests.aws import client

    connection = EksConnection(client("eks"), sts(), "my-cluster", VirtualClock())
    metrics = KubernetesClusterView(KubernetesCluster(connection, timeout_seconds=1))
    # When the group's reservation is read
    reading = metrics.read(CPU_60, GROUP_A, T0)
    # Then it reads as missing, naming the cluster and EKS's answer: no scale-in on it, the
    # group's other metrics still decide, and the evaluation is not failed and retried
    assert isinstance(reading, MetricUnavailable)
    assert reading.reason.startswith("EKS cluster my-cluster: ResourceNotFoundException: ")


def test_nodes_of_no_known_group_are_left_out_and_break_nothing(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    server, metrics = served
    server.cluster.put("nodes", node("a-1", "a"))
    server.cluster.put("nodes", node("stray", None, provider_id="aws:///eu-west-1a/i-unknown"))
    server.cluster.put("nodes", node("bare-metal", None, provider_id=""))
    server.cluster.put("pods", pod("p", "a-1", cpu="8"))
    server.cluster.put("pods", pod("q", "stray", cpu="16"))
    reading = metrics.read(CPU_60, GROUP_A, T0)
    assert isinstance(reading, MetricReading) and reading.value == 50.0


def test_an_answer_that_is_not_what_the_api_sends_names_the_field_and_holds_the_group(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    server, metrics = served
    server.cluster.put("nodes", node("a-1", "a"))
    server.cluster.put("pods", pod("p", "a-1") | {"spec": {"nodeName": "a-1", "priority": "high"}})
    assert metrics.read(CPU_60, GROUP_A, T0) == MetricUnavailable(
        reason="Kubernetes API: unexpected answer: Expected `int`, got `str` - at "
        "`$.items[0].spec.priority`"
    )


def test_given_sidecars_and_a_pod_long_past_its_deletion_then_the_reservation_counts_as_kubernetes(
    served: tuple[KubeApiServer, KubernetesClusterView],
) -> None:
    # native sidecars add to the app's requests (kubernetes.io/docs/concepts/workloads/pods/
    # sidecar-containers/#resource-sharing-within-containers); a pod deleted past its grace
    # period (and CA's 30 s, utils/drain/drain.go IsPodLongTerminating) is no request
    server, metrics = served
    server.cluster.put("nodes", node("a-1", "a"))
    proxy = {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    server.cluster.put("pods", pod("meshed", "a-1", cpu="2", spec={"initContainers": [proxy]}))
    stuck = pod("stuck", "a-1", cpu="8", spec={"terminationGracePeriodSeconds": 30})
    stuck["metadata"]["deletionTimestamp"] = (T0 - timedelta(seconds=61)).isoformat()
    server.cluster.put("pods", stuck)
    reading = metrics.read(CPU_60, GROUP_A, T0)
    assert isinstance(reading, MetricReading)
    assert reading.detail == "1 pods request 3 of 16 cores on 1 nodes (18.8%)"


@pytest.mark.parametrize("where", ["headers", "body"])
def test_given_an_api_server_dripping_its_answer_then_the_read_ends_at_its_whole_deadline(
    tmp_path: Path, where: str
) -> None:
    # Given an API server sending a byte every 0.2 s (2,000 s in all), and a 1 s timeout
    with Drip(where, b'{"kind": "NodeList", "items": []}') as server:
        connection = KubeconfigConnection(kubeconfig(tmp_path / "kc", server.address))
        metrics = KubernetesClusterView(KubernetesCluster(connection, timeout_seconds=1))
        # When the group's reservation is read
        reading = metrics.read(CPU_60, GROUP_A, T0)
    # Then it is missing at the whole answer's deadline, not held at each byte's
    assert isinstance(reading, MetricUnavailable), reading
    assert "Kubernetes API: no answer within 1s" in reading.reason


def test_given_an_api_server_whose_refusal_holds_terminal_escapes_then_the_error_holds_none(
    tmp_path: Path,
) -> None:
    # Given an API server answering 500 with a reason phrase that clears the screen
    class Refusing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(500, "Internal \x1b[2J\x1b]0;owned\x07Error")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"http://127.0.0.1:{server.server_address[1]}"
        api = CoreApi(KubeconfigConnection(kubeconfig(tmp_path / "kc", address)))
        # When nodes are listed
        with pytest.raises(KubernetesUnavailableError) as refused:
            api.answer(CoreV1Api.list_node)
    finally:
        server.shutdown()
        server.server_close()
    # Then the error (logged, and a reading's reason) names the refusal on one clean line
    assert str(refused.value) == "Kubernetes API: 500 Internal [2J ]0;owned Error"

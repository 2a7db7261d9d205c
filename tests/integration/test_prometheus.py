"""The Prometheus metric against a real Prometheus server (Debian's 2.42) on loopback,
scraping gauges this test serves: the answers it accepts, those it refuses, the server's
own errors, a port that does not answer, a slow endpoint, a bearer token from Secrets
Manager (moto) and AMP's SigV4 (checked by recomputing the signature with botocore).

No server installed is a failure saying how to install it, never a skip."""

from __future__ import annotations

import hmac
import io
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from nodescaler.adapters import prometheus as prometheus_adapter
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.adapters.prometheus import PrometheusQueries
from nodescaler.deadline import Deadline
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.policy import PrometheusMetric, SqsQueueMetric
from nodescaler.domain.scaling.decision import MetricStatus
from nodescaler.domain.scaling.readings import (
    MetricReading,
    MetricRefused,
    MetricUnavailable,
    Reading,
)
from nodescaler.domain.token_origins import TokenOrigins, origin
from nodescaler.errors import OutOfTimeError, PrometheusUnavailableError
from nodescaler.service.evaluation import Evaluator, Outcome
from nodescaler.service.policy_resolver import PolicyBook
from nodescaler.service.producers import Producers
from nodescaler_cli.main import main
from nodescaler_sandbox.moto_server import free_port
from nodescaler_sandbox.prometheus import (
    GaugeTarget,
    PrometheusMissingError,
    PrometheusServer,
    prometheus_scraping,
)

from tests.aws import (
    DYNAMODB_ITEM_LIMIT,
    REGION,
    CallCounter,
    client,
    desired_capacity,
    fill_queue,
    make_asg,
    make_state_table,
    state_item_bytes,
)
from tests.builders import T0, VirtualClock, metric, policy, queue_metric
from tests.drip import Drip

GROUP = NodeGroup(name="ng", desired=1, min_size=0, max_size=10, in_service=1)
KEY, SECRET = "AKIDPROMETHEUSTEST", "prometheus-test-secret-key"
WORKSPACE = "ws-0a1b2c3d-4e5f-6789-abcd-ef0123456789"
TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def prometheus() -> Iterator[tuple[PrometheusServer, GaugeTarget]]:
    try:
        with prometheus_scraping() as (server, target):
            target.set("queue_depth", 12, queue="jobs")
            for deployment, replicas in {"api": 1, "web": 2, "worker": 3}.items():
                target.set("deployment_replicas", replicas, deployment=deployment)
            server.wait_for("queue_depth", 12)
            server.wait_for('deployment_replicas{deployment="worker"}', 3)
            yield server, target
    except PrometheusMissingError as missing:
        pytest.fail(str(missing), pytrace=False)


@pytest.fixture
def server(prometheus: tuple[PrometheusServer, GaugeTarget]) -> PrometheusServer:
    return prometheus[0]


def queries(**options: Any) -> PrometheusQueries:
    return PrometheusQueries(
        region=REGION,
        credentials=lambda: Credentials(KEY, SECRET),
        secrets=lambda: client("secretsmanager"),
        **options,
    )


def prometheus_metric(query: str, **source: Any) -> PrometheusMetric:
    built = metric(
        {
            "type": "Prometheus",
            "prometheus": {"query": query, **source},
            "target": {"type": "AverageValue", "averageValue": 4},
        }
    )
    assert isinstance(built, PrometheusMetric)
    return built


def read(query: str, producer: PrometheusQueries | None = None, **source: Any) -> Reading:
    return (producer or queries()).read(prometheus_metric(query, **source), GROUP, T0)


def refusal(reading: Reading) -> str:
    assert isinstance(reading, MetricUnavailable), reading
    return reading.reason


# --- answers: one number, or a named refusal --------------------------------------------


@pytest.mark.parametrize(
    ("query", "value", "shape"),
    [
        ("scalar(queue_depth)", 12, "scalar"),
        ("queue_depth", 12, 'series {__name__="queue_depth", instance='),
        ("sum(deployment_replicas)", 6, "series {}"),
        ('deployment_replicas{deployment="web"}', 2, 'deployment="web"'),
        ("queue_depth[10s]", 12, "series {__name__="),  # a matrix: its last sample
        ("2 * 3", 6, "scalar"),
    ],
)
def test_given_a_query_with_one_number_then_the_reading_is_it(
    server: PrometheusServer, query: str, value: float, shape: str
) -> None:
    reading = read(query, serverAddress=server.address)
    assert isinstance(reading, MetricReading), reading
    assert (reading.value, reading.at) == (value, T0)
    assert shape in (reading.detail or "")


@pytest.mark.parametrize(
    ("query", "came_back"),
    [
        ("deployment_replicas", "a vector of 3 series"),
        ("deployment_replicas[10s]", "a matrix of 3 series"),
        ("no_such_metric", "no data (an empty vector)"),
        ("vector(NaN)", "NaN (series {}), not a finite number"),
        ("scalar(vector(+Inf))", "+Inf (scalar), not a finite number"),
        ("-Inf", "-Inf (scalar), not a finite number"),
        ('"hello"', "a string ('hello'), not a number"),
        ("sum(", "query refused as malformed (HTTP 400: invalid parameter"),
    ],
)
def test_given_a_query_without_one_finite_number_then_the_reading_is_missing_naming_both(
    server: PrometheusServer, query: str, came_back: str
) -> None:
    reason = refusal(read(query, serverAddress=server.address))
    assert reason.startswith(f"Prometheus query {query!r} at {server.address}: ")
    assert came_back in reason


def test_given_a_syntax_error_then_the_servers_parse_error_is_quoted(
    server: PrometheusServer,
) -> None:
    reason = refusal(read("sum(rate(x[1m])", serverAddress=server.address))
    assert "HTTP 400" in reason and "parse error" in reason


# --- endpoints that fail ------------------------------------------------------------------


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Check = Callable[[Received], tuple[int, str] | None]


class Gate:
    """A loopback endpoint in front of the real server: `check` refuses a request (a status
    and a body) or lets it through to `upstream`'s query API."""

    def __init__(self, check: Check, upstream: str | None = None) -> None:
        self.received: list[Received] = []
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                request = Received(
                    "POST", self.path, dict(self.headers.items()), self.rfile.read(length)
                )
                gate.received.append(request)
                status, body = check(request) or gate.forward(request)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(body.encode())
                except OSError:  # the client gave up (the slow endpoint)
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.upstream = upstream
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def forward(self, request: Received) -> tuple[int, str]:
        assert self.upstream is not None
        upstream = urllib.request.Request(
            f"{self.upstream}/api/v1/query",
            data=request.body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        with urllib.request.urlopen(upstream, timeout=10) as response:
            return response.status, response.read().decode()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def gates() -> Iterator[Callable[..., Gate]]:
    opened: list[Gate] = []

    def open_gate(check: Check, upstream: str | None = None) -> Gate:
        opened.append(Gate(check, upstream))
        return opened[-1]

    yield open_gate
    for gate in opened:
        gate.close()


def test_given_a_port_nothing_listens_on_then_the_reading_is_missing_as_unreachable() -> None:
    address = f"http://127.0.0.1:{free_port()}"
    reason = refusal(read("up", serverAddress=address))
    assert reason.startswith(f"Prometheus query 'up' at {address}: unreachable (")


def test_given_an_endpoint_slower_than_the_timeout_then_the_reading_is_missing_naming_it(
    gates: Callable[..., Gate],
) -> None:
    released = threading.Event()

    def stall(request: Received) -> tuple[int, str]:
        released.wait(timeout=30)  # bounded: the test releases it as soon as it has its answer
        return 503, "{}"

    gate = gates(stall)
    try:
        reason = refusal(read("up", serverAddress=gate.address, timeoutSeconds=0.3))
    finally:
        released.set()
    assert reason == (
        f"Prometheus query 'up' at {gate.address}: no answer within its 0.3s deadline "
        "(timeoutSeconds)"
    )


def test_given_a_slow_endpoint_then_the_other_groups_of_the_batch_are_not_held_by_it(
    gates: Callable[..., Gate], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an endpoint that does not answer, and one producer (a warm container's)
    released = threading.Event()

    def stall(request: Received) -> tuple[int, str]:
        released.wait(timeout=30)  # bounded: released when the test ends
        return 503, "{}"

    gate = gates(stall)
    producer, clock = queries(), [1000.0]
    monkeypatch.setattr(prometheus_adapter.time, "monotonic", lambda: clock[0])
    try:
        # When ten groups read it in one batch
        reasons = [
            refusal(read("up", producer, serverAddress=gate.address, timeoutSeconds=0.3))
            for _ in range(10)
        ]
        # Then it was asked once: the others are told at once why it is not asked again
        assert len(gate.received) == 1
        assert reasons[1].endswith(
            "no answer within its 0.3s deadline (timeoutSeconds), 30s ago at most: "
            "not asked again yet"
        )
        # And the next tick asks it again
        clock[0] += 31
        refusal(read("up", producer, serverAddress=gate.address, timeoutSeconds=0.3))
        assert len(gate.received) == 2
    finally:
        released.set()


def test_given_a_cap_on_its_queries_then_a_slow_endpoint_is_given_up_on_at_the_cap(
    gates: Callable[..., Gate],
) -> None:
    """The fast path's looks stay light: its producer gives each query at most its cap,
    however long the policy's timeoutSeconds."""
    released = threading.Event()

    def stall(request: Received) -> tuple[int, str]:
        released.wait(timeout=30)  # bounded: released when the test ends
        return 503, "{}"

    gate = gates(stall)
    try:
        reading = read("up", queries(max_seconds=0.3), serverAddress=gate.address)
        assert refusal(reading).endswith("no answer within its 0.3s deadline (timeoutSeconds)")
    finally:
        released.set()


def test_given_a_throttled_query_then_it_is_unavailable_not_refused() -> None:
    error = prometheus_adapter._http_error(
        urllib.error.HTTPError("http://amp", 429, "Too Many Requests", None, None)  # type: ignore[arg-type]
    )
    assert isinstance(error, PrometheusUnavailableError) and not error.unreachable


def test_given_an_error_whose_body_nests_past_the_parsers_recursion_then_it_is_named() -> None:
    body = io.BytesIO(b"[" * 4096)  # all of the body read: a RecursionError, no ValueError
    error = prometheus_adapter._http_error(
        urllib.error.HTTPError("http://amp", 502, "Bad Gateway", None, body)  # type: ignore[arg-type]
    )
    assert isinstance(error, PrometheusUnavailableError) and "HTTP 502: [[[" in str(error)


def test_given_a_server_error_then_the_reading_is_missing_naming_the_status(
    gates: Callable[..., Gate],
) -> None:
    gate = gates(lambda request: (503, '{"status":"error","error":"query queue full"}'))
    reason = refusal(read("up", serverAddress=gate.address))
    assert reason.endswith("server error (HTTP 503: query queue full)")


@pytest.mark.parametrize(
    ("answer", "came_back"),
    [
        ("<html>proxy error</html>", "an answer not shaped as Prometheus's query API: <html>"),
        ('{"status":"success","data":{}}', "an answer not shaped as Prometheus's query API"),
        (
            '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[]}]}}',
            "no data (a series with no sample)",
        ),
        (
            '{"status":"success","data":{"resultType":"histogram","result":[]}}',
            "a result of type 'histogram', not a number",
        ),
        (
            '{"status":"success","data":{"resultType":"scalar","result":[1, "twelve"]}}',
            "an answer not shaped as Prometheus's query API",
        ),
        ("[" * 5_000, "an answer not shaped as Prometheus's query API: [[["),  # RecursionError
    ],
)
def test_given_an_answer_not_shaped_as_prometheus_then_the_reading_is_missing_naming_it(
    gates: Callable[..., Gate], answer: str, came_back: str
) -> None:
    gate = gates(lambda request: (200, answer))
    assert came_back in refusal(read("up", serverAddress=gate.address))


def test_given_an_answer_of_thousands_of_series_then_it_is_refused_unread(
    gates: Callable[..., Gate],
) -> None:
    series = [{"metric": {"i": str(i)}, "value": [1, "1"]} for i in range(30_000)]
    answer = json.dumps({"status": "success", "data": {"resultType": "vector", "result": series}})
    gate = gates(lambda request: (200, answer))
    reason = refusal(read("up", serverAddress=gate.address))
    assert reason.endswith(
        "an answer over 1,000,000 bytes (many series), where a metric needs one number"
    )


# --- a bearer token from Secrets Manager ------------------------------------------------


def bearer(token: str) -> Check:
    def check(request: Received) -> tuple[int, str] | None:
        if request.headers.get("Authorization") != f"Bearer {token}":
            return 401, '{"status":"error","error":"bad or missing bearer token"}'
        return None

    return check


def deployed_for(gate: Gate, *secrets: str) -> TokenOrigins:
    """The allow-list of a deployment whose policies send these secrets' tokens to `gate`."""
    return frozenset((secret, origin(gate.address)) for secret in secrets)


def test_given_a_token_in_secrets_manager_then_the_query_carries_it_read_once(
    server: PrometheusServer, gates: Callable[..., Gate], calls: CallCounter
) -> None:
    secrets = calls.watch(client("secretsmanager"))
    secrets.create_secret(Name="prometheus/token", SecretString=f"{TOKEN}\n")
    gate = gates(bearer(TOKEN), upstream=server.address)
    producer = PrometheusQueries(
        region=REGION,
        credentials=lambda: None,
        secrets=lambda: secrets,
        token_origins=frozenset({("prometheus/token", origin(gate.address))}),
    )
    source = {"serverAddress": gate.address, "bearerTokenSecret": "prometheus/token"}
    readings = [read("queue_depth", producer, **source) for _ in range(3)]
    assert [r.value for r in readings if isinstance(r, MetricReading)] == [12, 12, 12]
    assert calls.calls["GetSecretValue"] == 1


def test_given_a_wrong_or_missing_token_then_the_reading_is_missing_as_not_authorized(
    server: PrometheusServer, gates: Callable[..., Gate]
) -> None:
    client("secretsmanager").create_secret(Name="stale", SecretString="old-token")
    gate = gates(bearer(TOKEN), upstream=server.address)
    producer = queries(token_origins=deployed_for(gate, "stale", "nope"))
    wrong = refusal(read("up", producer, serverAddress=gate.address, bearerTokenSecret="stale"))
    none = refusal(read("up", producer, serverAddress=gate.address))
    missing = refusal(read("up", producer, serverAddress=gate.address, bearerTokenSecret="nope"))
    assert wrong.endswith("not authorized (HTTP 401: bad or missing bearer token)")
    assert none.endswith("not authorized (HTTP 401: bad or missing bearer token)")
    assert "bearer token secret nope: ResourceNotFoundException" in missing
    assert len(gate.received) == 2  # no request without the token the policy names


def test_given_a_rotated_token_then_a_401_makes_the_next_query_read_it_again(
    server: PrometheusServer, gates: Callable[..., Gate]
) -> None:
    secrets = client("secretsmanager")
    secrets.create_secret(Name="rotating", SecretString="old-token")
    gate = gates(bearer(TOKEN), upstream=server.address)
    producer = queries(token_origins=deployed_for(gate, "rotating"))
    source = {"serverAddress": gate.address, "bearerTokenSecret": "rotating"}
    assert isinstance(read("queue_depth", producer, **source), MetricUnavailable)
    secrets.put_secret_value(SecretId="rotating", SecretString=TOKEN)
    reading = read("queue_depth", producer, **source)
    assert isinstance(reading, MetricReading) and reading.value == 12


def test_given_a_secret_deployed_for_another_origin_then_it_is_neither_read_nor_sent(
    server: PrometheusServer, gates: Callable[..., Gate], calls: CallCounter
) -> None:
    secrets = calls.watch(client("secretsmanager"))
    secrets.create_secret(Name="prometheus/token", SecretString=TOKEN)
    deployed = gates(bearer(TOKEN), upstream=server.address)
    elsewhere = gates(bearer(TOKEN), upstream=server.address)
    producer = PrometheusQueries(
        region=REGION,
        credentials=lambda: None,
        secrets=lambda: secrets,
        token_origins=deployed_for(deployed, "prometheus/token"),
    )
    source = {"bearerTokenSecret": "prometheus/token"}

    taken = read("queue_depth", producer, serverAddress=elsewhere.address, **source)

    assert isinstance(taken, MetricRefused)
    assert taken.reason == (
        f"Prometheus query 'queue_depth' at {elsewhere.address}: bearer token secret "
        f"prometheus/token is deployed for {origin(deployed.address)}, not for "
        f"{origin(elsewhere.address)}: refused, the token is neither read nor sent"
    )
    assert (elsewhere.received, calls.calls["GetSecretValue"]) == ([], 0)
    # the deployed server, named another way, still gets it
    named = deployed.address.replace("http://", "HTTP://") + "/"
    kept = read("queue_depth", producer, serverAddress=named, **source)
    assert isinstance(kept, MetricReading) and kept.value == 12


# --- Amazon Managed Service for Prometheus: SigV4 for `aps` -----------------------------

SIGV4 = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), "
    r"Signature=(?P<signature>[0-9a-f]{64})"
)


def amp(region: str) -> Check:
    """AMP's check: a SigV4 signature for `aps` in `region` by KEY/SECRET, recomputed here
    from the request as received; 403 otherwise, as AMP answers."""

    def check(request: Received) -> tuple[int, str] | None:
        headers = {name.lower(): value for name, value in request.headers.items()}
        found = SIGV4.fullmatch(headers.get("authorization", ""))
        if found is None or "x-amz-date" not in headers:
            return 403, '{"message":"Missing Authentication Token"}'
        if (found["key"], found["region"], found["service"]) != (KEY, region, "aps"):
            return 403, '{"message":"Credential should be scoped to a valid region or service"}'
        signed = found["signed"].split(";")
        received = AWSRequest(
            method=request.method,
            url=f"http://{headers['host']}{request.path}",
            data=request.body,
            headers={name: headers[name] for name in signed if name != "host"},
        )
        received.context["timestamp"] = headers["x-amz-date"]
        signer = SigV4Auth(Credentials(KEY, SECRET), "aps", region)
        expected = signer.signature(
            signer.string_to_sign(received, signer.canonical_request(received)), received
        )
        if not hmac.compare_digest(expected, found["signature"]):
            return 403, '{"message":"The request signature we calculated does not match"}'
        if request.path != f"/workspaces/{WORKSPACE}/api/v1/query":
            return 404, '{"message":"no such workspace"}'
        return None

    return check


def amp_queries(gate: Gate, secret: str = SECRET) -> PrometheusQueries:
    return PrometheusQueries(
        region=REGION,
        credentials=lambda: Credentials(KEY, secret),
        secrets=lambda: client("secretsmanager"),
        amp_url=lambda region, workspace: f"{gate.address}/workspaces/{workspace}",
    )


def test_given_an_amp_workspace_then_the_query_is_signed_for_aps_in_its_region(
    server: PrometheusServer, gates: Callable[..., Gate]
) -> None:
    gate = gates(amp("us-east-2"), upstream=server.address)
    arn = f"arn:aws:aps:us-east-2:123456789012:workspace/{WORKSPACE}"
    reading = read("sum(deployment_replicas)", amp_queries(gate), workspace=arn)
    assert isinstance(reading, MetricReading) and reading.value == 6


def test_given_a_workspace_id_then_the_functions_region_signs_it(
    server: PrometheusServer, gates: Callable[..., Gate]
) -> None:
    gate = gates(amp(REGION), upstream=server.address)
    reading = read("queue_depth", amp_queries(gate), workspace=WORKSPACE)
    assert isinstance(reading, MetricReading) and reading.value == 12


def test_given_a_bad_signature_then_amps_403_is_a_missing_reading_naming_it(
    server: PrometheusServer, gates: Callable[..., Gate]
) -> None:
    gate = gates(amp(REGION), upstream=server.address)
    forged = refusal(read("queue_depth", amp_queries(gate, "another-key"), workspace=WORKSPACE))
    assert forged == (
        f"Prometheus query 'queue_depth' at workspace {WORKSPACE}: not authorized "
        "(HTTP 403: The request signature we calculated does not match)"
    )
    elsewhere = refusal(read("up", amp_queries(gate), workspace=WORKSPACE, region="us-west-2"))
    assert "HTTP 403: Credential should be scoped" in elsewhere


def test_given_no_credentials_then_the_query_is_not_sent(gates: Callable[..., Gate]) -> None:
    gate = gates(amp(REGION))
    producer = PrometheusQueries(
        region=REGION,
        credentials=lambda: None,
        secrets=lambda: None,
        amp_url=lambda region, workspace: f"{gate.address}/workspaces/{workspace}",
    )
    reason = refusal(read("up", producer, workspace=WORKSPACE))
    assert reason.endswith("no AWS credentials to sign the query with")
    assert gate.received == []


def test_given_a_workspace_id_and_no_region_anywhere_then_the_query_is_not_sent(
    gates: Callable[..., Gate],
) -> None:
    gate = gates(amp(REGION))
    producer = PrometheusQueries(
        region="",
        credentials=lambda: Credentials(KEY, SECRET),
        secrets=lambda: None,
        amp_url=lambda region, workspace: f"{gate.address}/workspaces/{workspace}",
    )
    reason = refusal(read("up", producer, workspace=WORKSPACE))
    assert reason.endswith("no region to find the workspace in: set region")
    assert gate.received == []


# --- the evaluate path: a failed query holds scale-in, the other metrics still decide ----

TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "mixed"}


def evaluator_with(query: dict[str, Any]) -> tuple[Evaluator, VirtualClock]:
    make_state_table("state")
    client("sqs").create_queue(QueueName="jobs")
    make_asg("ng", tags=TAGS, desired=5, max_size=50)
    clock = VirtualClock()
    mixed = policy(
        queue_metric("jobs", per_node=4),
        {
            "type": "Prometheus",
            "name": "depth",
            "prometheus": query,
            "target": {"type": "AverageValue", "averageValue": 4},
        },
        max_replicas=50,
        name="mixed",
        behavior={"scaleDown": {"stabilizationWindowSeconds": 0}},
    )
    evaluator = Evaluator(
        node_groups=AsgNodeGroups(client("autoscaling"), client("eks"), tag_names=TagNames()),
        producers=Producers(
            {SqsQueueMetric: SqsQueueLength(client("sqs")), PrometheusMetric: queries()}
        ),
        state=DynamoStateStore(client("dynamodb"), "state", audit_ttl=timedelta(days=1)),
        policies=PolicyBook({"mixed": mixed}),
        clock=clock,
    )
    return evaluator, clock


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("sum(", "query refused as malformed (HTTP 400"),
        ("vector(NaN)", "NaN (series {}), not a finite number"),
        ("deployment_replicas", "a vector of 3 series"),
    ],
)
def test_given_a_failing_query_and_an_empty_queue_then_the_group_does_not_scale_in(
    server: PrometheusServer, query: str, why: str
) -> None:
    evaluator, _ = evaluator_with({"query": query, "serverAddress": server.address})
    result = evaluator.evaluate("ng", "m-0")
    assert result.decision is not None
    depth = next(m for m in result.decision.metrics if m.name == "depth")
    assert depth.status is MetricStatus.MISSING and why in depth.detail and query in depth.detail
    assert (result.outcome, desired_capacity("ng")) == (Outcome.UNCHANGED, 5)


def test_given_a_failing_query_and_a_full_queue_then_the_queue_still_scales_the_group_up(
    server: PrometheusServer,
) -> None:
    evaluator, _ = evaluator_with({"query": "sum(", "serverAddress": server.address})
    fill_queue("jobs", 80)
    result = evaluator.evaluate("ng", "m-0")
    assert (result.outcome, desired_capacity("ng")) == (Outcome.ACTED, 20)


def test_given_a_working_query_then_it_decides_with_the_queue(server: PrometheusServer) -> None:
    # 12 queued in Prometheus at 4 a node: 3 nodes; the empty queue: 0. 5 → 3.
    evaluator, _ = evaluator_with({"query": "queue_depth", "serverAddress": server.address})
    result = evaluator.evaluate("ng", "m-0")
    assert (result.outcome, desired_capacity("ng")) == (Outcome.ACTED, 3)


# --- hostile answers: huge, or with terminal escapes -------------------------------------

HUGE = 600_000  # characters: past DynamoDB's 400 KB item on its own


def vector(value: str, **labels: str) -> str:
    series = [{"metric": labels, "value": [1_700_000_000, value]}]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": series}})


@pytest.mark.parametrize(
    ("answer", "depth_status", "said"),
    [
        (vector("1", pod="p" * HUGE), MetricStatus.OK, "(cut, 600,008 characters)"),
        (vector("9" * HUGE), MetricStatus.MISSING, "not a finite number"),
    ],
    ids=["600 KB label", "600 KB number"],
)
def test_given_a_600_kb_answer_then_the_group_still_scales_up_on_its_queue_and_its_state_fits(
    gates: Callable[..., Gate], answer: str, depth_status: MetricStatus, said: str
) -> None:
    # Given a Prometheus-like server answering with a 600 KB label or number, and 80 queued jobs
    gate = gates(lambda request: (200, answer))
    evaluator, _ = evaluator_with({"query": "depth", "serverAddress": gate.address})
    fill_queue("jobs", 80)
    # When the group is evaluated, twice (the first write must not freeze the next)
    first = evaluator.evaluate("ng", "m-0")
    second = evaluator.evaluate("ng", "m-1")
    # Then the queue scales the group up, the Prometheus metric says what came back, cut,
    # and the state item stays under DynamoDB's limit
    assert (first.outcome, second.outcome, desired_capacity("ng")) == (
        Outcome.ACTED,
        Outcome.UNCHANGED,
        20,
    )
    assert first.decision is not None
    depth = next(m for m in first.decision.metrics if m.name == "depth")
    assert depth.status is depth_status and said in depth.detail and len(depth.detail) < 1100
    assert state_item_bytes("state", "ng") < DYNAMODB_ITEM_LIMIT // 10


def test_given_an_answer_with_terminal_escapes_then_explain_prints_none_of_them(
    gates: Callable[..., Gate], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a server whose error clears the screen and rewrites the line (ESC, CSI, CR, BEL)
    hostile = "\x1b[2J\x1b[1;1H\x9b31mall good\r\x07scale to 0"
    gate = gates(lambda request: (503, json.dumps({"status": "error", "error": hostile})))
    evaluator, _ = evaluator_with({"query": "depth", "serverAddress": gate.address})
    evaluator.evaluate("ng", "m-0")
    capsys.readouterr()
    # When an operator explains the group's decisions
    assert main(["explain", "ng", "--table", "state", "--region", REGION]) == 0
    assert main(["explain", "ng", "--table", "state", "--region", REGION, "-o", "json"]) == 0
    printed = capsys.readouterr().out
    # Then the server's words are there, but none of its control characters
    assert "all good scale to 0" in printed
    assert not any(c in printed for c in "\x1b\x9b\r\x07"), repr(printed)


# --- a server that drips its answer: cut at the query's whole deadline --------------------


@pytest.fixture(params=["headers", "body"])
def drip(request: pytest.FixtureRequest) -> Iterator[Drip]:
    with Drip(request.param, vector("3").encode()) as server:
        yield server


def test_given_a_server_dripping_its_answer_then_the_read_ends_at_the_query_deadline(
    drip: Drip,
) -> None:
    # Given a server that would take 2,000 s, a byte every 0.2 s, and timeoutSeconds 1
    # When the metric is read
    reason = refusal(read("up", serverAddress=drip.address, timeoutSeconds=1))
    # Then it is missing, at its whole deadline, not at a socket read's
    assert reason == (
        f"Prometheus query 'up' at {drip.address}: no answer within its 1s deadline "
        "(timeoutSeconds)"
    )


def test_given_less_time_left_than_the_timeout_then_the_read_ends_with_the_invocation(
    drip: Drip,
) -> None:
    # Given an invocation with 3.5 s left (3 s kept to record results) and timeoutSeconds 20
    clock = [100.0]
    deadline = Deadline(monotonic=lambda: clock[0])
    deadline.start(remaining_ms=3_500)
    producer = queries(deadline=deadline)
    # When the metric is read from a server that would take 2,000 s
    with pytest.raises(OutOfTimeError) as cut:
        read("up", producer, serverAddress=drip.address, timeoutSeconds=20)
    # Then it ends with the time the invocation had left, and says so: out of time, the
    # evaluation tried again later, not a metric failure (which would count to its fallback)
    assert str(cut.value) == (
        f"Prometheus query 'up' at {drip.address}: no answer within 0.5s, the deadline of "
        "the invocation's remaining time"
    )
    # And once none is left, the next read is not even sent
    clock[0] += 1
    with pytest.raises(OutOfTimeError, match="not asked: the invocation has no time left"):
        read("up", producer, serverAddress=f"http://127.0.0.1:{free_port()}")

"""A fault-injecting HTTP proxy on loopback, in front of moto's server: AWS on a bad day.

At a chosen rate, with a seeded RNG, the proxy answers a call itself instead of
forwarding it: a throttling error in the shape of the call's protocol (the codes botocore
retries as throttling), a 5xx (500 InternalFailure or 503 ServiceUnavailable, in the same
shapes), or a reset connection; or it forwards the call late. Faults
that answer never reach moto, so a faulted write never happened. It counts what it
injected per kind, and keeps a log of every call it forwarded with moto's status, so a test
can count the writes that really reached AWS (SetDesiredCapacity per group, say).

The shapes, per protocol (detected as botocore sends them):
- query (Auto Scaling, STS): `<ErrorResponse><Error><Code>Throttling</Code>...`, 400;
- ec2: `<Response><Errors><Error><Code>RequestLimitExceeded</Code>...`, 503;
- json (DynamoDB, SQS): `{"__type": "...#ThrottlingException"}`, 400, with SQS's modeled
  `RequestThrottled` and its `x-amzn-query-error` header;
- rest-json (EKS, Lambda): `x-amzn-ErrorType: ThrottlingException` (or Lambda's
  `TooManyRequestsException`), 429;
- smithy-rpc-v2-cbor (CloudWatch): the same `__type` in a CBOR map, with the query error.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import socket
import struct
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Fault(StrEnum):
    THROTTLE = "throttle"
    SERVER_ERROR = "5xx"
    RESET = "reset"
    DELAY = "delay"


EVEN = {fault: 1.0 for fault in Fault}
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding"}
)
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request")
_CBOR_OPERATION = re.compile(r"/service/[^/]+/operation/([^/?]+)")
# Throttling codes as each service models them, else the common one of the protocol.
_THROTTLING = {"sqs": "RequestThrottled", "lambda": "TooManyRequestsException"}
_JSON_PREFIX = {"dynamodb": "com.amazonaws.dynamodb.v20120810#", "sqs": "com.amazonaws.sqs#"}
_QUERY_COMPATIBLE = {"sqs": {}, "monitoring": {"ThrottlingException": "Throttling"}}


@dataclass(frozen=True)
class Call:
    """One AWS API call as the proxy sees it."""

    method: str
    path: str
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    service: str  # the SigV4 signing name: autoscaling, dynamodb, sqs, monitoring...
    protocol: str  # query, ec2, json, rest-json, cbor
    operation: str
    params: Mapping[str, Any]  # the form of a query call, the document of a JSON one

    @property
    def user_agent(self) -> str:
        return self.headers.get("user-agent", "")


def read_call(method: str, path: str, headers: Mapping[str, str], body: bytes) -> Call:
    scope = _SCOPE.search(headers.get("authorization", ""))
    service = scope.group(1) if scope else "?"
    params: Mapping[str, Any] = {}
    if headers.get("smithy-protocol") == "rpc-v2-cbor":
        protocol = "cbor"
        found = _CBOR_OPERATION.search(path)
        operation = found.group(1) if found else path
    elif "x-amz-target" in headers:
        protocol = "json"
        operation = headers["x-amz-target"].rsplit(".", 1)[-1]
        try:
            params = json.loads(body or b"{}")
        except ValueError:
            params = {}
    elif headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        protocol = "ec2" if service == "ec2" else "query"
        params = dict(urllib.parse.parse_qsl(body.decode()))
        operation = str(params.get("Action", "?"))
    else:
        protocol = "rest-json"
        operation = f"{method} {urllib.parse.urlsplit(path).path}"
    return Call(method, path, headers, body, service, protocol, operation, params)


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def _cbor_text(text: str) -> bytes:
    data = text.encode()
    if len(data) < 24:
        return bytes([0x60 + len(data)]) + data
    return bytes([0x78, len(data)]) + data  # < 256 bytes here


def _cbor_map(document: Mapping[str, str]) -> bytes:
    encoded = bytes([0xA0 + len(document)])
    for key, value in document.items():
        encoded += _cbor_text(key) + _cbor_text(value)
    return encoded


def error_answer(call: Call, code: str, status: int, message: str, *, sender: bool) -> Answer:
    """An AWS error in the call's protocol, as the service itself would send it."""
    request_id = str(uuid.uuid4())
    party = "Sender" if sender else "Receiver"
    headers = {"x-amzn-RequestId": request_id}
    if call.protocol == "query":
        version = call.params.get("Version", "")
        body = (
            f'<ErrorResponse xmlns="https://{call.service}.amazonaws.com/doc/{version}/">'
            f"<Error><Type>{party}</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>"
        )
        return Answer(status, headers | {"Content-Type": "text/xml"}, body.encode())
    if call.protocol == "ec2":
        body = (
            '<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error>'
            f"<Code>{code}</Code><Message>{message}</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>"
        )
        return Answer(status, headers | {"Content-Type": "text/xml"}, body.encode())
    if call.protocol == "rest-json":
        return Answer(
            status,
            headers | {"Content-Type": "application/json", "x-amzn-ErrorType": code},
            json.dumps({"message": message}).encode(),
        )
    document = {"__type": _JSON_PREFIX.get(call.service, "") + code, "message": message}
    if call.service in _QUERY_COMPATIBLE:  # once query services: the code a query client knew
        headers["x-amzn-query-error"] = f"{_QUERY_COMPATIBLE[call.service].get(code, code)};{party}"
    if call.protocol == "cbor":
        headers |= {"Content-Type": "application/cbor", "smithy-protocol": "rpc-v2-cbor"}
        return Answer(status, headers, _cbor_map(document))
    content_type = call.headers.get("content-type", "application/x-amz-json-1.0")
    return Answer(status, headers | {"Content-Type": content_type}, json.dumps(document).encode())


def throttling(call: Call) -> Answer:
    if call.protocol == "ec2":
        return error_answer(
            call, "RequestLimitExceeded", 503, "Request limit exceeded.", sender=True
        )
    if call.protocol == "query":
        return error_answer(call, "Throttling", 400, "Rate exceeded", sender=True)
    code = _THROTTLING.get(call.service, "ThrottlingException")
    status = 429 if call.protocol == "rest-json" else 400
    return error_answer(call, code, status, "Rate exceeded", sender=True)


def server_error(call: Call, draw: float) -> Answer:
    status, code = (500, "InternalFailure") if draw < 0.5 else (503, "ServiceUnavailable")
    return error_answer(call, code, status, "We encountered an internal error.", sender=False)


@dataclass(frozen=True)
class Forwarded:
    """A call that reached moto, and moto's status."""

    service: str
    operation: str
    params: Mapping[str, Any]
    status: int
    user_agent: str


@dataclass
class FaultProxy:
    """`with FaultProxy(moto_url, rate=0.3, seed=7) as proxy:` — point clients at `proxy.url`.

    `rate` is the share of calls faulted, and may change while the proxy runs (0 stops the
    faults). botocore retries a faulted call (its attempts share one
    `amz-sdk-invocation-id`); each retry is faulted again with probability `persistence`,
    so with a high one some calls outlast the retries, as in a real brown-out. `faulted`
    picks the calls that may be faulted (every call by default); the others always pass.
    """

    upstream: str
    rate: float = 0.0
    persistence: float = 0.0
    seed: int = 0
    weights: Mapping[Fault, float] = field(default_factory=lambda: dict(EVEN))
    delay_seconds: tuple[float, float] = (0.005, 0.05)
    faulted: Callable[[Call], bool] = lambda _: True
    injected: Counter[Fault] = field(default_factory=Counter)
    injected_by_operation: Counter[tuple[Fault, str]] = field(default_factory=Counter)
    forwarded: list[Forwarded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._retrying: set[str] = set()  # invocation ids whose last attempt was faulted
        self._lock = threading.Lock()
        upstream = urllib.parse.urlsplit(self.upstream)
        self._upstream = (upstream.hostname or "127.0.0.1", upstream.port or 80)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def choose(self, call: Call) -> tuple[Fault | None, float]:
        """The fault for this call, if any, and a draw in [0, 1) to shape it (how late, which
        5xx); decided in arrival order, under a lock, so a seed replays the same run."""
        with self._lock:
            invocation = call.headers.get("amz-sdk-invocation-id", "")
            retry = invocation in self._retrying
            self._retrying.discard(invocation)
            chance = self.persistence if retry and self.rate else self.rate
            if not self.faulted(call) or self._rng.random() >= chance:
                return None, 0.0
            kinds, weights = zip(*self.weights.items(), strict=True)
            fault: Fault = self._rng.choices(kinds, weights)[0]
            if invocation and fault is not Fault.DELAY:  # a late answer is not retried
                self._retrying.add(invocation)
            self.injected[fault] += 1
            self.injected_by_operation[fault, call.operation] += 1
            return fault, self._rng.random()

    def forward(self, call: Call) -> Answer:
        connection = http.client.HTTPConnection(*self._upstream, timeout=60)
        try:
            headers = {k: v for k, v in call.headers.items() if k not in HOP_BY_HOP}
            connection.request(call.method, call.path, body=call.body, headers=headers)
            response = connection.getresponse()
            body = response.read()
            answer = Answer(
                response.status,
                {k: v for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP},
                body,
            )
        finally:
            connection.close()
        with self._lock:
            self.forwarded.append(
                Forwarded(call.service, call.operation, call.params, answer.status, call.user_agent)
            )
        return answer

    def writes(self, operation: str) -> Iterator[Forwarded]:
        """The calls of `operation` that reached moto and succeeded."""
        with self._lock:
            calls = list(self.forwarded)
        return (c for c in calls if c.operation == operation and c.status < 300)


def _answer(proxy: FaultProxy, call: Call, fault: Fault | None, draw: float) -> Answer:
    """The call's answer under its fault (a reset aside): AWS's late, throttled or 5xx
    answer, or the upstream's own (late, for a delay)."""
    if fault is Fault.DELAY:
        low, high = proxy.delay_seconds
        time.sleep(low + (high - low) * draw)
    if fault is Fault.THROTTLE:
        return throttling(call)
    if fault is Fault.SERVER_ERROR:
        return server_error(call, draw)
    return proxy.forward(call)


def _handler_for(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as botocore's connection pool expects

        def setup(self) -> None:
            super().setup()
            # Headers and body go out in two writes: without this, Nagle's algorithm holds
            # the body back until the client's delayed ACK, 40 ms on every call.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            call = read_call(self.command, self.path, headers, body)
            fault, draw = proxy.choose(call)
            if fault is Fault.RESET:
                self._reset()
                return
            answer = _answer(proxy, call, fault, draw)
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                if name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(answer.body)

        def _reset(self) -> None:
            """Close with a TCP reset and no answer, as a dropped connection looks."""
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per call would drown the test's output

    return Handler

"""The Prometheus metric's producer: one PromQL instant query (`/api/v1/query`) to an Amazon
Managed Service for Prometheus workspace, signed with SigV4 (botocore's signer), or to any
Prometheus-compatible server, with a bearer token read once from Secrets Manager and sent
only to the origin its secret was deployed for (`nodescaler.domain.token_origins`).

The answer must be one number: a scalar, or a vector or matrix of exactly one series
(a matrix's last sample). Anything else, and every HTTP or network failure, becomes
`MetricUnavailable` naming the query, the endpoint and what came back: that group's
scale-in is held, its other metrics still decide.
"""

from __future__ import annotations

import http.client
import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.aws import describe_aws_error
from nodescaler.adapters.socket_deadline import Watchdog, watched_opener
from nodescaler.deadline import Deadline
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.outside_text import outside
from nodescaler.domain.policy import MetricBase, PrometheusMetric, PrometheusSource
from nodescaler.domain.scaling.readings import (
    MetricReading,
    MetricRefused,
    MetricUnavailable,
    Reading,
)
from nodescaler.domain.token_origins import TokenOrigins, unbound_token
from nodescaler.errors import (
    BearerTokenRefusedError,
    NodescalerError,
    OutOfTimeError,
    PrometheusQueryError,
    PrometheusUnavailableError,
)
from nodescaler.ports import ProducerContext

# A single series' answer is a few hundred bytes; a query matching thousands is refused
# without reading (or parsing) all of it.
MAX_ANSWER_BYTES = 1_000_000
AMP_SERVICE = "aps"


def amp_workspace_url(region: str, workspace_id: str) -> str:
    return f"https://aps-workspaces.{region}.amazonaws.com/workspaces/{workspace_id}"


def _labels(series: dict[str, Any]) -> str:
    labels = series.get("metric") or {}
    return outside("{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}")


def parse_answer(body: bytes) -> tuple[float, str]:
    """The one number of an instant query's answer, and what it was ("scalar", the series'
    labels); `PrometheusQueryError` naming what came back when it is not one finite number."""
    try:
        answer = json.loads(body)
        data = answer["data"]
        kind, result = data["resultType"], data["result"]
        if kind == "scalar":
            sample, shape = result, "scalar"
        elif kind in ("vector", "matrix"):
            if not result:
                raise PrometheusQueryError(f"no data (an empty {kind})")
            if len(result) > 1:
                raise PrometheusQueryError(
                    f"a {kind} of {len(result)} series, where a metric needs one number: "
                    "aggregate them (sum, max) or narrow the labels"
                )
            series = result[0]
            if kind == "vector":
                sample = series["value"]
            elif series["values"]:
                sample = series["values"][-1]
            else:
                raise PrometheusQueryError("no data (a series with no sample)")
            shape = f"series {_labels(series)}"
        elif kind == "string":
            raise PrometheusQueryError(f"a string ({outside(result[1], 80)!r}), not a number")
        else:
            raise PrometheusQueryError(f"a result of type {kind!r}, not a number")
        text = str(sample[1])
        value = float(text)
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        answered = outside(body.decode(errors="replace"), 120)
        raise PrometheusQueryError(
            f"an answer not shaped as Prometheus's query API: {answered}"
        ) from None
    if not math.isfinite(value):
        raise PrometheusQueryError(f"{outside(text, 40)} ({shape}), not a finite number")
    return value, shape


def _http_error(error: urllib.error.HTTPError) -> PrometheusQueryError | PrometheusUnavailableError:
    try:
        body = error.read(4096).decode(errors="replace")
    except (OSError, http.client.HTTPException):  # the status is the news; its body is late
        body = ""
    try:
        said = json.loads(body)
        # Prometheus says `error`; AWS services `message` or `Message`
        said = said.get("error") or said.get("message") or said.get("Message") or body
    except (ValueError, AttributeError, RecursionError):
        said = body
    what = f"HTTP {error.code}: {outside(said) or outside(error.reason)}"
    if error.code == 400:
        return PrometheusQueryError(f"query refused as malformed ({what})")
    if error.code in (401, 403):
        return PrometheusQueryError(f"not authorized ({what})")
    if error.code >= 500 or error.code == 429:  # 429: throttled (AMP), as a 503
        return PrometheusUnavailableError(f"server error ({what})")
    return PrometheusQueryError(f"query failed ({what})")


# How long an endpoint that did not answer (a timeout, refused or reset) is not asked again:
# less than a tick, so each tick asks it once, as the Kubernetes API server is
DOWN_SECONDS = 30.0


def _unreachable(why: str) -> PrometheusUnavailableError:
    error = PrometheusUnavailableError(why)
    error.unreachable = True
    return error


def _timed_out(error: BaseException) -> bool:
    reason = getattr(error, "reason", None)
    return isinstance(error, TimeoutError) or isinstance(reason, TimeoutError)


def _late(seconds: float, cut_by_invocation: bool) -> NodescalerError:
    """No whole answer by the deadline: the endpoint's own (not asked again for a while),
    or the invocation's, nobody's fault: `OutOfTimeError`, the evaluation tried again by a
    later invocation, never a metric failure (which would count towards its fallback), as
    a Kubernetes read cut the same way (`adapters.k8s.core_api`)."""
    if cut_by_invocation:
        return OutOfTimeError(
            f"no answer within {seconds:.1f}s, the deadline of the invocation's remaining time"
        )
    return _unreachable(f"no answer within its {seconds:g}s deadline (timeoutSeconds)")


class PrometheusQueries:
    """Each PrometheusMetric's instant query, once per evaluation.

    `credentials` signs AMP requests (the function's role, refreshed by botocore);
    `secrets` makes the Secrets Manager client, on first need; `amp_url` says where a
    workspace is (tests point it at loopback); `token_origins` pairs each bearer token's
    secret with the origins it may be sent to (none by default); `max_seconds` caps each
    query's `timeoutSeconds` (the fast path's, whose looks stay light).
    """

    def __init__(
        self,
        *,
        region: str,
        credentials: Callable[[], Any],
        secrets: Callable[[], Any],
        amp_url: Callable[[str, str], str] = amp_workspace_url,
        token_origins: TokenOrigins = frozenset(),
        deadline: Deadline | None = None,
        max_seconds: float | None = None,
    ) -> None:
        self._region = region
        self._credentials = credentials
        self._secrets = secrets
        self._amp_url = amp_url
        self._token_origins = token_origins
        self._tokens: dict[str, str] = {}  # secret → token, for the warm container
        self._deadline = deadline or Deadline()  # the invocation's: no read outlasts it
        self._max_seconds = max_seconds  # the fast path's: a look stays light
        # endpoint → (until when, why): one that did not answer is not waited on again by
        # the other groups of the same batch, which would time the whole batch out
        self._down: dict[str, tuple[float, str]] = {}

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        assert isinstance(metric, PrometheusMetric)
        source = metric.prometheus
        what = f"Prometheus query {outside(source.query)!r} at {source.endpoint}"
        try:
            value, shape = self.query(source)
        except (PrometheusQueryError, PrometheusUnavailableError) as error:
            missing = (
                MetricRefused if isinstance(error, BearerTokenRefusedError) else MetricUnavailable
            )
            return missing(reason=f"{what}: {error}")
        except OutOfTimeError as error:  # the invocation's time, not the metric's
            raise OutOfTimeError(f"{what}: {error}") from None
        return MetricReading(value=value, at=now, detail=f"{value:g} ({shape})")

    def query(self, source: PrometheusSource) -> tuple[float, str]:
        self._check_token_origin(source)
        until, why = self._down.get(source.endpoint, (0.0, ""))
        if time.monotonic() < until:
            raise PrometheusUnavailableError(
                f"{why}, {DOWN_SECONDS:g}s ago at most: not asked again yet"
            )
        try:
            return self._query(source)
        except PrometheusUnavailableError as error:
            if error.unreachable:
                self._down[source.endpoint] = (time.monotonic() + DOWN_SECONDS, str(error))
            raise

    def _check_token_origin(self, source: PrometheusSource) -> None:
        """Before its secret is read or anything is sent: a token goes only to an origin
        its secret was deployed for, whatever a stored policy names."""
        if refusal := unbound_token(source, self._token_origins):
            raise BearerTokenRefusedError(refusal)

    def _query(self, source: PrometheusSource) -> tuple[float, str]:
        return parse_answer(self._answer(source))

    def vector(
        self, source: PrometheusSource, *, seconds: float, max_bytes: int
    ) -> list[dict[str, Any]]:
        """Every series of an instant query's vector answer, with the same auth, origin
        check and errors as a metric's query; for reading a cluster's history (`nodescaler
        trace export`), whose queries may take `seconds` and answer `max_bytes`."""
        self._check_token_origin(source)
        body = self._answer(source, seconds, max_bytes)
        try:
            data = json.loads(body)["data"]
            if data["resultType"] != "vector":
                raise PrometheusQueryError(f"a {data['resultType']}, where a vector was asked")
            return list(data["result"])
        except (ValueError, KeyError, TypeError, RecursionError):
            answered = outside(body.decode(errors="replace"), 120)
            raise PrometheusQueryError(
                f"an answer not shaped as Prometheus's query API: {answered}"
            ) from None

    def _answer(
        self,
        source: PrometheusSource,
        longer: float | None = None,
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> bytes:
        request = self._request(source)
        seconds, cut_by_invocation = self._time_for(source) if longer is None else (longer, False)
        with Watchdog(seconds) as watchdog:
            try:
                with watched_opener(watchdog).open(request, timeout=seconds) as response:
                    body: bytes = response.read(max_bytes + 1)
            except urllib.error.HTTPError as error:
                if error.code == 401 and source.bearer_token_secret:
                    self._tokens.pop(source.bearer_token_secret, None)  # rotated: read it again
                raise _http_error(error) from None
            except (OSError, http.client.HTTPException) as error:
                if watchdog.expired or _timed_out(error):
                    raise _late(seconds, cut_by_invocation) from None
                if isinstance(error, urllib.error.URLError):
                    raise _unreachable(f"unreachable ({outside(error.reason)})") from None
                raise _unreachable(f"connection failed ({outside(repr(error))})") from None
        if watchdog.expired:  # the server stopped early: the body may be cut short
            raise _late(seconds, cut_by_invocation)
        if len(body) > max_bytes:
            raise PrometheusQueryError(
                f"an answer over {max_bytes:,} bytes (many series), where a metric needs one number"
                if max_bytes == MAX_ANSWER_BYTES
                else f"an answer over {max_bytes:,} bytes"
            )
        return body

    def _time_for(self, source: PrometheusSource) -> tuple[float, bool]:
        """The query's whole time (its `timeoutSeconds`, or what the invocation has left
        when less), and whether the invocation cut it."""
        seconds = min(source.timeout_seconds, self._max_seconds or source.timeout_seconds)
        left = self._deadline.left()
        if left is None or left >= seconds:
            return seconds, False
        if left <= 0:
            raise OutOfTimeError("not asked: the invocation has no time left")
        return left, True

    def _request(self, source: PrometheusSource) -> urllib.request.Request:
        body = urlencode({"query": source.query}).encode()
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Accept": "application/json",
        }
        if source.workspace_id is not None:
            region = source.workspace_region or self._region
            if not region:
                raise PrometheusQueryError("no region to find the workspace in: set region")
            url = f"{self._amp_url(region, source.workspace_id)}/api/v1/query"
            headers = self._signed(url, body, headers, region)
        else:
            url = f"{source.server_address}/api/v1/query"
            if source.bearer_token_secret is not None:
                headers["Authorization"] = f"Bearer {self._token(source.bearer_token_secret)}"
        return urllib.request.Request(url, data=body, headers=headers, method="POST")

    def _signed(
        self, url: str, body: bytes, headers: dict[str, str], region: str
    ) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self._credentials()
        if credentials is None:
            raise PrometheusQueryError("no AWS credentials to sign the query with")
        request = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(credentials.get_frozen_credentials(), AMP_SERVICE, region).add_auth(request)
        return dict(request.headers.items())

    def _token(self, secret: str) -> str:
        if secret not in self._tokens:
            try:
                token = self._secrets().get_secret_value(SecretId=secret).get("SecretString")
            except (ClientError, BotoCoreError) as error:
                raise PrometheusUnavailableError(
                    f"bearer token secret {secret}: {describe_aws_error(error)}"
                ) from None
            if not token or not token.strip():
                raise PrometheusQueryError(f"bearer token secret {secret} holds no SecretString")
            self._tokens[secret] = token.strip()
        return self._tokens[secret]


def producer(context: ProducerContext, max_seconds: float | None = None) -> PrometheusQueries:
    """The Prometheus type's producer (its descriptor names this function; the fast path
    bounds each query to `max_seconds`)."""
    clients, amp = context.clients, context.clients.amp_endpoint_url
    return PrometheusQueries(
        region=clients.session.region_name or "",
        credentials=clients.session.get_credentials,
        secrets=lambda: clients.secretsmanager,
        amp_url=(lambda *_: amp) if amp else amp_workspace_url,
        token_origins=context.token_origins,
        deadline=context.deadline,
        max_seconds=max_seconds,
    )

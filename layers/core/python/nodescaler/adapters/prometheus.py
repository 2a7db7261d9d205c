"""The Prometheus metric's producer: one PromQL instant query (`/api/v1/query`) to an Amazon
Managed Service for Prometheus workspace, signed with SigV4 (botocore's signer), or to any
Prometheus-compatible server, with a bearer token read once from Secrets Manager.

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
from nodescaler.domain.node_group import NodeGroup
from nodescaler.domain.policy import MetricBase, PrometheusMetric, PrometheusSource
from nodescaler.domain.readings import MetricReading, MetricUnavailable, Reading
from nodescaler.domain.text import outside
from nodescaler.errors import PrometheusQueryError, PrometheusUnavailableError

# A single series' answer is a few hundred bytes; a query matching thousands is refused
# without reading (or parsing) all of it.
MAX_ANSWER_BYTES = 1_000_000
AMP_SERVICE = "aps"


def amp_workspace_url(region: str, workspace_id: str) -> str:
    return f"https://aps-workspaces.{region}.amazonaws.com/workspaces/{workspace_id}"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the bearer token or a signature to another address."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


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
    except (ValueError, KeyError, IndexError, TypeError):
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
    except (ValueError, AttributeError):
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


class PrometheusQueries:
    """Each PrometheusMetric's instant query, once per evaluation.

    `credentials` signs AMP requests (the function's role, refreshed by botocore);
    `secrets` makes the Secrets Manager client, on first need; `amp_url` says where a
    workspace is (tests point it at loopback).
    """

    def __init__(
        self,
        *,
        region: str,
        credentials: Callable[[], Any],
        secrets: Callable[[], Any],
        amp_url: Callable[[str, str], str] = amp_workspace_url,
    ) -> None:
        self._region = region
        self._credentials = credentials
        self._secrets = secrets
        self._amp_url = amp_url
        self._tokens: dict[str, str] = {}  # secret → token, for the warm container
        self._opener = urllib.request.build_opener(_NoRedirects)
        # endpoint → (until when, why): one that did not answer is not waited on again by
        # the other groups of the same batch, which would time the whole batch out
        self._down: dict[str, tuple[float, str]] = {}

    def read(self, metric: MetricBase, group: NodeGroup, now: datetime) -> Reading:
        assert isinstance(metric, PrometheusMetric)
        source = metric.prometheus
        try:
            value, shape = self.query(source)
        except (PrometheusQueryError, PrometheusUnavailableError) as error:
            return MetricUnavailable(
                reason=f"Prometheus query {outside(source.query)!r} at {source.endpoint}: {error}"
            )
        return MetricReading(value=value, at=now, detail=f"{value:g} ({shape})")

    def query(self, source: PrometheusSource) -> tuple[float, str]:
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

    def _query(self, source: PrometheusSource) -> tuple[float, str]:
        request = self._request(source)
        try:
            with self._opener.open(request, timeout=source.timeout_seconds) as response:
                body = response.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as error:
            if error.code == 401 and source.bearer_token_secret:
                self._tokens.pop(source.bearer_token_secret, None)  # rotated: read it again
            raise _http_error(error) from None
        except TimeoutError:
            raise self._timeout(source) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise self._timeout(source) from None
            raise _unreachable(f"unreachable ({outside(error.reason)})") from None
        except (OSError, http.client.HTTPException) as error:
            raise _unreachable(f"connection failed ({outside(repr(error))})") from None
        if len(body) > MAX_ANSWER_BYTES:
            raise PrometheusQueryError(
                f"an answer over {MAX_ANSWER_BYTES:,} bytes (many series), where a metric "
                "needs one number"
            )
        return parse_answer(body)

    @staticmethod
    def _timeout(source: PrometheusSource) -> PrometheusUnavailableError:
        return _unreachable(f"no answer within {source.timeout_seconds:g}s")

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

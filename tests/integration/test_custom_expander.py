"""The custom expander through a real botocore Lambda client, against a loopback endpoint
that answers as Lambda's Invoke does: a choice, a function error, nonsense, or too late."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
import pytest
from nodescaler.adapters.aws.custom_expander import LambdaExpander, budget_config
from nodescaler.domain.cluster.predicates import NodeTemplate
from nodescaler.domain.cluster.snapshot import Pod, Resources
from nodescaler.domain.scale_up.expanders import CustomExpander, PriorityExpander
from nodescaler.domain.scale_up.pending_pods_plan import plan

GIB = 2**30
TEMPLATES = {
    g: NodeTemplate(g, Resources(4000, 16 * GIB, 110)) for g in ("spot-ng", "on-demand-ng")
}
PODS = [Pod("default", "job", None, Resources(1000, GIB, 1), unschedulable=True)]


class LambdaEndpoint:
    """POST /2015-03-31/functions/<name>/invocations, answered from `self.reply`."""

    def __init__(self) -> None:
        self.reply: dict[str, Any] = {}
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                endpoint.requests.append(json.loads(body))
                time.sleep(endpoint.reply.get("delay", 0))
                payload = json.dumps(endpoint.reply.get("payload", {})).encode()
                self.send_response(200)
                if "error" in endpoint.reply:
                    self.send_header("X-Amz-Function-Error", endpoint.reply["error"])
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def endpoint() -> Iterator[LambdaEndpoint]:
    served = LambdaEndpoint()
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()


def chain(endpoint: LambdaEndpoint) -> list[Any]:
    client = boto3.Session(
        aws_access_key_id="x", aws_secret_access_key="x", region_name="eu-west-1"
    ).client("lambda", endpoint_url=endpoint.url, config=budget_config(0.5))
    return [
        CustomExpander(LambdaExpander(client, "my-expander")),
        PriorityExpander({10: ["on-demand-ng"]}),  # the fallback
    ]


def test_the_custom_expanders_choice_wins_and_it_sees_every_option(
    endpoint: LambdaEndpoint,
) -> None:
    endpoint.reply = {"payload": {"nodeGroups": ["spot-ng"]}}
    result = plan(PODS, TEMPLATES, chain(endpoint))
    assert dict(result.nodes) == {"spot-ng": 1}
    (request,) = endpoint.requests
    assert [o["nodeGroup"] for o in request["options"]] == ["on-demand-ng", "spot-ng"]
    assert request["options"][0]["pods"] == ["default/job"]
    assert request["options"][0]["nodeTemplate"]["allocatable"]["cpu"] == "4000m"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ({"error": "Unhandled", "payload": {"errorMessage": "boom"}}, "my-expander failed: "),
        ({"payload": {"groups": ["spot-ng"]}}, "my-expander answered "),
        ({"payload": {"nodeGroups": ["spot-ng"]}, "delay": 1.5}, "my-expander: ReadTimeoutError"),
    ],
    ids=["function-error", "malformed-answer", "over-budget"],
)
def test_a_failing_custom_expander_hands_over_to_the_next(
    endpoint: LambdaEndpoint, reply: dict[str, Any], why: str
) -> None:
    endpoint.reply = reply
    result = plan(PODS, TEMPLATES, chain(endpoint))
    assert dict(result.nodes) == {"on-demand-ng": 1}
    # over budget: the client's read timeout, not the slow answer, ends it (no timing here:
    # make test holds no thresholds), and it is not retried
    assert result.trace[0].startswith(f"expander custom failed ({why}")
    assert len(endpoint.requests) == 1

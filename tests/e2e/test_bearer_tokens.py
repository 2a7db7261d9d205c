"""A Prometheus bearer token goes only to the server it was deployed for: a stored policy
(written to the state table as any holder of the policy writers' rights can) that keeps a
deployed policy's `bearerTokenSecret` but names another `serverAddress` gets no token
sent, its metric reads as missing (no scale-in on it), and the refusal is named, logged
and counted, while the group's other metrics still decide."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from nodescaler.adapters.aws.policy_store import DynamoPolicyStore, PolicyChange
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.adapters.deployed_policies import load_policies
from nodescaler.config import EvaluateSettings
from nodescaler.domain.policy.document import token_origins
from nodescaler.domain.scaling.decision import MetricStatus

from tests.aws import CallCounter, client, desired_capacity, fill_queue, make_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import TABLE, Deployment

TOKEN = "deployed-prometheus-token"
SECRET = "prometheus/token"
TAGS = {"nodescaler/enabled": "true", "nodescaler/policy": "jobs"}


class RecordingPrometheus:
    """A loopback server answering every instant query with `value`, keeping the headers of
    each request it received."""

    def __init__(self, value: float) -> None:
        self.headers: list[dict[str, str]] = []
        received = self.headers
        answer = json.dumps(
            {"status": "success", "data": {"resultType": "scalar", "result": [0, str(value)]}}
        ).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(dict(self.headers.items()))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def authorizations(self) -> list[str | None]:
        return [h.get("Authorization") for h in self.headers]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def servers() -> Iterator[tuple[RecordingPrometheus, RecordingPrometheus]]:
    # the deployed server: 8 jobs (2 nodes at 4 a node); the writer's: 400 (100 nodes)
    deployed, elsewhere = RecordingPrometheus(8), RecordingPrometheus(400)
    yield deployed, elsewhere
    deployed.close()
    elsewhere.close()


def jobs_policy(server_address: str) -> str:
    document = {
        "apiVersion": "nodescaler.io/v1alpha1",
        "kind": "NodeGroupPolicy",
        "metadata": {"name": "jobs"},
        "spec": {
            "minReplicas": 0,
            "maxReplicas": 200,
            "metrics": [
                {
                    "type": "SQSQueue",
                    "name": "queue",
                    "sqsQueue": {"queue": "jobs"},
                    "target": {"type": "AverageValue", "averageValue": 4},
                },
                {
                    "type": "Prometheus",
                    "name": "backlog",
                    "prometheus": {
                        "query": "sum(jobs_waiting)",
                        "serverAddress": server_address,
                        "bearerTokenSecret": SECRET,
                    },
                    "target": {"type": "AverageValue", "averageValue": 4},
                },
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
        },
    }
    return yaml.safe_dump(document)


def deployed_with(folder: Path, server_address: str, calls: CallCounter) -> Deployment:
    """The stack deployed with the `jobs` policy: its evaluate function's allow-list built
    from the deployed policies, as infra builds it (infra/evaluate.py)."""
    folder.mkdir()
    (folder / "jobs.yaml").write_text(jobs_policy(server_address))
    allowed = sorted(token_origins(load_policies(folder).values()))
    variable = EvaluateSettings.model_fields["token_origins"].alias
    assert variable is not None
    environment = EvaluateSettings.model_construct(token_origins=allowed).environment()
    environment = {variable: environment[variable]}
    clock = VirtualClock(at=datetime(2026, 11, 23, 9, tzinfo=UTC))
    return Deployment(folder, calls, clock, environment)


def store_policy(document: str) -> None:
    """What a holder of the policy writers' rights can write, `nodescaler apply` or not."""
    store = DynamoPolicyStore(client("dynamodb"), TABLE)
    change = PolicyChange("jobs", 1, document, "stolen.yaml", 0)
    store.apply([change], "arn:aws:iam::123456789012:user/writer", datetime.now(UTC))


def test_given_a_stored_policy_pointing_the_deployed_secret_elsewhere_then_no_token_is_sent(
    servers: tuple[RecordingPrometheus, RecordingPrometheus],
    tmp_path: Path,
    calls: CallCounter,
    output: Any,
) -> None:
    # Given the deployed policy reads the deployed server with the token
    deployed, elsewhere = servers
    client("secretsmanager").create_secret(Name=SECRET, SecretString=TOKEN)
    make_asg("jobs", tags=TAGS, desired=5, max_size=200)
    client("sqs").create_queue(QueueName="jobs")
    deployment = deployed_with(tmp_path / "policies", deployed.address, calls)
    deployment.tick()
    assert deployed.authorizations() == [f"Bearer {TOKEN}"]
    assert desired_capacity("jobs") == 2  # 8 jobs at 4 a node

    # When a stored policy keeps the secret but names the writer's server
    store_policy(jobs_policy(elsewhere.address))
    fill_queue("jobs", 12)  # the queue asks for 3 nodes
    deployment.clock.advance(seconds=60)
    deployment.tick()

    # Then the writer's server receives no token (nor any query), the group is not scaled
    # on its answer, and the queue still decides
    assert elsewhere.authorizations() == []
    assert desired_capacity("jobs") == 3
    (decision, *_) = DynamoStateStore(client("dynamodb"), TABLE).decisions("jobs")
    backlog = next(m for m in decision.metrics if m.name == "backlog")
    refusal = (
        f"bearer token secret {SECRET} is deployed for {deployed.address}, not for "
        f"{elsewhere.address}: refused, the token is neither read nor sent"
    )
    assert (decision.policy, decision.policy_version) == ("jobs", 1)
    assert backlog.status is MetricStatus.MISSING and refusal in backlog.detail
    printed = output()
    assert printed.metric("MetricSourcesRefused", node_group="jobs") == [1]
    assert "node group jobs, policy jobs, metric backlog: Prometheus query " in "\n".join(
        printed.messages("ERROR")
    )
    assert any(refusal in line for line in printed.messages("ERROR"))

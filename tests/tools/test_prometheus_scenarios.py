"""A scenario's Prometheus: the gauges it declares, each naming a workload of the scenario,
and the policies that query it, each refused by name where the sandbox cannot answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler_sandbox.scenario_checks import ScenarioError
from nodescaler_sandbox.scenario_file import load_scenario

RENDER = Path(__file__).parents[2] / "scenarios" / "policies" / "prometheus-render.yaml"
SCENARIO = """\
name: tiny
minutes: 10
policies: policies
groups:
  - {name: ng, policy: prometheus-render, max: 3}
queues:
  - {name: jobs, tasks: {0: 8}, taskMinutes: 5, maxWorkers: 8}
deployments:
  - {name: web, replicas: {"00:00": 1}}
"""


def load(tmp_path: Path, text: str, policy: str | None = None) -> object:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "policies" / "render.yaml").write_text(policy or RENDER.read_text())
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    return load_scenario(path)


def test_gauges_of_a_queue_and_a_deployment_load(tmp_path: Path) -> None:
    gauges = "prometheus:\n  gauges:\n    - {name: render_jobs_waiting, queue: jobs}\n"
    gauges += "    - {name: web_replicas, deployment: web}\n"
    scenario = load(tmp_path, SCENARIO + gauges)
    assert scenario.prometheus is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("gauges", "message"),
    [
        ("- {name: w, queue: nowhere}", "prometheus.gauges.0.queue: no queue named 'nowhere'"),
        (
            "- {name: w, deployment: api}",
            "prometheus.gauges.0.deployment: no deployment named 'api'",
        ),
        ("- {name: w, queue: jobs, deployment: web}", "exactly one of queue or deployment"),
        ("- {name: w}", "exactly one of queue or deployment"),
        ("- {name: 9lives, queue: jobs}", "prometheus.gauges.0.name: String should match"),
        ("[]", "prometheus.gauges: List should have at least 1 item"),
    ],
)
def test_a_bad_gauge_is_named(tmp_path: Path, gauges: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(")):
        load(tmp_path, SCENARIO + f"prometheus:\n  gauges:\n    {gauges}\n")


def test_a_policy_querying_prometheus_needs_the_scenarios_gauges(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as caught:
        load(tmp_path, SCENARIO)
    assert str(caught.value).endswith(
        "groups.0.policy: policy 'prometheus-render', metric 'render-backlog' queries "
        "Prometheus: declare the gauges it reads under prometheus.gauges"
    )


def test_a_policy_querying_a_server_address_is_refused_by_name(tmp_path: Path) -> None:
    policy = RENDER.read_text().replace(
        "workspace: ws-0a1b2c3d-4e5f-6789-abcd-ef0123456789", "serverAddress: http://prom:9090"
    )
    gauges = "prometheus:\n  gauges:\n    - {name: render_jobs_waiting, queue: jobs}\n"
    with pytest.raises(ScenarioError, match=r"the sandbox answers AMP workspaces only, not "):
        load(tmp_path, SCENARIO + gauges, policy)

"""The Prometheus metric's policy: where its query goes, and one clear error per bad field."""

from __future__ import annotations

import pytest
import yaml
from nodescaler.domain.policy import PrometheusMetric
from nodescaler.domain.policy.parsing import parse_policy
from nodescaler.errors import PolicyError

ARN = "arn:aws:aps:us-east-2:123456789012:workspace/ws-0a1b2c3d"


def document(source: str, target: str = "{type: Value, value: 100}") -> str:
    return f"""\
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {{name: p}}
spec:
  minReplicas: 0
  maxReplicas: 10
  metrics:
    - type: Prometheus
      prometheus: {source}
      target: {target}
"""


def metric(source: str, target: str = "{type: Value, value: 100}") -> PrometheusMetric:
    parsed = parse_policy(document(source, target), "p.yaml").spec.metrics[0]
    assert isinstance(parsed, PrometheusMetric)
    return parsed


def test_given_a_server_address_then_the_query_goes_there_by_its_default_name() -> None:
    parsed = metric("{query: 'sum(x)', serverAddress: 'https://prom.internal:9090/prom/'}")
    source = parsed.prometheus
    assert (parsed.key, source.server_address, source.timeout_seconds) == (
        "prometheus",
        "https://prom.internal:9090/prom",
        5,
    )
    assert (source.workspace_id, source.endpoint) == (None, "https://prom.internal:9090/prom")


@pytest.mark.parametrize(
    ("workspace", "region", "workspace_id", "workspace_region"),
    [
        (ARN, "", "ws-0a1b2c3d", "us-east-2"),
        (ARN, ", region: us-east-2", "ws-0a1b2c3d", "us-east-2"),
        ("ws-0a1b2c3d", "", "ws-0a1b2c3d", None),  # the function's own region
        ("ws-0a1b2c3d", ", region: eu-west-1", "ws-0a1b2c3d", "eu-west-1"),
    ],
)
def test_given_a_workspace_then_its_id_and_region_come_from_its_arn_or_fields(
    workspace: str, region: str, workspace_id: str, workspace_region: str | None
) -> None:
    source = metric(f"{{query: up, workspace: '{workspace}'{region}}}").prometheus
    assert (source.workspace_id, source.workspace_region) == (workspace_id, workspace_region)


@pytest.mark.parametrize(
    "target",
    [
        "{type: Value, value: 3}",
        "{type: AverageValue, averageValue: 3}",
        "{type: Utilization, averageUtilization: 70}",
    ],
)
def test_given_any_target_type_then_it_is_accepted_as_for_cloudwatch(target: str) -> None:
    written = yaml.safe_load(target)["type"]
    assert metric("{query: up, serverAddress: 'http://p:9090'}", target).target.type == written


BAD = [
    # (case, source, field path, words the message must contain)
    ("no endpoint", "{query: up}", "prometheus", "exactly one of serverAddress or workspace"),
    (
        "two endpoints",
        f"{{query: up, serverAddress: 'http://p', workspace: '{ARN}'}}",
        "prometheus",
        "exactly one of serverAddress or workspace",
    ),
    ("no query", "{serverAddress: 'http://p'}", "prometheus.query", "required field is missing"),
    (
        "blank query",
        "{query: '  ', serverAddress: 'http://p'}",
        "prometheus.query",
        "query is blank",
    ),
    (
        "not http",
        "{query: up, serverAddress: 'ftp://p'}",
        "prometheus.serverAddress",
        "must be an http:// or https:// URL",
    ),
    (
        "credentials in the address",
        "{query: up, serverAddress: 'https://me:pw@p'}",
        "prometheus.serverAddress",
        "must hold no credentials: use bearerTokenSecret",
    ),
    (
        "a query string in the address",
        "{query: up, serverAddress: 'https://p/api/v1/query?query=up'}",
        "prometheus.serverAddress",
        "must have no query or fragment",
    ),
    (
        "not a workspace",
        "{query: up, workspace: 'my-workspace'}",
        "prometheus.workspace",
        "workspace id (ws-...) or its ARN",
    ),
    (
        "another service's ARN",
        "{query: up, workspace: 'arn:aws:sqs:us-east-2:123456789012:workspace/ws-1'}",
        "prometheus.workspace",
        "workspace id (ws-...) or its ARN",
    ),
    (
        "not a region",
        "{query: up, workspace: ws-1, region: Mars}",
        "prometheus.region",
        "not an AWS region name",
    ),
    (
        "a region the ARN contradicts",
        f"{{query: up, workspace: '{ARN}', region: eu-west-1}}",
        "prometheus",
        "region eu-west-1 differs from the workspace ARN's us-east-2",
    ),
    (
        "a region for a server",
        "{query: up, serverAddress: 'http://p', region: eu-west-1}",
        "prometheus",
        "region is for a workspace",
    ),
    (
        "a token for a workspace",
        "{query: up, workspace: ws-1, bearerTokenSecret: tok}",
        "prometheus",
        "signed with the function's role (SigV4)",
    ),
    (
        "a token over http",
        "{query: up, serverAddress: 'http://prom.internal', bearerTokenSecret: tok}",
        "prometheus",
        "a bearer token is sent only over https",
    ),
    (
        "not a secret name",
        "{query: up, serverAddress: 'https://p', bearerTokenSecret: 'a token'}",
        "prometheus.bearerTokenSecret",
        "must be a Secrets Manager secret's name or ARN",
    ),
    (
        "no time to answer",
        "{query: up, serverAddress: 'https://p', timeoutSeconds: 0}",
        "prometheus.timeoutSeconds",
        "greater than 0",
    ),
    (
        "longer than a Kubernetes call may take",
        "{query: up, serverAddress: 'https://p', timeoutSeconds: 30}",
        "prometheus.timeoutSeconds",
        "less than or equal to 20",
    ),
    (
        "a string for a number",
        "{query: up, serverAddress: 'https://p', timeoutSeconds: '5'}",
        "prometheus.timeoutSeconds",
        "valid number",
    ),
    (
        "an unknown field",
        "{query: up, serverAddress: 'https://p', url: 'https://p'}",
        "prometheus.url",
        "unknown field",
    ),
]


@pytest.mark.parametrize(("source", "path", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_given_a_bad_prometheus_source_then_one_error_names_its_field(
    source: str, path: str, words: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(document(source), "p.yaml")
    assert len(caught.value.problems) == 1, caught.value.problems
    problem = caught.value.problems[0]
    assert problem.startswith(f"p.yaml: spec.metrics[0].{path}: "), problem
    assert words in problem


def test_given_a_loopback_server_then_a_token_may_go_over_http() -> None:
    source = metric("{query: up, serverAddress: 'http://127.0.0.1:9090', bearerTokenSecret: t}")
    assert source.prometheus.bearer_token_secret == "t"


@pytest.mark.parametrize("field", ["serverAddress", "workspace", "region"])
def test_given_a_null_source_field_then_it_counts_as_unset_and_is_named_not_a_crash(
    field: str,
) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy(document(f"{{query: 'sum(x)', {field}: null}}"), "p.yaml")
    (problem,) = raised.value.problems
    assert problem.startswith("p.yaml: spec.metrics[0].prometheus: "), problem

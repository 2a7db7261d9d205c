"""What an applied policy reads, as the stack outputs it and reads it back."""

from __future__ import annotations

from nodescaler.domain.policy.parsing import parse_policy
from nodescaler.domain.policy.versions import PolicyReads, stored_problems

from tests.unit.test_prometheus_policy import document


def test_what_a_policy_reads_survives_its_json_form() -> None:
    reads = PolicyReads(
        sqs_queues=frozenset({"jobs"}),
        prometheus_workspaces=frozenset({"ws-1"}),
        secrets=frozenset({"token"}),
        alarms=frozenset({"high"}),
        kubernetes=True,
        token_origins=frozenset({("token", "https://example.com")}),
    )
    written = reads.as_json()
    assert written["prometheusWorkspaces"] == ["ws-1"]
    assert PolicyReads.from_json(written) == reads


def test_a_malformed_json_form_reads_nothing_from_the_malformed_parts() -> None:
    reads = PolicyReads.from_json({"sqsQueues": "jobs", "tokenOrigins": ["ab", ["s", "o"]]})
    assert reads.sqs_queues == frozenset()
    assert reads.token_origins == frozenset({("s", "o")})


def test_reading_nothing_more_than_allowed_warns_of_nothing() -> None:
    assert PolicyReads().beyond(PolicyReads()) == []
    assert PolicyReads(kubernetes=True).beyond(PolicyReads()) == ["the Kubernetes cluster"]


def test_stored_problems_are_one_line_after_the_source() -> None:
    problems = ["web.yaml: spec.a: wrong", "web.yaml: spec.b: also wrong"]
    assert stored_problems(problems, "web.yaml") == "spec.a: wrong; spec.b: also wrong"


def test_a_policys_prometheus_workspace_and_token_secret_are_among_what_it_reads() -> None:
    with_token = parse_policy(
        document("{query: up, serverAddress: 'https://p', bearerTokenSecret: t}"), "a"
    )
    on_workspace = parse_policy(document("{query: up, workspace: 'ws-1'}"), "b")
    reads = PolicyReads.of([with_token, on_workspace])
    assert (reads.prometheus_workspaces, reads.secrets) == (frozenset({"ws-1"}), frozenset({"t"}))

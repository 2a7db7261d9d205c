"""What a stored policy reads beyond the deployed stack's rights: `apply` warns of it."""

from __future__ import annotations

from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.policy.versions import PolicyReads

from tests.builders import policy, queue_metric, reservation_metric


def with_alarm(p: NodeGroupPolicy, alarm: str) -> NodeGroupPolicy:
    return p.model_copy(update={"spec": p.spec.model_copy(update={"alarms": [alarm]})})


def test_given_a_policy_reading_a_new_queue_alarm_and_the_cluster_then_each_is_named() -> None:
    deployed = PolicyReads.of([with_alarm(policy(queue_metric("jobs")), "jobs-high")])
    stored = with_alarm(
        policy(queue_metric("jobs"), queue_metric("more"), reservation_metric()), "more-high"
    )

    assert PolicyReads.of([stored]).beyond(deployed) == [
        "SQS queue more",
        "alarm more-high",
        "the Kubernetes cluster",
    ]


def test_given_what_the_stack_outputs_then_it_reads_back_the_same() -> None:
    reads = PolicyReads.of([with_alarm(policy(queue_metric("jobs"), reservation_metric()), "a")])
    assert PolicyReads.from_json(reads.as_json()) == reads
    assert PolicyReads.of([policy(queue_metric("jobs"))]).beyond(reads) == []


def test_given_token_pairs_in_the_stack_output_then_they_read_back_and_none_said_is_unknown() -> (
    None
):
    prometheus = {
        "type": "Prometheus",
        "prometheus": {"query": "up", "serverAddress": "https://Prom", "bearerTokenSecret": "t"},
        "target": {"type": "Value", "value": 1},
    }
    reads = PolicyReads.of([policy(prometheus)])
    written = reads.as_json()
    assert written["tokenOrigins"] == [["t", "https://prom:443"]]
    assert PolicyReads.from_json(written) == reads
    older = {k: v for k, v in written.items() if k != "tokenOrigins"}
    assert PolicyReads.from_json(older).token_origins is None  # a stack from before the pairs

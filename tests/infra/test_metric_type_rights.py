"""The evaluate function's rights come from the metric types' descriptors: a type's reads
are granted without the stack naming the type."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from nodescaler.domain.policy import NodeGroupPolicy, descriptors
from nodescaler.domain.policy.descriptors import MetricReads, MetricType

from infra import permissions


def _schedule_policy() -> NodeGroupPolicy:
    entry = {"start": "0 8 * * *", "end": "0 18 * * *", "replicas": 3}
    metric = {"type": "Schedule", "schedule": {"entries": [entry]}}
    return NodeGroupPolicy.model_validate(
        {
            "metadata": {"name": "web"},
            "spec": {"minReplicas": 1, "maxReplicas": 5, "metrics": [metric]},
        }
    )


def _rendered(statements: list[Any]) -> list[Any]:
    stack = cdk.Stack(cdk.App(), "Rights")
    return [stack.resolve(s.to_statement_json()) for s in statements]


def test_given_a_metric_type_whose_descriptor_reads_a_queue_and_a_secret_then_evaluate_may_read_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given a policy whose metric type reads nothing, When its descriptor says it reads a
    queue, a workspace and a secret and sizes a warm pool, Then the rights name them."""
    policy = _schedule_policy()
    model = type(policy.spec.metrics[0])
    assert permissions.read_policy_queues([policy]) is None
    assert permissions.query_prometheus([policy]) == []
    fake = MetricReads(
        sqs_queues=frozenset({"arn:aws:sqs:eu-west-1:111122223333:fake"}),
        prometheus_workspaces=frozenset(
            {("arn:aws:aps:eu-west-1:111122223333:workspace/ws-f", None)}
        ),
        secrets=frozenset({"arn:aws:secretsmanager:eu-west-1:111122223333:secret:fake-AbCdEf"}),
        sizes_warm_pool=True,
    )
    monkeypatch.setitem(descriptors._BY_MODEL, model, MetricType(model, lambda m: fake))

    queues = permissions.read_policy_queues([policy])
    assert queues is not None
    rendered = _rendered([queues, *permissions.query_prometheus([policy])])
    assert [(s["Action"], s["Resource"]) for s in rendered] == [
        (
            ["sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
            "arn:aws:sqs:eu-west-1:111122223333:fake",
        ),
        ("aps:QueryMetrics", "arn:aws:aps:eu-west-1:111122223333:workspace/ws-f"),
        (
            "secretsmanager:GetSecretValue",
            "arn:aws:secretsmanager:eu-west-1:111122223333:secret:fake-AbCdEf",
        ),
    ]
    assert permissions.sizes_warm_pools([policy]) is True

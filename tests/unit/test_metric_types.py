"""A metric type is declared once: its model, its descriptor (what it reads, whether it reads
the cluster) and its producer's factory; nothing outside domain/policy branches on it."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
from typing import get_args

import boto3
import pytest
from nodescaler.domain.policy import MetricSpec, NodeGroupPolicy
from nodescaler.domain.policy.descriptors import METRIC_TYPES, MetricReads, MetricType
from nodescaler.domain.policy.versions import PolicyReads
from nodescaler.wiring import AwsClients, metric_producers

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "layers/core/python/nodescaler"
MODELS = get_args(get_args(MetricSpec)[0])
# Modules allowed to name several metric types, and why.
NAMES_SEVERAL = {
    # the Kubernetes producer: it reads both metric types that read the cluster
    PACKAGE / "service/cluster_view.py",
    # the sandbox checks a scenario supplies what its CloudWatch and Prometheus metrics read
    REPO / "tools/nodescaler_sandbox/scenario_file.py",
    # the "CA tuned" baseline turns each policy kind into the Cluster Autoscaler setting an
    # operator would pick for it (a buffer into placeholder pods, a schedule into actions)
    REPO / "tools/nodescaler_sandbox/baseline_tuning.py",
}


def test_given_every_metric_model_then_each_has_exactly_one_descriptor() -> None:
    described = Counter(t.model for t in METRIC_TYPES)
    assert sorted(m.__name__ for m in MODELS) == sorted(m.__name__ for m in described)
    assert [m.__name__ for m, count in described.items() if count != 1] == []


def _metric_classes_named(path: Path) -> set[str]:
    names = {m.__name__ for m in MODELS}
    tree = ast.parse(path.read_text(), str(path))
    found = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    imported = (n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    found |= {alias.name for node in imported for alias in node.names}
    return found & names


def test_given_the_code_then_only_domain_policy_names_several_metric_types() -> None:
    """Wiring, the stored-policy check and the stack's rights iterate the descriptors: a
    module that names several metric classes is branching on them."""
    roots = [PACKAGE, REPO / "infra", REPO / "functions", REPO / "tools"]
    files = {f for root in roots for f in root.rglob("*.py") if not f.is_symlink()}
    several = {
        str(f.relative_to(REPO)): sorted(named)
        for f in sorted(files)
        if (PACKAGE / "domain/policy") not in f.parents
        and f not in NAMES_SEVERAL
        and len(named := _metric_classes_named(f)) > 1
    }
    assert several == {}


def test_given_the_evaluate_function_then_every_metric_read_from_a_source_has_a_producer() -> None:
    clients = AwsClients(boto3.Session(region_name="eu-west-1"))
    cluster = object()  # stands in for the Kubernetes producer
    producers = metric_producers(clients, cluster)  # type: ignore[arg-type]
    unserved = [
        t.kind for t in METRIC_TYPES if not t.model.reads_history and not producers.serves(t.model)
    ]
    assert unserved == []


def test_given_a_metric_type_reading_the_cluster_then_its_policy_reads_kubernetes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whether a policy reads the cluster is its metric types' descriptors' word."""
    entry = {"start": "0 8 * * *", "end": "0 18 * * *", "replicas": 3}
    metric = {"type": "Schedule", "schedule": {"entries": [entry]}}
    policy = NodeGroupPolicy.model_validate(
        {
            "metadata": {"name": "web"},
            "spec": {"minReplicas": 1, "maxReplicas": 5, "metrics": [metric]},
        }
    )
    assert PolicyReads.of([policy]).kubernetes is False
    from nodescaler.domain.policy import descriptors

    schedule = descriptors.metric_type(policy.spec.metrics[0])
    monkeypatch.setitem(
        descriptors._BY_MODEL,
        schedule.model,
        MetricType(schedule.model, lambda m: MetricReads(sqs_queues=frozenset({"q"})), True),
    )
    reads = PolicyReads.of([policy])
    assert (reads.kubernetes, reads.sqs_queues) == (True, frozenset({"q"}))
    assert PolicyReads.of([policy]).beyond(PolicyReads()) == [
        "SQS queue q",
        "the Kubernetes cluster",
    ]

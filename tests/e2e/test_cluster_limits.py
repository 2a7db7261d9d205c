"""Cluster-wide limits across groups: the second group to scale up gets what is left, and
a claim lost to a group that scaled up at the same time is recomputed, not overshot."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.scaling.limits import Claims

from tests.aws import CallCounter, client, desired_capacity, make_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import TABLE, Deployment
from tests.e2e.test_handlers import GPU, training_tasks


def test_groups_scaling_up_together_stay_within_the_node_limit(
    policies: Path, calls: CallCounter, clock: VirtualClock, output: Any
) -> None:
    deployment = Deployment(policies, calls, clock, {"CLUSTER_MAX_NODES": "10"})
    make_asg("gpu-a", tags=GPU, max_size=600)
    make_asg("gpu-b", tags=GPU, max_size=600)
    training_tasks(32)  # 4 per node: each group wants 8
    deployment.tick()
    assert sorted([desired_capacity("gpu-a"), desired_capacity("gpu-b")]) == [2, 8]
    capped = [
        line["decision"]
        for line in output().logs
        if "decision" in line and "cluster-limit" in line["decision"]["limited_by"]
    ]
    assert [d["cluster_limit"] for d in capped] == ["maximum of 10 nodes"]
    assert capped[0]["reason"].endswith("capped by the cluster's maximum of 10 nodes")


def test_the_vcpu_limit_counts_each_groups_instance_type(
    policies: Path, calls: CallCounter, clock: VirtualClock
) -> None:
    deployment = Deployment(policies, calls, clock, {"CLUSTER_MAX_VCPUS": "20"})
    make_asg("gpu-a", tags=GPU, max_size=600, desired=6)  # m5.large: 12 vCPUs
    training_tasks(40)  # wants 10 nodes in each group
    make_asg("gpu-b", tags=GPU, max_size=600)
    deployment.tick()
    # both want 10 m5.large (2 vCPUs each): together they reach 20 vCPUs and stop there
    a, b = desired_capacity("gpu-a"), desired_capacity("gpu-b")
    assert (2 * (a + b), a >= 6) == (20, True)


def test_a_claim_lost_to_another_group_is_recomputed_from_what_that_group_took(
    policies: Path, calls: CallCounter, clock: VirtualClock
) -> None:
    deployment = Deployment(policies, calls, clock, {"CLUSTER_MAX_NODES": "10"})
    make_asg("gpu-a", tags=GPU, max_size=600)
    make_asg("gpu-b", tags=GPU, max_size=600)
    training_tasks(32)
    store = DynamoStateStore(client("dynamodb"), TABLE)
    limiter = deployment.evaluator.cluster.limiter
    assert limiter is not None
    real_load = store.load_claims
    raced: list[Claims] = []

    def load_then_race() -> Claims:
        """gpu-b claims 7 nodes between gpu-a's read of the claims and its write."""
        claims = real_load()
        if not raced:
            raced.append(claims)
            other = Claims(claims.version, {"gpu-b": (7, clock.now())})
            assert store.save_claims(other)
        return claims

    limiter._ledger.load_claims = load_then_race  # type: ignore[attr-defined,method-assign]
    deployment.evaluator.evaluate("gpu-a", "tick-1")
    assert desired_capacity("gpu-a") == 3  # 10 less gpu-b's fresh claim of 7
    claims = store.load_claims()
    assert claims.desired["gpu-a"][0] == 3 and claims.version == 2
    assert isinstance(claims.desired["gpu-b"][1], datetime)


def usage_reported(printed: Any) -> list[tuple[float, ...]]:
    """Each (nodes, vCPUs, GiB) the evaluate function reported, service-wide only."""
    return [
        tuple(r[name][0] for name in ("ClusterNodes", "ClusterVcpus", "ClusterMemoryGiB"))
        for r in printed.emf
        if "ClusterNodes" in r and r["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["service"]]
    ]


def test_given_limits_then_each_batch_reports_the_usage_the_limiter_counts_once(
    policies: Path, calls: CallCounter, clock: VirtualClock, output: Any
) -> None:
    """Given limits on nodes and vCPUs, two groups scaling up (m5.large: 2 vCPUs, 8 GiB,
    https://aws.amazon.com/ec2/instance-types/m5/) and one idle at 3; When a tick's
    evaluations run as one batch; Then the batch reports, once and service-wide, the
    cluster's nodes, vCPUs and GiB after its resizes: what the limiter counts."""
    limits = {"CLUSTER_MAX_NODES": "10", "CLUSTER_MAX_VCPUS": "40"}
    deployment = Deployment(policies, calls, clock, limits)
    make_asg("gpu-a", tags=GPU, max_size=600)
    make_asg("gpu-b", tags=GPU, max_size=600)
    make_asg("idle", tags=GPU, desired=3, min_size=3, max_size=3)
    training_tasks(12)
    deliveries = deployment.tick()
    nodes = sum(desired_capacity(g) for g in ("gpu-a", "gpu-b", "idle"))
    assert nodes > 3 and len(deliveries) == 1  # scaled up, in one batch
    assert usage_reported(output()) == [(nodes, 2 * nodes, 8 * nodes)]
    limiter = deployment.evaluator.cluster.limiter
    assert limiter is not None
    counted = limiter.usage(clock.now())
    assert (counted.nodes, counted.vcpus, counted.memory_gib) == (nodes, 2 * nodes, 8 * nodes)


def test_a_fresh_claim_counts_in_the_usage_as_it_does_against_the_limit(
    policies: Path, calls: CallCounter, clock: VirtualClock, output: Any
) -> None:
    """Given gpu-b's claim of 7 nodes its ASG does not show yet, and gpu-a at 2; When a tick
    evaluates gpu-a; Then the usage reported is 9 nodes, and gpu-a's ceiling is what the
    node limit leaves beside gpu-b's 7: the figure and the limit count alike."""
    deployment = Deployment(policies, calls, clock, {"CLUSTER_MAX_NODES": "10"})
    make_asg("gpu-a", tags=GPU, max_size=600, desired=2, min_size=2)
    make_asg("gpu-b", tags=GPU, max_size=600)
    store = DynamoStateStore(client("dynamodb"), TABLE)
    assert store.save_claims(Claims(0, {"gpu-b": (7, clock.now())}))
    deployment.tick()
    (reported,) = usage_reported(output())
    assert reported[0] == 9
    limiter = deployment.evaluator.cluster.limiter
    assert limiter is not None
    gpu_a = deployment.evaluator.node_groups.get("gpu-a")
    assert gpu_a is not None
    ceiling, _ = limiter.ceiling(gpu_a, clock.now())
    assert ceiling is not None and ceiling.nodes == 10 - 7


def test_given_no_limits_then_no_usage_is_read_or_reported(
    deployment: Deployment, output: Any
) -> None:
    make_asg("gpu-a", tags=GPU, max_size=600, desired=2, min_size=2)
    deployment.tick()
    assert deployment.evaluator.cluster.limiter is None
    assert output().metric("ClusterNodes") == [] and output().metric("ClusterVcpus") == []


def test_given_the_usage_cannot_be_read_then_the_batch_still_succeeds_and_says_so(
    policies: Path, calls: CallCounter, clock: VirtualClock, output: Any
) -> None:
    """Given limits and a state table that refuses the claims' read after the evaluations;
    When a tick's batch ends; Then none of its evaluations fails for it (none is retried),
    no usage is reported, and a warning says why."""
    deployment = Deployment(policies, calls, clock, {"CLUSTER_MAX_NODES": "10"})
    make_asg("gpu-a", tags=GPU, max_size=600, desired=2, min_size=2)
    limiter = deployment.evaluator.cluster.limiter
    assert limiter is not None

    def refused() -> Claims:
        raise ClientError({"Error": {"Code": "AccessDeniedException"}}, "GetItem")

    limiter._ledger.load_claims = refused  # type: ignore[attr-defined,method-assign]
    (delivery,) = deployment.tick()
    printed = output()
    assert delivery.failed == () and usage_reported(printed) == []
    assert any(
        m.startswith("cluster usage against its limits not reported: ")
        and "AccessDeniedException" in m
        for m in printed.messages("WARNING")
    )

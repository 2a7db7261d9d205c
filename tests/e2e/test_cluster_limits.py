"""Cluster-wide limits across groups: the second group to scale up gets what is left, and
a claim lost to a group that scaled up at the same time is recomputed, not overshot."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.domain.limits import Claims

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
    limiter = deployment.evaluator.limiter
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

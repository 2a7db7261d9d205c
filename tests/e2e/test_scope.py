"""Which groups a deployment may resize, end to end over moto: only its cluster's (a group
whose cluster tag names another cluster is never resized, even by an evaluation request
for it), only the groups that name no cluster for a deployment of none (`allGroups`), and
only those cdk.json's `allowedGroups` names, the others named as not allowed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler_sandbox.lambda_local import LocalContext

from functions.evaluate import handler as evaluate
from tests.aws import CallCounter, client, desired_capacity, make_asg
from tests.builders import VirtualClock
from tests.e2e.conftest import ROOT, TABLE, Deployment, evaluation_record, event
from tests.e2e.test_handlers import GPU, training_tasks

CLUSTER_TAG = "nodescaler/cluster"


@pytest.fixture
def queue_policy(tmp_path: Path) -> Path:
    """The queue-driven policy alone: no Kubernetes metric, so no cluster is read."""
    folder = tmp_path / "policies"
    folder.mkdir()
    (folder / "gpu-training.yaml").write_text((ROOT / "policies/gpu-training.yaml").read_text())
    return folder


def deployed(folder: Path, calls: CallCounter, clock: VirtualClock, **env: str) -> Deployment:
    return Deployment(folder, calls, clock, environment=env)


def evaluate_now(deployment: Deployment, group: str, message: str) -> dict[str, Any]:
    """An evaluation request for `group` handled at once, as if queued (or forged)."""
    record = evaluation_record(group, f"request-{message}", message)
    result: dict[str, Any] = evaluate.handler(
        record, LocalContext(), evaluator=deployment.evaluator
    )
    return result


def test_given_a_group_tagged_for_another_cluster_then_neither_a_tick_nor_a_request_resizes_it(
    queue_policy: Path, calls: CallCounter, clock: VirtualClock
) -> None:
    # Given a deployment for cluster prod; three opted-in groups: prod's, staging's, and one
    # naming no cluster; work enough for 2 nodes each
    prod = deployed(queue_policy, calls, clock, CLUSTER_NAME="prod")
    make_asg("prod-gpu", tags=GPU | {CLUSTER_TAG: "prod"}, max_size=10)
    make_asg("staging-gpu", tags=GPU | {CLUSTER_TAG: "staging"}, max_size=10)
    make_asg("untagged-gpu", tags=GPU, max_size=10)
    training_tasks(8)

    # When a tick runs, and then an evaluation request names each of the others directly
    prod.tick()
    evaluate_now(prod, "staging-gpu", "m-1")
    evaluate_now(prod, "untagged-gpu", "m-2")

    # Then only prod's group grew; the others (whose cluster tag names another cluster, or
    # none) were never resized, whatever asked
    sizes = {g: desired_capacity(g) for g in ("prod-gpu", "staging-gpu", "untagged-gpu")}
    assert sizes == {"prod-gpu": 2, "staging-gpu": 0, "untagged-gpu": 0}
    assert calls.calls["SetDesiredCapacity"] == 1


def test_given_a_deployment_of_no_cluster_then_groups_naming_a_cluster_are_left_to_theirs(
    queue_policy: Path, calls: CallCounter, clock: VirtualClock
) -> None:
    # Given a deployment of no cluster (allGroups: true); a group tagged for cluster prod and
    # one naming no cluster, both opted in
    everything = deployed(queue_policy, calls, clock)
    make_asg("prod-gpu", tags=GPU | {CLUSTER_TAG: "prod"}, max_size=10)
    make_asg("plain-gpu", tags=GPU, max_size=10)
    training_tasks(8)

    # When a tick runs, and a request names prod's group directly
    everything.tick()
    evaluate_now(everything, "prod-gpu", "m-1")

    # Then prod's group is prod's deployment's: never resized by this one
    assert (desired_capacity("plain-gpu"), desired_capacity("prod-gpu")) == (2, 0)


ALLOWED = '["prod-web-*", "gpu-a"]'


def test_given_allowed_groups_then_a_group_outside_them_is_never_resized_and_named(
    queue_policy: Path, calls: CallCounter, clock: VirtualClock, output: Any
) -> None:
    # Given allowedGroups prod-web-* and gpu-a; four opted-in groups with work for 2 nodes
    listed = deployed(queue_policy, calls, clock, ALLOWED_GROUPS=ALLOWED)
    for name in ("prod-web-1", "gpu-a", "gpu-ab", "staging-web-1"):
        make_asg(name, tags=GPU, max_size=10)
    training_tasks(8)

    # When a tick runs, and a request names a group outside the list directly
    listed.tick()
    evaluate_now(listed, "gpu-ab", "m-1")

    # Then the prefix and the exact name grew, the others did not (gpu-ab is not gpu-a)
    sizes = {g: desired_capacity(g) for g in ("prod-web-1", "gpu-a", "gpu-ab", "staging-web-1")}
    assert sizes == {"prod-web-1": 2, "gpu-a": 2, "gpu-ab": 0, "staging-web-1": 0}
    # and each left out is named: in the dispatch log on the tick, in its status on a request
    warnings = output().messages("WARNING")
    refusal = (
        "node group {}: opted in, but not in allowedGroups (prod-web-*, gpu-a); it is never resized"
    )
    assert refusal.format("gpu-ab") in warnings
    assert refusal.format("staging-web-1") in warnings
    state = DynamoStateStore(client("dynamodb"), TABLE).load("gpu-ab")
    assert state.problems == (refusal.format("gpu-ab"),)


def test_given_allowed_groups_then_a_launch_failure_outside_them_backs_nothing_off(
    queue_policy: Path, calls: CallCounter, clock: VirtualClock, output: Any
) -> None:
    listed = deployed(queue_policy, calls, clock, ALLOWED_GROUPS=ALLOWED)
    make_asg("gpu-ab", tags=GPU, max_size=10)
    failure = event("launch-unsuccessful.json")
    failure["detail"]["AutoScalingGroupName"] = "gpu-ab"

    result = listed.dispatch(failure)

    assert result["queued"] == []
    assert DynamoStateStore(client("dynamodb"), TABLE).load("gpu-ab").backoff is None
    assert any("not in allowedGroups" in m for m in output().messages("WARNING"))

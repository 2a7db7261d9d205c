"""The deployed functions and `nodescaler apply`: a stored policy reaches the next tick
after the functions' cache expires, and a table the functions cannot read for policies
holds up no evaluation (logged and counted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler_cli.main import main

from tests.aws import client, desired_capacity, fill_queue, make_asg
from tests.e2e.conftest import TABLE, Deployment

GPU = {"nodescaler/enabled": "true", "nodescaler/policy": "gpu-training"}


def training_group(tasks: int) -> None:
    make_asg("gpu", tags=GPU, max_size=600)
    client("sqs").create_queue(QueueName="ml-training-queue")
    fill_queue("ml-training-queue", tasks)


def refuse_policy_reads(deployment: Deployment, code: str, message: str) -> None:
    """The functions' reads of the stored policies fail from now on, with `code`."""

    def refuse_policy_queries(params: dict[str, Any], **_: Any) -> None:
        if params.get("ExpressionAttributeValues", {}).get(":pk") == {"S": "POLICIES"}:
            raise ClientError({"Error": {"Code": code, "Message": message}}, "Query")

    deployment.clients.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.Query", refuse_policy_queries
    )


def test_given_an_applied_policy_then_the_tick_after_a_minute_decides_with_it(
    deployment: Deployment, policies: Path, tmp_path: Path
) -> None:
    training_group(400)
    deployment.tick()
    assert desired_capacity("gpu") == 100  # the deployed policy: 4 tasks a node

    changed = tmp_path / "gpu-training.yaml"
    changed.write_text(
        (policies / "gpu-training.yaml").read_text().replace("averageValue: 4 ", "averageValue: 2 ")
    )
    assert main(["apply", "-f", str(changed), "--table", TABLE]) == 0
    deployment.clock.advance(seconds=60)
    deployment.tick()

    assert desired_capacity("gpu") == 200
    (newest, *_) = DynamoStateStore(client("dynamodb"), TABLE).decisions("gpu")
    assert (newest.policy, newest.policy_version, newest.desired) == ("gpu-training", 1, 200)


def test_given_the_stored_policies_cannot_be_read_then_the_tick_uses_the_deployed_and_counts_it(
    deployment: Deployment, output: Any
) -> None:
    refuse_policy_reads(deployment, "AccessDeniedException", "not allowed")
    training_group(400)

    assert [d.failed for d in deployment.tick()] == [()]

    assert desired_capacity("gpu") == 100
    printed = output()
    assert printed.metric("StoredPolicyReadFailures") == [1]
    assert (
        "stored policies could not be read, the deployed policies are used: An error occurred "
        "(AccessDeniedException) when calling the Query operation: not allowed"
    ) in printed.messages("WARNING")


def test_given_stored_policy_reads_failing_past_the_staleness_limit_then_the_deployed_one_serves(
    deployment: Deployment, policies: Path, tmp_path: Path
) -> None:
    # Given a stored policy (8 tasks a node; the deployed one says 4), read once
    training_group(400)
    changed = tmp_path / "gpu-training.yaml"
    changed.write_text(
        (policies / "gpu-training.yaml").read_text().replace("averageValue: 4 ", "averageValue: 8 ")
    )
    assert main(["apply", "-f", str(changed), "--table", TABLE]) == 0
    read_at = deployment.clock.now()
    deployment.tick()
    assert desired_capacity("gpu") == 50

    # When the table then refuses every read of the stored policies (an operator's rollback
    # written meanwhile would go unseen)
    refuse_policy_reads(deployment, "ThrottlingException", "slow down")
    deployment.clock.advance(minutes=9)
    deployment.tick()
    (within, *_) = DynamoStateStore(client("dynamodb"), TABLE).decisions("gpu")
    # Then within the staleness limit (10 minutes) the policy last read still serves
    assert (within.policy_version, desired_capacity("gpu")) == (1, 50)

    deployment.clock.advance(minutes=2)
    deployment.tick()
    # And past it the deployed policy decides, as in a cold container, and the decision says why
    (stale, *_) = DynamoStateStore(client("dynamodb"), TABLE).decisions("gpu")
    assert (stale.policy_version, desired_capacity("gpu")) == ("deployed", 100)
    assert (
        f"stale stored policies: read last at {read_at:%Y-%m-%d %H:%M:%S}Z, over 10 minutes ago: "
        "the deployed policy gpu-training is used"
    ) in stale.reason

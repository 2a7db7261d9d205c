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
    def refuse_policy_queries(params: dict[str, Any], **_: Any) -> None:
        if params.get("ExpressionAttributeValues", {}).get(":pk") == {"S": "POLICIES"}:
            error = {"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}
            raise ClientError(error, "Query")

    deployment.clients.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.Query", refuse_policy_queries
    )
    training_group(400)

    assert [d.failed for d in deployment.tick()] == [()]

    assert desired_capacity("gpu") == 100
    printed = output()
    assert printed.metric("StoredPolicyReadFailures") == [1]
    assert (
        "stored policies could not be read, the deployed policies are used: An error occurred "
        "(AccessDeniedException) when calling the Query operation: not allowed"
    ) in printed.messages("WARNING")

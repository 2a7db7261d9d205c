"""What the stack deploys, made with API calls instead: for the sandbox and the tests.

Kept to what `infra/` defines (the state table's keys, the FIFO evaluation queue and its
dead-letter queue), so the sandbox and the tests run against the same shapes as AWS.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

from nodescaler.deployment import DRAIN_HOOK_TRANSITION


def create_state_table(dynamodb: Any, name: str) -> None:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def create_evaluation_queue(sqs: Any, name: str, *, max_receive_count: int = 3) -> str:
    """The FIFO evaluation queue and its FIFO dead-letter queue; returns the queue's URL."""
    fifo = {"FifoQueue": "true"}
    dlq = sqs.create_queue(QueueName=f"{name}-dlq.fifo", Attributes=fifo)["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])
    redrive = {
        "deadLetterTargetArn": dlq_arn["Attributes"]["QueueArn"],
        "maxReceiveCount": max_receive_count,
    }
    # Six times the evaluate function's timeout, as infra sets it (SQS's advice for Lambda).
    attributes = fifo | {"RedrivePolicy": json.dumps(redrive), "VisibilityTimeout": "360"}
    return str(sqs.create_queue(QueueName=f"{name}.fifo", Attributes=attributes)["QueueUrl"])


def asg_tags(group: str, tags: dict[str, str]) -> list[dict[str, Any]]:
    """Tags as CreateAutoScalingGroup takes them."""
    return [
        {
            "Key": key,
            "Value": value,
            "PropagateAtLaunch": False,
            "ResourceId": group,
            "ResourceType": "auto-scaling-group",
        }
        for key, value in tags.items()
    ]


def launch_configuration(autoscaling: Any, name: str, instance_type: str) -> None:
    """A launch configuration of `instance_type` (once: a second call leaves it be)."""
    with contextlib.suppress(autoscaling.exceptions.AlreadyExistsFault):
        autoscaling.create_launch_configuration(
            LaunchConfigurationName=name, ImageId="ami-12c6146b", InstanceType=instance_type
        )


def create_group(
    autoscaling: Any,
    name: str,
    *,
    region: str,
    tags: dict[str, str],
    min_size: int = 0,
    max_size: int = 100,
    desired: int | None = None,
    launch_configuration: str = "nodes",
    launch_template: str | None = None,
    zone: str | None = None,
) -> None:
    """An Auto Scaling group in one zone (default: the region's a), from a launch
    configuration or `launch_template`; at `desired` (default: `min_size`)."""
    launch: dict[str, Any] = {"LaunchConfigurationName": launch_configuration}
    if launch_template:
        launch = {"LaunchTemplate": {"LaunchTemplateName": launch_template, "Version": "$Latest"}}
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        **launch,
        MinSize=min_size,
        MaxSize=max_size,
        DesiredCapacity=min_size if desired is None else desired,
        AvailabilityZones=[zone or f"{region}a"],
        Tags=asg_tags(name, tags),
    )


def fill_queue(sqs: Any, queue_name: str, count: int, *, region: str, body: str = "task") -> None:
    """`count` messages in a standard queue on moto (in process, or its server run in this
    process). The first batch goes through SendMessageBatch; the rest are copied into
    moto's store, because moto rescans the whole queue on every send (2400 messages would
    take minutes). Readers still see them only through the API."""
    from moto.sqs.models import Message

    first = min(count, 10)
    if not first:
        return
    url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": body} for i in range(first)]
    )
    store = moto_queue(queue_name, region=region)
    for _ in range(count - first):
        message = Message(uuid.uuid4().hex, body)
        message.mark_sent()
        store.add_message(message)


def moto_queue(queue_name: str, *, region: str) -> Any:
    """moto's own queue object (in process, or its server run in this process)."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    return sqs_backends[DEFAULT_ACCOUNT_ID][region].get_queue(queue_name)


class MotoQueueStore:
    """A queue in moto's store (its server runs in this process), reached without a
    request: whether it holds any message, and a received one deleted as DeleteMessage
    deletes it (`lambda_local.QueueStore`)."""

    def __init__(self, queue_url: str, *, region: str) -> None:
        self._name = queue_url.rsplit("/", 1)[-1]
        self._region = region

    def holds(self) -> bool:
        return bool(moto_queue(self._name, region=self._region)._messages)

    def delete(self, receipt: str) -> None:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.sqs.models import sqs_backends

        sqs_backends[DEFAULT_ACCOUNT_ID][self._region].delete_message(self._name, receipt)


def set_queue_depth(sqs: Any, url: str, depth: int, wanted: int) -> None:
    """A standard queue holding `depth` messages made to hold `wanted`, through the API:
    more sent, or some received and deleted (PurgeQueue is allowed once a minute)."""
    while depth < wanted:
        count = min(10, wanted - depth)
        entries = [{"Id": str(i), "MessageBody": "task"} for i in range(count)]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
        depth += count
    while depth > wanted:
        taken = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=min(10, depth - wanted))
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
            for i, m in enumerate(taken["Messages"])
        ]
        sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        depth -= len(entries)


def fail_launches(ec2: Any, group: str, *, region: str) -> list[str]:
    """Undo the launches moto made for `group`, as if EC2 had had no capacity: the desired
    capacity stays, the instances are gone (moto always launches; in process, or its
    server run in this process). Returns the instance ids taken back."""
    moto_group = moto_groups(region)[group]
    gone = [state.instance.id for state in moto_group.instance_states]
    moto_group.instance_states = []
    if gone:
        ec2.terminate_instances(InstanceIds=gone)
    return gone


def group_sizes(region: str) -> dict[str, tuple[int, list[str]]]:
    """Each Auto Scaling group's desired capacity and instance ids, read straight from
    moto's store (its server runs in this process): the sandbox's world follows the
    groups every minute, and moto renders every instance of every group on each
    DescribeAutoScalingGroups (600 instances: ~80 ms a call)."""
    return {
        name: (group.desired_capacity or 0, [state.instance.id for state in group.instance_states])
        for name, group in moto_groups(region).items()
    }


def moto_groups(region: str) -> dict[str, Any]:
    """moto's own Auto Scaling groups, by name (its server runs in this process): what
    the sandbox reads, and supplies, where moto's API does not."""
    groups: dict[str, Any] = _autoscaling(region).autoscaling_groups
    return groups


def terminate_hooked(region: str, hook: str) -> set[str]:
    """The groups carrying `hook` on the way out, read from moto's store: Auto Scaling holds
    a leaving instance of each, whoever put the hook there (the stack, or evaluate)."""
    return {
        found.auto_scaling_group_name
        for found in _autoscaling(region).lifecycle_hooks.values()
        if found.name == hook and found.lifecycle_transition == DRAIN_HOOK_TRANSITION
    }


def _autoscaling(region: str) -> Any:
    from moto.autoscaling.models import autoscaling_backends
    from moto.core.models import DEFAULT_ACCOUNT_ID

    return autoscaling_backends[DEFAULT_ACCOUNT_ID][region]


class MotoItems:
    """DynamoDB's GetItem answered straight from moto's store (its server runs in this
    process), as the API answers it: the item's attributes as its JSON carries them, or
    no `Item`. For the sandbox's own reads (the timeline's look at each group's last
    decision, once a step): a request and its answer parsed, for the same item, each
    time. Items with binary attributes are refused: the API gives their bytes, this
    would give base64 (the state table holds none)."""

    def __init__(self, region: str) -> None:
        self._region = region

    def get_item(self, *, TableName: str, Key: dict[str, Any], **_: Any) -> dict[str, Any]:  # noqa: N803  (the API's names)
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.utilities import DynamoJsonEncoder

        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][self._region]
        item = backend.get_item(TableName, Key)  # read as moto reads it: always consistent
        if item is None:
            return {}
        text = json.dumps(item.attrs, cls=DynamoJsonEncoder)
        if '"B":' in text or '"BS":' in text:  # a key of its JSON (in a value: escaped)
            raise ValueError(
                f"{TableName}: an item with binary attributes: read it through the API"
            )
        return {"Item": json.loads(text)}

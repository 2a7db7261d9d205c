"""What the stack deploys, made with API calls instead: for the sandbox and the tests.

Kept to what `infra/` defines (the state table's keys, the FIFO evaluation queue and its
dead-letter queue), so the sandbox and the tests run against the same shapes as AWS.
"""

from __future__ import annotations

import json
from typing import Any


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
    attributes = fifo | {"RedrivePolicy": json.dumps(redrive), "VisibilityTimeout": "120"}
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

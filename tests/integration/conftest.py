"""moto-backed AWS for the integration tests: in-process, no network, fake credentials."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

REGION = "eu-west-1"


@pytest.fixture(autouse=True)
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield


class CallCounter:
    """Counts AWS API calls made through a client, by operation (botocore event hooks)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def watch(self, client: Any) -> Any:
        client.meta.events.register("before-call.*.*", self._count)
        return client

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1


@pytest.fixture
def calls() -> CallCounter:
    return CallCounter()


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION)


def make_asg(
    name: str,
    *,
    tags: dict[str, str] | None = None,
    desired: int = 0,
    min_size: int = 0,
    max_size: int = 100,
) -> None:
    autoscaling = client("autoscaling")
    with contextlib.suppress(autoscaling.exceptions.AlreadyExistsFault):
        autoscaling.create_launch_configuration(
            LaunchConfigurationName="nodes", ImageId="ami-12c6146b", InstanceType="m5.large"
        )
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchConfigurationName="nodes",
        MinSize=min_size,
        MaxSize=max_size,
        DesiredCapacity=desired,
        AvailabilityZones=[f"{REGION}a"],
        Tags=[
            {
                "Key": k,
                "Value": v,
                "PropagateAtLaunch": False,
                "ResourceId": name,
                "ResourceType": "auto-scaling-group",
            }
            for k, v in (tags or {}).items()
        ],
    )


def make_state_table(name: str) -> Any:
    """The state table as infra/state.py defines it; returns the DynamoDB client."""
    dynamodb = client("dynamodb")
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
    return dynamodb

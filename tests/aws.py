"""moto-backed AWS for the integration and end-to-end tests: in process, no network.

The fixtures are re-exported by those folders' conftest files."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws
from nodescaler_sandbox import provision
from nodescaler_sandbox.moto_gaps import launched_as_spot
from nodescaler_sandbox.moto_server import WITHOUT_PUBLIC_AMIS
from nodescaler_sandbox.provision import create_evaluation_queue, create_state_table

REGION = "eu-west-1"


@contextlib.contextmanager
def moto() -> Iterator[None]:
    """moto in this process, with credentials it accepts; the shared clients made afresh."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
        }.items() | WITHOUT_PUBLIC_AMIS.items():
            patch.setenv(name, value)
        _clients.clear()
        with mock_aws():
            try:
                yield
            finally:
                _clients.clear()


@pytest.fixture(autouse=True)
def aws() -> Iterator[None]:
    with moto():
        yield


class CallCounter:
    """Counts AWS API calls made through a client, by operation (botocore event hooks)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()  # the dispatcher sends its batches from several threads

    def watch(self, client: Any) -> Any:
        client.meta.events.register(
            "before-call.*.*", self._count, unique_id=f"call-counter-{id(self)}"
        )
        return client

    def _count(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls[model.name] += 1


@pytest.fixture
def calls() -> CallCounter:
    return CallCounter()


_clients: dict[str, Any] = {}  # per test: the `aws` fixture clears it


def client(service: str) -> Any:
    if service not in _clients:
        _clients[service] = boto3.client(service, region_name=REGION)
    return _clients[service]


def desired_capacity(group: str) -> int:
    described = client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[group])
    return int(described["AutoScalingGroups"][0]["DesiredCapacity"])


def make_asg(
    name: str,
    *,
    tags: dict[str, str] | None = None,
    desired: int = 0,
    min_size: int = 0,
    max_size: int = 100,
    launch_template: str | None = None,
) -> None:
    """An ASG launching m5.large from a launch configuration, or from `launch_template`."""
    autoscaling = client("autoscaling")
    if not launch_template:
        provision.launch_configuration(autoscaling, "nodes", "m5.large")
    provision.create_group(
        autoscaling,
        name,
        region=REGION,
        tags=tags or {},
        min_size=min_size,
        max_size=max_size,
        desired=desired,
        launch_template=launch_template,
    )


def make_spot_asg(name: str, *, tags: dict[str, str] | None = None, desired: int = 1) -> list[str]:
    """An ASG whose launch template asks for Spot: its instances Spot Instances, as EC2
    launches them (`moto_gaps.launched_as_spot`); returns them."""
    client("ec2").create_launch_template(
        LaunchTemplateName=f"{name}-spot",
        LaunchTemplateData={
            "InstanceType": "m5.large",
            "ImageId": "ami-12c6146b",
            "InstanceMarketOptions": {"MarketType": "spot"},
        },
    )
    make_asg(name, tags=tags, desired=desired, launch_template=f"{name}-spot")
    return launched_as_spot(REGION, name)


def make_state_table(name: str) -> Any:
    """The state table as infra/state.py defines it; returns the DynamoDB client."""
    dynamodb = client("dynamodb")
    create_state_table(dynamodb, name)
    return dynamodb


# DynamoDB's largest item: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-items
DYNAMODB_ITEM_LIMIT = 400 * 1024


def state_item_bytes(table: str, group: str) -> int:
    """The group's state item's size as DynamoDB counts it: each attribute's name and its
    value, in UTF-8 (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html)."""
    key = {"pk": {"S": f"GROUP#{group}"}, "sk": {"S": "STATE"}}
    item = client("dynamodb").get_item(TableName=table, Key=key)["Item"]
    return sum(
        len(name.encode()) + len(str(next(iter(v.values()))).encode()) for name, v in item.items()
    )


def make_evaluation_queue(name: str = "evaluations", *, max_receive_count: int = 3) -> str:
    """The FIFO evaluation queue and its dead-letter queue, as infra defines them; the URL."""
    return create_evaluation_queue(client("sqs"), name, max_receive_count=max_receive_count)


def fill_queue(queue_name: str, count: int) -> None:
    """`count` messages in a standard queue (see `provision.fill_queue`)."""
    provision.fill_queue(client("sqs"), queue_name, count, region=REGION)


def set_tasks(queue_name: str, count: int) -> None:
    """`count` messages waiting in a standard queue: more sent, or some received and
    deleted (PurgeQueue is allowed once a minute)."""
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=queue_name)["QueueUrl"]
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    waiting = int(attributes["ApproximateNumberOfMessages"])
    if count > waiting:
        fill_queue(queue_name, count - waiting)  # many at once, straight into moto's store
    else:
        provision.set_queue_depth(sqs, url, waiting, count)


def fail_launches(group: str) -> list[str]:
    """`group`'s launches failed for want of capacity (see `provision.fail_launches`)."""
    return provision.fail_launches(client("ec2"), group, region=REGION)


@contextlib.contextmanager
def refusing(aws_client: Any, service: str, operation: str) -> Iterator[None]:
    """`operation` on this client answered AccessDenied before anything else answers it
    (the sandbox's gap-fillers included): an error botocore does not retry, whose backoff
    would sleep for real."""

    def refuse(**_: Any) -> tuple[Any, dict[str, Any]]:
        metadata = {"HTTPStatusCode": 403, "HTTPHeaders": {}}
        error = {"Code": "AccessDenied", "Message": f"not allowed: {service}:{operation}"}
        return AWSResponse("https://aws.invalid/", 403, {}, None), {
            "Error": error,
            "ResponseMetadata": metadata,
        }

    event, unique = f"before-call.{service}.{operation}", f"refusing-{operation}"
    aws_client.meta.events.register_first(event, refuse, unique)
    try:
        yield
    finally:
        aws_client.meta.events.unregister(event, unique_id=unique)

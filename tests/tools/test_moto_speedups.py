"""moto's serialization, made cheaper by the sandbox (`moto_speedups`), answers what moto
answers: the same DescribeAutoScalingGroups (instances, tags, launch configuration) and
the same queue attributes, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest
from moto.core import serialize
from moto.sqs import models as sqs_models
from nodescaler_sandbox import moto_speedups

from tests.aws import aws, client, make_asg  # noqa: F401

OPTED_IN = {"nodescaler/enabled": "true", "nodescaler/policy": "batch"}


def answered(operation: Any, **request: Any) -> bytes:
    """The answer's bytes, as moto's server wrote them."""
    captured: list[bytes] = []
    events = operation.__self__.meta.events
    events.register("after-call", lambda http_response, **_: captured.append(http_response.content))
    operation(**request)
    return captured[-1]


def test_the_keys_found_once_serialize_the_groups_as_moto_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moto_speedups.install()
    found_once = serialize.XFormedAttributePicker.get_possible_keys
    assert getattr(found_once, "found_once", False)
    make_asg("a", tags=OPTED_IN, desired=3)
    make_asg("b", tags=OPTED_IN | {"k8s.io/cluster-autoscaler/node-template/label/x": "y"})
    describe = client("autoscaling").describe_auto_scaling_groups
    cheaper = [answered(describe), answered(describe)]  # the second from what was kept
    monkeypatch.setattr(serialize.XFormedAttributePicker, "get_possible_keys", found_once.whole)
    own = answered(describe)
    strip = [answer.split(b"<ResponseMetadata>")[0] for answer in [*cheaper, own]]
    assert strip[0] == strip[1] == strip[2]
    assert b"<InstanceId>" in own and b"<LaunchConfigurationName>nodes" in own


def test_a_queues_attributes_are_named_as_moto_names_them() -> None:
    moto_speedups.install()
    converted = sqs_models.camelcase_to_underscores
    assert hasattr(converted, "cache_info")
    for name in ("ApproximateNumberOfMessages", "FifoQueue", "KmsMasterKeyId", "QueueArn"):
        assert converted(name) == converted.__wrapped__(name)
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="q.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["FifoQueue"] == "true" and attributes["ApproximateNumberOfMessages"] == "0"

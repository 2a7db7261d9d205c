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


def test_the_groups_written_plainly_are_the_xml_moto_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moto_speedups.install()
    plainly = serialize.BaseXMLSerializer._serialize_body
    picked = serialize.ResponseSerializer.get_value
    assert getattr(plainly, "written_plainly", False) and getattr(picked, "without_path", False)
    make_asg("a", tags=OPTED_IN | {"odd": "a & <b> \"c\" 'd'"}, desired=3)
    make_asg("b", tags=OPTED_IN)
    describe = client("autoscaling").describe_auto_scaling_groups
    cheaper = answered(describe)
    monkeypatch.setattr(serialize.BaseXMLSerializer, "_serialize_body", plainly.whole)
    monkeypatch.setattr(serialize.ResponseSerializer, "get_value", picked.whole)
    own = answered(describe)
    strip = [answer.split(b"<ResponseMetadata>")[0] for answer in (cheaper, own)]
    assert strip[0] == strip[1]
    assert b"a &amp; &lt;b&gt; \"c\" 'd'" in own and own.count(b"<InstanceId>") == 3


PLAIN_BODIES: list[dict[str, Any]] = [
    {"R": {"@xmlns": "https://x/", "A": "1 < 2 & 3 > 0", "B": None, "C": [], "D": ["x", "y"]}},
    {"R": {"E": {"F": {}}, "G": True, "H": False, "I": 12, "J": 2.5, "K": b"bytes", "L": ""}},
    {"R": {"#text": "after", "M": "child", "@a": "q\"uo'te\n\t", "@b": None, "@c": 'say "x"'}},
    {"R": {"N": [{"O": "1"}, None, "", {"#text": None}], "P": ("t", {"Q": []})}},
    {"A": "first", "B": {"#text": ""}},
]
NOT_PLAIN_BODIES: list[dict[str, Any]] = [
    {"R": {"#comment": "a comment", "A": "1"}},
    {"R": {"@xmlns": {"p": "https://p/"}}},
    {"R": {"A": [["nested"]]}},
    {"R": {"A": {1, 2}}},
    {"R": {"bad name": "x"}},
]


@pytest.mark.parametrize("body", PLAIN_BODIES)
def test_a_plain_body_is_written_as_xmltodict_writes_it(body: dict[str, Any]) -> None:
    import xmltodict

    asked = {"full_document": False, "short_empty_elements": True, "pretty": False}
    assert moto_speedups.plain_xml(body) == xmltodict.unparse(body, **asked)


@pytest.mark.parametrize("body", NOT_PLAIN_BODIES)
def test_any_other_body_is_left_to_xmltodict(body: dict[str, Any]) -> None:
    with pytest.raises(moto_speedups._NotPlainError):
        moto_speedups.plain_xml(body)


def test_a_user_agents_parts_are_cleaned_as_botocore_cleans_them() -> None:
    from botocore import useragent

    moto_speedups.install()
    cleaned = useragent.sanitize_user_agent_string_component
    assert hasattr(cleaned, "cache_info")
    for part, allow_hash in (("Boto3/1.0", False), ("a b#c(d)", True), ("a b#c(d)", False)):
        assert cleaned(part, allow_hash) == cleaned.__wrapped__(part, allow_hash)

"""The sandbox's moto, made cheaper without changing an answer: requests answered in the
caller's thread as the server answers them, and TransactWriteItems backing up only the
items it names, rolling back exactly what moto's whole-table backup would; and its ids
drawn the same in every run."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from nodescaler_sandbox.moto_server import InProcess, answered_in_process, moto_in_this_process

REGION = "us-east-1"
TABLE = "state"


@pytest.fixture
def moto(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with moto_in_this_process() as url:
        yield url


def _dynamodb(url: str, *, in_process: bool) -> Any:
    session = boto3.Session(region_name=REGION)
    if in_process:
        answered_in_process(session.events, url)
    return session.client("dynamodb", endpoint_url=url)


def _table(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName=TABLE,
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
    for pk, sk, version in (("G#a", "STATE", "1"), ("G#b", "STATE", "1"), ("G#a", "D#1", "7")):
        dynamodb.put_item(
            TableName=TABLE, Item={"pk": {"S": pk}, "sk": {"S": sk}, "v": {"N": version}}
        )


def _items(dynamodb: Any) -> list[tuple[str, str, str]]:
    found = dynamodb.scan(TableName=TABLE)["Items"]
    return sorted((i["pk"]["S"], i["sk"]["S"], i["v"]["N"]) for i in found)


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _update(pk: str, sk: str, version: str) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": _key(pk, sk),
            "UpdateExpression": "SET v = :v",
            "ExpressionAttributeValues": {":v": {"N": version}},
        }
    }


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "over-http"])
def test_a_failed_transaction_leaves_every_item_as_it_was(moto: str, in_process: bool) -> None:
    # Given a table of three items
    dynamodb = _dynamodb(moto, in_process=in_process)
    _table(dynamodb)
    before = _items(dynamodb)
    # When a transaction updates one, puts another, deletes a third, then fails a check
    with pytest.raises(ClientError, match="TransactionCanceled"):
        dynamodb.transact_write_items(
            TransactItems=[
                _update("G#a", "STATE", "2"),  # changed in place by moto, then rolled back
                {"Put": {"TableName": TABLE, "Item": _key("G#c", "STATE") | {"v": {"N": "1"}}}},
                {"Delete": {"TableName": TABLE, "Key": _key("G#a", "D#1")}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("G#b", "STATE"),
                        "ConditionExpression": "v = :two",
                        "ExpressionAttributeValues": {":two": {"N": "2"}},
                    }
                },
            ]
        )
    # Then nothing changed
    assert _items(dynamodb) == before


def test_a_transaction_that_holds_changes_only_what_it_names(moto: str) -> None:
    dynamodb = _dynamodb(moto, in_process=True)
    _table(dynamodb)
    dynamodb.transact_write_items(
        TransactItems=[
            _update("G#a", "STATE", "2"),
            {"Delete": {"TableName": TABLE, "Key": _key("G#a", "D#1")}},
        ]
    )
    assert _items(dynamodb) == [("G#a", "STATE", "2"), ("G#b", "STATE", "1")]
    # and a later failed transaction rolls back to that state, not an older one
    with pytest.raises(ClientError, match="TransactionCanceled"):
        dynamodb.transact_write_items(
            TransactItems=[
                _update("G#b", "STATE", "5"),
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("G#a", "STATE"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )
    assert _items(dynamodb) == [("G#a", "STATE", "2"), ("G#b", "STATE", "1")]


def test_in_process_answers_are_the_servers_and_other_endpoints_go_by(moto: str) -> None:
    over_http = _dynamodb(moto, in_process=False)
    in_process = _dynamodb(moto, in_process=True)
    _table(in_process)
    assert _items(in_process) == _items(over_http)
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        in_process.describe_table(TableName="missing")  # an error, as the server says it
    assert InProcess(moto)(_Request("http://127.0.0.1:1/elsewhere")) is None


class _Request:
    def __init__(self, url: str) -> None:
        self.url = url


def test_a_query_answers_its_partition_in_order_as_moto_does(moto: str) -> None:
    # Given two partitions, each with its state and audit items
    dynamodb = _dynamodb(moto, in_process=True)
    _table(dynamodb)
    for pk, sk in (("G#b", "D#2"), ("G#a", "D#3"), ("G#a", "D#2"), ("G#b", "D#1")):
        dynamodb.put_item(TableName=TABLE, Item=_key(pk, sk) | {"v": {"N": "0"}})

    def query(**extra: Any) -> tuple[list[str], Any]:
        page = dynamodb.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": {"S": "G#a"}, ":prefix": {"S": "D#"}},
            **extra,
        )
        return [i["sk"]["S"] for i in page["Items"]], page.get("LastEvaluatedKey")

    # Then a query reads its partition's items alone, in order either way, page by page
    assert query() == (["D#1", "D#2", "D#3"], None)
    newest, last = query(ScanIndexForward=False, Limit=2)
    assert newest == ["D#3", "D#2"]
    assert query(ScanIndexForward=False, Limit=2, ExclusiveStartKey=last)[0] == ["D#1"]
    missing = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": "G#none"}},
    )
    assert missing["Items"] == []


_LAUNCH_IN_A_NEW_PROCESS = """
import random, sys
import boto3
from nodescaler_sandbox.moto_server import answered_in_process, moto_in_this_process
random.seed(sys.argv[1])  # whatever else the process draws
with moto_in_this_process() as url:
    session = boto3.Session(region_name=sys.argv[2])
    answered_in_process(session.events, url)
    ec2 = session.client("ec2", endpoint_url=url)
    for _ in range(int(sys.argv[3])):  # reads before the launch, each a request id drawn
        ec2.describe_instances()
    launched = ec2.run_instances(ImageId="ami-12c6146b", MinCount=3, MaxCount=3)
    print(" ".join(i["InstanceId"] for i in launched["Instances"]))
"""


def _launched_in_a_new_process(seed: str, reads: int = 0) -> list[str]:
    args = [sys.executable, "-c", _LAUNCH_IN_A_NEW_PROCESS, seed, REGION, str(reads)]
    run = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120)
    return run.stdout.split()


def test_given_two_runs_in_new_processes_then_their_instance_ids_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The nodes' names come from the instance ids, and the scheduler breaks ties by name:
    # a run replayed must draw the same ids whatever else its process draws, or its figures
    # move from one run to the next. New processes: moto's stores are the process's, and a
    # launch template another test made in it (`tests/tools/test_moto_gaps.py`) outlives
    # the reset in what it draws
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    runs = [_launched_in_a_new_process(seed) for seed in ("one", "two")]
    assert runs[0] == runs[1]
    assert len(set(runs[0])) == 3


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "over-http"])
def test_given_messages_visible_delayed_and_in_flight_then_each_is_counted_once(
    moto: str, in_process: bool
) -> None:
    # Given a queue with 3 messages sent, 1 sent with a delay, and 1 of the 3 received
    session = boto3.Session(region_name=REGION)
    if in_process:
        answered_in_process(session.events, moto)
    sqs = session.client("sqs", endpoint_url=moto)
    url = sqs.create_queue(QueueName="tasks")["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "task"} for i in range(3)]
    )
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=900)
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=600)
    assert len(received["Messages"]) == 1
    # When its counts are read
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    # Then 2 are visible, 1 delayed, and the one received in flight, as moto itself counts
    assert attributes["ApproximateNumberOfMessages"] == "2"
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert attributes["ApproximateNumberOfMessagesNotVisible"] == "1"


def test_given_a_read_more_before_a_launch_then_the_instance_ids_are_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A sandbox that makes one call fewer (a cheaper step) still names its nodes alike:
    # a request's id is drawn too, from moto's generator, not from the instances'
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert _launched_in_a_new_process("one", reads=0) == _launched_in_a_new_process("one", reads=3)


def test_a_request_to_moto_here_carries_the_stand_in_signature_in_its_region(moto: str) -> None:
    from botocore import auth
    from nodescaler_sandbox.moto_server import UNCHECKED_SIGNATURE

    assert getattr(auth.SigV4Auth.add_auth, "stand_in_for_moto", False)
    sent: list[dict[str, str]] = []
    session = boto3.Session(region_name="eu-west-1")
    answered_in_process(session.events, moto)
    sqs = session.client("sqs", endpoint_url=moto)
    sqs.meta.events.register("before-send", lambda request, **_: sent.append(request.headers))
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    # moto read the region and the account from the credential scope, as from a signature
    assert arn["QueueArn"] == "arn:aws:sqs:eu-west-1:123456789012:q"
    authorization = sent[-1]["Authorization"]
    authorization = authorization.decode() if isinstance(authorization, bytes) else authorization
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=testing/")
    assert "/eu-west-1/sqs/aws4_request" in authorization
    assert authorization.endswith(f"Signature={UNCHECKED_SIGNATURE}") and "X-Amz-Date" in sent[-1]


def test_a_request_elsewhere_is_signed_as_botocore_signs_it(moto: str) -> None:
    from botocore import auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    signed = []
    for add_auth in (auth.SigV4Auth.add_auth, auth.SigV4Auth.add_auth.whole):
        request = AWSRequest("POST", "https://sqs.eu-west-1.amazonaws.com/", data=b"x")
        signer = auth.SigV4Auth(Credentials("key", "secret"), "sqs", "eu-west-1")
        request.context["timestamp"] = "20261129T000000Z"
        add_auth(signer, request)
        signed.append(request.headers["Authorization"])
    assert signed[0].split("Signature=")[1] != "0" * 64
    assert signed[0].split(", Signature=")[0] == signed[1].split(", Signature=")[0]

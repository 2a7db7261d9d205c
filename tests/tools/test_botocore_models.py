"""One botocore loader for every session of the process (`botocore_models.loaded_once`):
each service model is read once, and clients of different sessions still work alone."""

from __future__ import annotations

import boto3
from moto import mock_aws
from nodescaler_sandbox import botocore_models


def loader(session: boto3.session.Session) -> object:
    return session._session.get_component("data_loader")


def test_given_two_sessions_then_they_share_one_loader_and_each_model_is_read_once() -> None:
    botocore_models.loaded_once()
    botocore_models.loaded_once()  # idempotent: not a cache of a cache
    first, second = boto3.session.Session(), boto3.session.Session()
    assert loader(first) is loader(second)
    # the model one session read is the model the other gets, not a second parse
    model = first._session.get_service_model("autoscaling")
    assert second._session.get_service_model("autoscaling").shape_for("AutoScalingGroup")
    assert loader(first).load_service_model("autoscaling", "service-2") is loader(
        second
    ).load_service_model("autoscaling", "service-2")
    assert model.service_name == "autoscaling"


def test_given_clients_of_two_sessions_then_each_answers_for_its_own_region() -> None:
    botocore_models.loaded_once()
    with mock_aws():
        sessions = [
            boto3.session.Session(aws_access_key_id="k", aws_secret_access_key="s", region_name=r)
            for r in ("eu-west-1", "us-east-1")
        ]
        queues = [s.client("sqs") for s in sessions]
        queues[0].create_queue(QueueName="only-in-ireland")
        assert len(queues[0].list_queues()["QueueUrls"]) == 1
        assert "QueueUrls" not in queues[1].list_queues()


def test_given_many_sessions_then_the_shared_loaders_search_paths_do_not_grow() -> None:
    botocore_models.loaded_once()
    boto3.session.Session()  # boto3 adds its data folder to the loader's search paths
    before = list(loader(boto3.session.Session()).search_paths)
    for _ in range(20):
        boto3.session.Session()
    assert loader(boto3.session.Session()).search_paths == before

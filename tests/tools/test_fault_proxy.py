"""The fault proxy in front of moto's server: each protocol's throttling error is one botocore
retries as throttling, 5xx and resets are retried, late calls still arrive, a seed replays
the same faults, and only the calls it may fault are faulted."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.retries.standard import ThrottledRetryableChecker
from nodescaler_bench.aws import REGION, fake_credentials, moto_server
from nodescaler_bench.faults import botocore_retries, functions_only
from nodescaler_sandbox.faults import Fault, FaultProxy

pytestmark = pytest.mark.slow  # moto's server

# One cheap call per service nodescaler uses, one per protocol at least.
CALLS: dict[str, Callable[[Any], Any]] = {
    "autoscaling": lambda c: c.describe_auto_scaling_groups(),  # query
    "sts": lambda c: c.get_caller_identity(),  # query
    "ec2": lambda c: c.describe_instances(),  # ec2
    "dynamodb": lambda c: c.list_tables(),  # json
    "sqs": lambda c: c.list_queues(),  # json, once query
    "cloudwatch": lambda c: c.list_metrics(),  # smithy-rpc-v2-cbor, once query
    "eks": lambda c: c.list_clusters(),  # rest-json
    "lambda": lambda c: c.list_functions(),  # rest-json
}
THROTTLING = frozenset(ThrottledRetryableChecker._THROTTLED_ERROR_CODES)


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    with fake_credentials(), botocore_retries(), moto_server() as url:
        yield url


def client(service: str, endpoint: str, attempts: int = 2, marked: bool = False) -> Any:
    config = Config(
        retries={"mode": "standard", "total_max_attempts": attempts},
        user_agent_extra="nodescaler" if marked else None,
    )
    return boto3.client(service, region_name=REGION, endpoint_url=endpoint, config=config)


@pytest.mark.parametrize("service", CALLS)
def test_a_throttled_call_carries_a_code_botocore_retries_as_throttling(
    moto: str, service: str
) -> None:
    proxy = FaultProxy(moto, rate=1, persistence=1, weights={Fault.THROTTLE: 1})
    with proxy, pytest.raises(ClientError) as raised:
        CALLS[service](client(service, proxy.url))
    error = raised.value.response
    assert error["Error"]["Code"] in THROTTLING
    assert error["ResponseMetadata"]["RetryAttempts"] == 1  # retried, then given up
    assert proxy.injected == {Fault.THROTTLE: 2}
    assert proxy.forwarded == []  # a faulted call never reaches AWS


@pytest.mark.parametrize("fault", [Fault.SERVER_ERROR, Fault.RESET, Fault.DELAY])
@pytest.mark.parametrize("service", ["autoscaling", "dynamodb", "cloudwatch", "eks"])
def test_when_a_fault_does_not_last_then_the_retry_gets_through(
    moto: str, service: str, fault: Fault
) -> None:
    with FaultProxy(moto, rate=1, persistence=0, weights={fault: 1}) as proxy:
        response = CALLS[service](client(service, proxy.url))
    retried = 0 if fault is Fault.DELAY else 1  # a late answer is still an answer
    assert response["ResponseMetadata"]["RetryAttempts"] == retried
    assert proxy.injected == {fault: 1}
    assert [c.status for c in proxy.forwarded] == [200]


def test_when_a_fault_persists_then_every_attempt_is_faulted(moto: str) -> None:
    proxy = FaultProxy(moto, rate=1, persistence=1, weights={Fault.SERVER_ERROR: 1})
    with proxy, pytest.raises(ClientError, match="reached max retries: 3"):
        client("dynamodb", proxy.url, attempts=4).list_tables()
    assert proxy.injected == {Fault.SERVER_ERROR: 4}


def test_a_seed_replays_the_same_faults(moto: str) -> None:
    def faults_seen(seed: int) -> list[object]:
        with FaultProxy(moto, rate=0.5, seed=seed) as proxy:
            dynamodb = client("dynamodb", proxy.url, attempts=1)
            seen: list[object] = []
            for _ in range(20):
                try:
                    dynamodb.list_tables()
                    seen.append("ok")
                except Exception as error:
                    seen.append(type(error).__name__)
        return seen

    assert faults_seen(3) == faults_seen(3)
    assert faults_seen(3) != faults_seen(4)


def test_only_the_calls_it_may_fault_are_faulted(moto: str) -> None:
    with FaultProxy(moto, rate=1, weights={Fault.SERVER_ERROR: 1}, faulted=functions_only) as proxy:
        client("dynamodb", proxy.url).list_tables()  # the world's call: untouched
        with pytest.raises(Exception):  # noqa: B017 - any fault will do
            client("dynamodb", proxy.url, attempts=1, marked=True).list_tables()
    assert sum(proxy.injected.values()) == 1


def test_the_writes_that_reached_aws_are_logged_with_their_parameters(moto: str) -> None:
    autoscaling = boto3.client("autoscaling", region_name=REGION, endpoint_url=moto)
    autoscaling.create_launch_configuration(
        LaunchConfigurationName="lc", ImageId="ami-12c6146b", InstanceType="m5.large"
    )
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="web",
        LaunchConfigurationName="lc",
        MinSize=0,
        MaxSize=5,
        AvailabilityZones=[f"{REGION}a"],
    )
    with FaultProxy(moto) as proxy:
        client("autoscaling", proxy.url).set_desired_capacity(
            AutoScalingGroupName="web", DesiredCapacity=2
        )
    (write,) = proxy.writes("SetDesiredCapacity")
    assert (
        write.service,
        write.params["AutoScalingGroupName"],
        write.params["DesiredCapacity"],
    ) == (
        "autoscaling",
        "web",
        "2",
    )

"""The AWS clients and the clock every function shares, made once per cold start.

Clients share one botocore Config (adaptive retries, short timeouts) and are made on first
use, so the dispatch function never pays for the clients only evaluate needs. Tests and the
sandbox pass their own `AwsClients` (moto) and clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import boto3
from botocore.config import Config

BOTO_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": 5},
    connect_timeout=3,
    read_timeout=10,
    user_agent_extra="nodescaler",
)


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class AwsClients:
    """One boto3 client per service, made on first use from one session and one Config."""

    def __init__(
        self,
        session: boto3.Session | None = None,
        *,
        config: Config = BOTO_CONFIG,
        endpoint_url: str | None = None,  # the sandbox's moto server
        amp_endpoint_url: str | None = None,  # the sandbox's Prometheus, for every AMP workspace
    ) -> None:
        self._session = session or boto3.Session()
        self._config = config
        self._endpoint_url = endpoint_url
        self.amp_endpoint_url = amp_endpoint_url

    def _client(self, service: str) -> Any:
        return self._session.client(service, config=self._config, endpoint_url=self._endpoint_url)

    @cached_property
    def autoscaling(self) -> Any:
        return self._client("autoscaling")

    @cached_property
    def eks(self) -> Any:
        return self._client("eks")

    @cached_property
    def sqs(self) -> Any:
        return self._client("sqs")

    @cached_property
    def cloudwatch(self) -> Any:
        return self._client("cloudwatch")

    @cached_property
    def dynamodb(self) -> Any:
        return self._client("dynamodb")

    @cached_property
    def events(self) -> Any:
        return self._client("events")

    @cached_property
    def sts(self) -> Any:
        return self._client("sts")

    @cached_property
    def ec2(self) -> Any:
        return self._client("ec2")

    @cached_property
    def arc_zonal_shift(self) -> Any:
        return self._client("arc-zonal-shift")

    @cached_property
    def secretsmanager(self) -> Any:
        return self._client("secretsmanager")

    @property
    def session(self) -> boto3.Session:
        return self._session

    def client(self, service: str, config: Config) -> Any:
        """A client with its own Config (the custom expander's time budget)."""
        return self._session.client(
            service, config=self._config.merge(config), endpoint_url=self._endpoint_url
        )

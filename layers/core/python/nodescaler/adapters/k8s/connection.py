"""How nodescaler reaches a cluster's API server: an EKS cluster by name, any cluster
through a Secrets Manager secret (`access.py`), or a kubeconfig file (the sandbox).

EKS: the endpoint and CA come from `eks:DescribeCluster`; the bearer token is a presigned
STS GetCallerIdentity URL carrying the `x-k8s-aws-id` header (aws-iam-authenticator's
format, valid 15 minutes). Both are kept for the warm container; the token is renewed
after 14 minutes, or at once when the server answers 401.
"""

from __future__ import annotations

import base64
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.adapters.aws import describe_aws_error
from nodescaler.adapters.k8s.secret_access import NOTHING_PINNED, Pinned, read_access
from nodescaler.domain.outside_text import outside
from nodescaler.errors import KubernetesUnavailableError
from nodescaler.ports import Clock

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
TOKEN_LIFETIME = timedelta(minutes=14)  # STS presigned URLs are honoured for 15


def eks_token(sts: Any, cluster_name: str) -> str:
    """A bearer token for `cluster_name`, signed with the STS client's credentials."""

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    sts.meta.events.register_first("before-sign.sts.GetCallerIdentity", add_cluster_header)
    try:
        url = sts.generate_presigned_url(
            "get_caller_identity", Params={}, ExpiresIn=60, HttpMethod="GET"
        )
    finally:
        sts.meta.events.unregister("before-sign.sts.GetCallerIdentity", add_cluster_header)
    encoded = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    return TOKEN_PREFIX + encoded


def client_configuration(host: str = "http://localhost") -> Any:
    """The `kubernetes` client's configuration, but for its retries. urllib3 sends a
    request again up to three times by default, also when its answer timed out: four
    timeouts for one API server that does not answer. Here a request is sent again once,
    and only when it could not connect (it never left)."""
    from kubernetes import client
    from urllib3.util.retry import Retry

    configuration = client.Configuration(host=host)
    configuration.retries = Retry(total=1, read=0)
    return configuration


class EksConnection:
    def __init__(self, eks: Any, sts: Any, cluster_name: str, clock: Clock) -> None:
        self._eks = eks
        self._sts = sts
        self._cluster = cluster_name
        self._clock = clock
        self._api: Any = None
        self._token_at: datetime | None = None

    def api(self) -> Any:
        if self._api is None:
            from kubernetes import client

            cluster = self._describe()
            ca = tempfile.NamedTemporaryFile(  # noqa: SIM115  (kept for the container's life)
                prefix="eks-ca-", suffix=".crt", delete=False
            )
            ca.write(base64.b64decode(cluster["certificateAuthority"]["data"]))
            ca.close()
            configuration = client_configuration(cluster["endpoint"])
            configuration.ssl_ca_cert = ca.name
            # "authorization" is the key every client generation reads for BearerToken
            configuration.api_key_prefix = {"authorization": "Bearer"}
            configuration.refresh_api_key_hook = self._refresh_if_old
            self._refresh_if_old(configuration)  # clients look for a key before refreshing it
            self._api = client.ApiClient(configuration)
        return self._api

    def _describe(self) -> Any:
        """The cluster's endpoint and CA; a cluster EKS does not show (gone, misnamed, or
        the call refused) is an API server that cannot be reached, not a failed evaluation:
        the cluster's metrics read as missing and the others still decide."""
        try:
            return self._eks.describe_cluster(name=self._cluster)["cluster"]
        except (BotoCoreError, ClientError) as error:
            raise KubernetesUnavailableError(
                f"EKS cluster {outside(self._cluster)}: {outside(describe_aws_error(error))}"
            ) from None

    def _refresh_if_old(self, configuration: Any) -> None:
        now = self._clock.now()
        if self._token_at is None or now - self._token_at >= TOKEN_LIFETIME:
            configuration.api_key = {"authorization": eks_token(self._sts, self._cluster)}
            self._token_at = now

    def renew(self) -> None:
        self._token_at = None  # the next request signs a new token


class KubeconfigConnection:
    """A kubeconfig file's current context (the sandbox and tests use one)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._api: Any = None

    def api(self) -> Any:
        if self._api is None:
            from kubernetes import config

            self._api = config.new_client_from_config(
                config_file=str(self._path), client_configuration=client_configuration()
            )
        return self._api

    def renew(self) -> None:
        self._api = None  # re-read the file: its credentials may have been rotated


class SecretConnection:
    """Any Kubernetes cluster, through the secret that holds its access (`access.py`): read
    once for the warm container, and again when the server answers 401 (the token was
    rotated). TLS is verified against the secret's (or the settings') CA, or the system's."""

    def __init__(self, secrets: Any, secret_id: str, pinned: Pinned = NOTHING_PINNED) -> None:
        self._secrets = secrets
        self._secret = secret_id
        self._pinned = pinned
        self._api: Any = None

    def api(self) -> Any:
        if self._api is None:
            from kubernetes import client

            access = read_access(self._secret, self._read(), self._pinned)
            configuration = client_configuration(access.endpoint)
            configuration.verify_ssl = True
            if access.ca_pem is not None:
                ca = tempfile.NamedTemporaryFile(  # noqa: SIM115  (kept for the container's life)
                    prefix="cluster-ca-", suffix=".crt", delete=False
                )
                ca.write(access.ca_pem)
                ca.close()
                configuration.ssl_ca_cert = ca.name
            configuration.api_key = {"authorization": access.token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
            self._api = client.ApiClient(configuration)
        return self._api

    def _read(self) -> str:
        try:
            value = self._secrets.get_secret_value(SecretId=self._secret)
        except (BotoCoreError, ClientError) as error:
            raise KubernetesUnavailableError(
                f"cluster secret {outside(self._secret)}: {outside(describe_aws_error(error))}"
            ) from None
        return str(value.get("SecretString") or "")

    def renew(self) -> None:
        self._api = None  # the next request reads the secret again: the token may be rotated

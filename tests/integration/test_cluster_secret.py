"""Any Kubernetes, not only EKS: the connection a Secrets Manager secret gives (moto), to the
loopback API server serving TLS with a bearer token as a self-managed cluster does. TLS is
verified against the secret's CA; a rotated token is read again on the server's 401.

Secrets Manager's GetSecretValue returns the secret's SecretString as stored:
https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from nodescaler.adapters.k8s.connection import SecretConnection
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler.adapters.k8s.secret_access import Pinned
from nodescaler.errors import KubernetesUnavailableError
from nodescaler_sandbox.kube import kubeconfig
from nodescaler_sandbox.kube.tls import issue

from tests.aws import REGION
from tests.kube import cluster_of, cluster_secret, node, tls_api


def secrets() -> object:
    return boto3.client("secretsmanager", region_name=REGION)


def test_nodes_are_read_over_verified_tls_with_the_secrets_token(tmp_path: Path) -> None:
    # Given a cluster outside EKS: its API server on TLS, answering only its token
    with tls_api(tmp_path, cluster_of(("nodes", node("n1")))) as (server, certificate):
        arn = cluster_secret("prod-kube", kubeconfig(server.url, "sa-token", certificate.ca_pem))
        # When nodescaler connects through the secret that holds its kubeconfig
        cluster = KubernetesCluster(SecretConnection(secrets(), arn))
        # Then it lists the nodes, over https, sending the token
        assert [n.name for n in cluster.nodes()] == ["n1"]
        assert server.url.startswith("https://")


def test_a_server_whose_certificate_another_ca_signed_is_not_talked_to(tmp_path: Path) -> None:
    with tls_api(tmp_path / "real", cluster_of(("nodes", node("n1")))) as (server, _):
        # Given a secret trusting another CA than the one that signed the server's certificate
        other = issue(tmp_path / "other", "another-ca")
        arn = cluster_secret("prod-kube", kubeconfig(server.url, "sa-token", other.ca_pem))
        cluster = KubernetesCluster(SecretConnection(secrets(), arn))
        # Then the read fails as unreachable, naming the certificate, and no request was served
        with pytest.raises(KubernetesUnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
            cluster.nodes()
        assert server.requests == []


def test_a_rotated_token_is_read_again_from_the_secret_on_the_servers_401(
    tmp_path: Path,
) -> None:
    with tls_api(tmp_path, cluster_of(("nodes", node("n1"))), token="old") as (server, cert):
        arn = cluster_secret("prod-kube", kubeconfig(server.url, "old", cert.ca_pem))
        cluster = KubernetesCluster(SecretConnection(secrets(), arn))
        assert [n.name for n in cluster.nodes()] == ["n1"]
        # Given the token rotated: the server takes only the new one, the secret holds it
        server.token = "new"
        secrets().put_secret_value(  # type: ignore[attr-defined]
            SecretId=arn, SecretString=kubeconfig_text(server.url, "new", cert.ca_pem)
        )
        # When nodescaler reads again with the token it kept
        # Then the 401 makes it read the secret again, and the read succeeds
        assert [n.name for n in cluster.nodes()] == ["n1"]


def test_an_expired_token_the_secret_still_holds_is_named_unauthorized(tmp_path: Path) -> None:
    with tls_api(tmp_path, token="current") as (server, cert):
        arn = cluster_secret("prod-kube", kubeconfig(server.url, "expired", cert.ca_pem))
        cluster = KubernetesCluster(SecretConnection(secrets(), arn))
        with pytest.raises(KubernetesUnavailableError, match="Unauthorized"):
            cluster.nodes()


def test_a_token_alone_goes_to_the_deployments_endpoint_and_ca(tmp_path: Path) -> None:
    import base64

    with tls_api(tmp_path, cluster_of(("nodes", node("n1")))) as (server, cert):
        arn = cluster_secret("prod-kube-token", "sa-token")
        pinned = Pinned(server.url, base64.b64encode(cert.ca_pem).decode())
        cluster = KubernetesCluster(SecretConnection(secrets(), arn, pinned))
        assert [n.name for n in cluster.nodes()] == ["n1"]


def test_a_server_urllib3_reads_as_another_host_never_gets_the_token(tmp_path: Path) -> None:
    # Given the deployment's cluster, pinned, and an attacker's server with its own CA
    with (
        tls_api(tmp_path / "pinned", cluster_of(("nodes", node("real")))) as (pinned, cert),
        tls_api(tmp_path / "attacker", cluster_of(("nodes", node("fake")))) as (attacker, own),
    ):
        # and a secret whose server Python's URL parser reads as the pinned host and port,
        # but urllib3 (which sends the request) reads as the attacker's (before a backslash)
        forged = f"{attacker.url}\\@{pinned.url.removeprefix('https://')}"
        arn = cluster_secret("prod-kube", kubeconfig(forged, "sa-token", own.ca_pem))
        cluster = KubernetesCluster(
            SecretConnection(secrets(), arn, Pinned(pinned.url, None)),
        )
        # When nodescaler reads the cluster
        # Then the secret is refused by name, and neither server got a request or the token
        with pytest.raises(KubernetesUnavailableError, match="backslash"):
            cluster.nodes()
        assert (attacker.requests, pinned.requests) == ([], [])
        del cert


def test_a_secret_that_cannot_be_read_is_named_with_the_reason(tmp_path: Path) -> None:
    missing = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:gone-AbCdEf"
    cluster = KubernetesCluster(SecretConnection(secrets(), missing))
    with pytest.raises(KubernetesUnavailableError, match=f"cluster secret {missing}: .*"):
        cluster.nodes()


def kubeconfig_text(server_url: str, token: str, ca_pem: bytes) -> str:
    import json

    return json.dumps(kubeconfig(server_url, token, ca_pem))

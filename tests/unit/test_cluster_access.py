"""A cluster that is not EKS: what its secret may hold, and every way it can be wrong, each
refused by name (the secret, then what is wrong) and never with the token in the text."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from nodescaler.adapters.k8s.access import (
    MAX_SECRET_CHARS,
    NOTHING_PINNED,
    Pinned,
    read_access,
)
from nodescaler.errors import KubernetesUnavailableError
from nodescaler_sandbox.kube import kubeconfig

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
SERVER = "https://10.0.0.1:6443"
SECRET = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod-kube"


def config(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = kubeconfig(SERVER, "sa-token", PEM)
    cluster, user = document["clusters"][0]["cluster"], document["users"][0]["user"]
    for key, value in changes.items():  # cluster__certificate_authority: the cluster's key
        target, field = (
            (cluster, key.removeprefix("cluster__").replace("_", "-"))
            if key.startswith("cluster__")
            else (user, key)
        )
        if value is None:
            target.pop(field, None)
        else:
            target[field] = value
    return document


def refusal(text: str, pinned: Pinned = NOTHING_PINNED) -> str:
    with pytest.raises(KubernetesUnavailableError) as refused:
        read_access(SECRET, text, pinned)
    said = str(refused.value)
    assert said.startswith(f"cluster secret {SECRET}: ") and "sa-token" not in said
    return said


def test_a_flattened_kubeconfig_gives_its_server_its_ca_and_its_token() -> None:
    access = read_access(SECRET, json.dumps(config()))
    assert (access.endpoint, access.ca_pem, access.token) == (SERVER, PEM, "sa-token")
    assert "sa-token" not in repr(access)


def test_a_yaml_kubeconfig_is_read_as_kubectl_writes_it() -> None:
    import yaml

    assert read_access(SECRET, yaml.safe_dump(config())).endpoint == SERVER


def test_a_token_alone_goes_to_the_deployments_endpoint_trusting_its_ca() -> None:
    pinned = Pinned(SERVER, base64.b64encode(PEM).decode())
    access = read_access(SECRET, "eyJhbGciOiJSUzI1NiJ9.e30.sig\n", pinned)
    assert (access.endpoint, access.ca_pem, access.token) == (
        SERVER,
        PEM,
        "eyJhbGciOiJSUzI1NiJ9.e30.sig",
    )


@pytest.mark.parametrize(
    ("document", "named"),
    [
        (config(cluster__insecure_skip_tls_verify=True), "insecure-skip-tls-verify is set"),
        (config(cluster__server="http://10.0.0.1:8080"), "is not an https:// URL"),
        (config(cluster__certificate_authority="/etc/ca.crt"), "names a file"),
        (config(cluster__certificate_authority_data="not base64!"), "is not base64"),
        (
            config(cluster__certificate_authority_data=base64.b64encode(b"x").decode()),
            "holds no PEM certificate",
        ),
        (config(exec={"command": "aws"}, token=None), "runs a credential plugin (exec)"),
        (config(token=None), "its user has no token"),
        (config() | {"current-context": "other"}, "current-context other is not among"),
    ],
)
def test_a_kubeconfig_nodescaler_cannot_use_safely_is_refused_by_what_is_wrong(
    document: dict[str, Any], named: str
) -> None:
    assert named in refusal(json.dumps(document))


def test_a_kubeconfig_naming_another_server_than_the_deployments_keeps_its_token() -> None:
    said = refusal(json.dumps(config()), Pinned("https://kube.internal:443"))
    assert "not the deployment's endpoint https://kube.internal:443" in said


def test_a_token_alone_without_an_endpoint_to_send_it_to_is_refused() -> None:
    assert "gives no kubernetes.endpoint" in refusal("sa-token")


@pytest.mark.parametrize("text", ["", "a sentence, not a token", "[1, 2]", '{"token": 1}'])
def test_a_secret_that_is_neither_a_kubeconfig_nor_a_token_is_named_so(text: str) -> None:
    assert "is neither a kubeconfig" in refusal(text, Pinned(SERVER))


def test_a_secret_longer_than_secrets_manager_holds_is_not_read() -> None:
    assert "more than a secret can hold" in refusal("x" * (MAX_SECRET_CHARS + 1))

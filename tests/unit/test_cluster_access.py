"""A cluster that is not EKS: what its secret may hold, and every way it can be wrong, each
refused by name (the secret, then what is wrong) and never with the token in the text."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from nodescaler.adapters.k8s.secret_access import (
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


@pytest.mark.parametrize(
    ("server", "named"),
    [
        ("https://evil.example:443\\@10.0.0.1:6443", "holds a backslash"),
        ("https://10.0.0.1:6443\\", "holds a backslash"),
        ("https://evil.example@10.0.0.1:6443", "holds userinfo"),
        ("https://user:pass@10.0.0.1:6443", "holds userinfo"),
        ("https://10.0.0.1:6443?x=@evil.example", "holds userinfo"),
        ("https://10.0.0.1:6443/?a=b", "has a query or a fragment"),
        ("https://10.0.0.1:6443#evil.example", "has a query or a fragment"),
        ("http://10.0.0.1:6443", "is not an https:// URL"),
        ("HTTPS://10.0.0.1:6443", "is not an https:// URL"),
        ("//10.0.0.1:6443", "is not an https:// URL"),
        ("https://10.0.0.1:0", "names port 0, not one of 1 to 65535"),
        ("https://10.0.0.1:99999", "names port 99999"),
        ("https://10.0.0.1:+6443", "is not https://host[:port][/path]"),
        ("https://10.0.0.1:6443:443", "is not https://host[:port][/path]"),
        ("https://10.0.0.1 :6443", "holds a space or a control character"),
        ("https://10.0.0.1:6443\t", "holds a space or a control character"),
        ("https://kube%2Eevil:6443", "is not https://host[:port][/path]"),
        ("https://", "is not https://host[:port][/path]"),
    ],
)
def test_a_server_url_parsers_could_read_differently_is_refused_by_its_form(
    server: str, named: str
) -> None:
    # Given a kubeconfig whose server is anything but https://host[:port][/path]
    said = refusal(json.dumps(config(cluster__server=server)), Pinned(SERVER))
    # Then it is refused, naming what the server holds, before the pin is compared
    assert named in said and "kubeconfig: server" in said


@pytest.mark.parametrize(
    ("server", "pin"),
    [
        ("https://[fd00::1]:6443", "https://[FD00::1]:6443/"),
        ("https://kube.example.com", "https://Kube.Example.com:443"),
        ("https://10.0.0.1:6443/k8s/clusters/c-x7k2", "https://10.0.0.1:6443"),
    ],
)
def test_a_plain_server_matching_the_pin_is_used_ipv6_and_a_path_included(
    server: str, pin: str
) -> None:
    access = read_access(SECRET, json.dumps(config(cluster__server=server)), Pinned(pin))
    assert access.endpoint == server


def test_a_pinned_endpoint_that_is_not_a_plain_https_url_is_named_as_the_settings() -> None:
    said = refusal(json.dumps(config()), Pinned("https://a\\@10.0.0.1:6443"))
    assert "settings: kubernetes.endpoint server" in said and "backslash" in said


@pytest.mark.parametrize(
    ("document", "named"),
    [
        (
            config() | {"contexts": [{"name": "loopback", "context": "loopback"}]},
            "contexts[loopback].context is not a map",
        ),
        (config() | {"contexts": ["loopback"]}, "current-context loopback is not among"),
        (config() | {"clusters": [{"name": "loopback", "cluster": "x"}]}, "its cluster or user"),
        (config() | {"users": {"name": "sa"}}, "users is not a list"),
        (config() | {"current-context": ["a"]}, "current-context ['a'] is not among"),
    ],
)
def test_a_kubeconfig_of_the_wrong_shapes_is_named_not_a_crash(
    document: dict[str, Any], named: str
) -> None:
    assert named in refusal(json.dumps(document))


@pytest.mark.parametrize(
    "token",
    ["sa-token\r\nX-Evil: 1", "sa-token\n", "sa token", "sa-token\x00", "é" * 8],
)
def test_a_token_a_header_cannot_carry_is_refused_naming_the_field(token: str) -> None:
    # Given a token holding CR, LF, a space, a control or a non-ASCII character
    said = refusal(json.dumps(config(token=token)))
    # Then the secret is refused, naming the user's token field, the token not quoted
    assert "kubeconfig: users[nodescaler].user.token holds" in said and token.strip() not in said


def test_a_token_alone_holding_a_control_character_is_refused() -> None:
    said = refusal("sa-token\x07bell", Pinned(SERVER))
    assert "token holds" in said


def test_a_token_alone_without_an_endpoint_to_send_it_to_is_refused() -> None:
    assert "gives no kubernetes.endpoint" in refusal("sa-token")


@pytest.mark.parametrize("text", ["", "a sentence, not a token", "[1, 2]", '{"token": 1}'])
def test_a_secret_that_is_neither_a_kubeconfig_nor_a_token_is_named_so(text: str) -> None:
    assert "is neither a kubeconfig" in refusal(text, Pinned(SERVER))


@pytest.mark.parametrize("text", ["[" * 5_000, "{clusters: " + "[" * 5_000])
def test_a_secret_nested_past_the_parsers_recursion_is_named_not_a_crash(text: str) -> None:
    # Given a secret nested so deep that the JSON or YAML parser runs out of recursion
    # Then it is refused by name (a RecursionError would fail every group's evaluation)
    assert "is nested deeper than a kubeconfig could be" in refusal(text, Pinned(SERVER))


def test_a_secret_longer_than_secrets_manager_holds_is_not_read() -> None:
    assert "more than a secret can hold" in refusal("x" * (MAX_SECRET_CHARS + 1))

"""A cluster that is not EKS: what its Secrets Manager secret holds, read into the three
things a connection needs — the API server's HTTPS endpoint, the certificate authority
that signed its certificate, and a bearer token.

The secret holds either a kubeconfig (YAML or JSON, `kubectl config view --minify
--flatten` of a service account's context), or a service account token alone, the
endpoint and CA then coming from the deployment's settings. TLS is always verified: a
kubeconfig that skips verification, names an `http://` server, or authenticates by a
plugin Lambda cannot run, is refused by name. Where the settings give an endpoint, a
kubeconfig naming another server is refused too, so the secret can't send the token
elsewhere.

A server is `https://host[:port][/path]` and nothing else: URL parsers disagree on
userinfo, backslashes and odd ports (`https://A\\@B` is host B to Python's `urlsplit`,
host A to urllib3, which sends the requests), so those are refused, and the host and
port compared with the pin are urllib3's own.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

from nodescaler.domain.outside_text import outside
from nodescaler.errors import KubernetesUnavailableError

MAX_SECRET_CHARS = 65_536  # Secrets Manager's own limit for a secret's value
# A user in a kubeconfig authenticates by one of these, none of which Lambda can use.
_UNUSABLE_AUTH = {
    "exec": "runs a credential plugin",
    "auth-provider": "uses an auth provider",
    "client-certificate-data": "presents a client certificate",
    "client-certificate": "presents a client certificate file",
    "tokenFile": "reads its token from a file",
    "username": "uses basic authentication",
}
_TOKEN = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what an HTTP header value carries
# https://host[:port][/path]: a DNS name, an IPv4 or a bracketed IPv6 address, a port of
# digits, a path of unreserved characters and escapes; nothing a parser could read twice.
_SERVER = re.compile(
    r"https://(?P<host>[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?|\[[0-9A-Fa-f:.]+\])"
    r"(?::(?P<port>[0-9]{1,5}))?(?P<path>(?:/[A-Za-z0-9._~%-]*)*)"
)


@dataclass(frozen=True)
class ClusterAccess:
    endpoint: str  # https://host[:port]
    ca_pem: bytes | None  # None: the system's certificate authorities
    token: str

    def __repr__(self) -> str:  # never a token in a log line or a traceback
        return f"ClusterAccess(endpoint={self.endpoint!r}, token=<{len(self.token)} chars>)"


@dataclass(frozen=True)
class Pinned:
    """What the deployment's settings say of the cluster: the endpoint a token may go to,
    and the CA to trust there (base64 PEM), for a secret that holds a token alone."""

    endpoint: str | None = None
    ca_data: str | None = None


NOTHING_PINNED = Pinned()


def read_access(secret: str, text: str, pinned: Pinned = NOTHING_PINNED) -> ClusterAccess:
    """The access `text` (the value of `secret`) gives; KubernetesUnavailableError naming
    the secret and what is wrong with it otherwise."""

    def refused(why: str) -> KubernetesUnavailableError:
        return KubernetesUnavailableError(f"cluster secret {outside(secret)}: {why}")

    if len(text) > MAX_SECRET_CHARS:
        raise refused(f"{len(text)} characters, more than a secret can hold; not read")
    try:
        pin = _origin(_https(pinned.endpoint)) if pinned.endpoint else None
    except ValueError as error:
        raise refused(f"settings: kubernetes.endpoint {error}") from None
    try:
        document = _document(text.strip())
    except RecursionError:  # `[[[[…`: both parsers recurse, and neither says ValueError
        raise refused("is nested deeper than a kubeconfig could be; not read") from None
    if isinstance(document, dict) and "clusters" in document:
        try:
            access = _from_kubeconfig(document)
        except ValueError as error:
            raise refused(f"kubeconfig: {error}") from None
        if pin is not None and _origin(access.endpoint) != pin:
            raise refused(
                f"kubeconfig names server {outside(access.endpoint)}, not the deployment's "
                f"endpoint {outside(pinned.endpoint)}; the token is not sent there"
            )
        return access
    if isinstance(document, str) and document and not any(c.isspace() for c in document):
        try:
            return _from_token(document, pinned)
        except ValueError as error:
            raise refused(str(error)) from None
    raise refused("is neither a kubeconfig (with clusters, users, contexts) nor a token")


def _from_token(token: str, pinned: Pinned) -> ClusterAccess:
    """A token alone, sent to the deployment's endpoint trusting the deployment's CA."""
    if not pinned.endpoint:
        raise ValueError(
            "holds a token alone, but the deployment gives no kubernetes.endpoint "
            "to send it to (give one, or store a kubeconfig)"
        )
    _check_token(token, "token")
    try:
        return ClusterAccess(_https(pinned.endpoint), _ca(pinned.ca_data), token)
    except ValueError as error:
        raise ValueError(f"settings: {error}") from None


def _document(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text  # a token is not YAML with a colon in it; judged as a token


def _from_kubeconfig(config: dict[str, Any]) -> ClusterAccess:
    cluster, user = _current(config)
    if cluster.get("insecure-skip-tls-verify"):
        raise ValueError("insecure-skip-tls-verify is set; nodescaler always verifies TLS")
    if "certificate-authority" in cluster:
        raise ValueError(
            "certificate-authority names a file, which Lambda does not have; "
            "flatten the kubeconfig (certificate-authority-data)"
        )
    for key, how in _UNUSABLE_AUTH.items():
        if key in user:
            raise ValueError(f"its user {how} ({key}), which nodescaler cannot; give a token")
    token = user.get("token")
    if not isinstance(token, str) or not token:
        raise ValueError("its user has no token")
    _check_token(token, f"users[{outside(user.get('.name'))}].user.token")
    endpoint = _https(str(cluster.get("server") or ""))
    return ClusterAccess(endpoint, _ca(cluster.get("certificate-authority-data")), token)


def _current(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cluster and user of the current context (the user with its `.name`)."""
    contexts = _named(config, "contexts")
    current = config.get("current-context") or (
        next(iter(contexts)) if len(contexts) == 1 else None
    )
    if not isinstance(current, str) or current not in contexts:
        raise ValueError(f"current-context {outside(current)!s} is not among its contexts")
    context = contexts[current].get("context") or {}
    if not isinstance(context, dict):
        raise ValueError(f"contexts[{outside(current)}].context is not a map")
    user_name = str(context.get("user"))
    cluster = _named(config, "clusters").get(str(context.get("cluster")), {}).get("cluster")
    user = _named(config, "users").get(user_name, {}).get("user")
    if not isinstance(cluster, dict) or not isinstance(user, dict):
        raise ValueError(f"context {outside(current)}: its cluster or user is not in the file")
    return cluster, {**user, ".name": user_name}


def _check_token(token: str, field: str) -> None:
    """A bearer token goes in an HTTP header: visible ASCII only. A CR or LF would end the
    header (urllib3 refuses to send it, or another client sends a second header)."""
    if not _TOKEN.fullmatch(token):
        raise ValueError(
            f"{field} holds a space, a line break, a control or a non-ASCII character, "
            "which an Authorization header cannot carry"
        )


def _named(config: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
    entries = config.get(key)
    if not isinstance(entries, list):
        raise ValueError(f"{key} is not a list")
    return {str(e.get("name")): e for e in entries if isinstance(e, dict)}


def _https(server: str) -> str:
    """`server` without its trailing slash when it is `https://host[:port][/path]`, read
    alike by urllib3 and Python's parser; ValueError naming what else it holds."""
    named = f"server {outside(server)!r}"
    if not server.isprintable() or any(c.isspace() for c in server):
        raise ValueError(f"{named} holds a space or a control character")
    if "\\" in server:
        raise ValueError(f"{named} holds a backslash, which URL parsers read differently")
    if not server.startswith("https://"):
        raise ValueError(f"{named} is not an https:// URL")
    if "@" in server:
        raise ValueError(f"{named} holds userinfo (an @), which URL parsers read differently")
    if "?" in server or "#" in server:
        raise ValueError(f"{named} has a query or a fragment; give https://host[:port][/path]")
    form = _SERVER.fullmatch(server)
    if form is None:
        raise ValueError(f"{named} is not https://host[:port][/path]")
    if form["port"] is not None and not 0 < int(form["port"]) < 65536:
        raise ValueError(f"{named} names port {form['port']}, not one of 1 to 65535")
    if _origin(server) != _python_origin(server):  # the regex should leave no such case
        raise ValueError(f"{named} is read as two different hosts by two URL parsers")
    return server.rstrip("/")


def _origin(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) as urllib3, which sends the requests, reads `url`."""
    try:
        parts = parse_url(url)
    except LocationParseError:
        raise ValueError(f"server {outside(url)!r} is not a URL") from None
    host = (parts.host or "").lower().strip("[]").rstrip(".")
    return parts.scheme or "", host, parts.port or 443


def _python_origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower().rstrip("."), parts.port or 443


def _ca(data: object) -> bytes | None:
    if data is None:
        return None
    try:
        pem = base64.b64decode(str(data), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("certificate-authority-data is not base64") from None
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ValueError("certificate-authority-data holds no PEM certificate")
    return pem

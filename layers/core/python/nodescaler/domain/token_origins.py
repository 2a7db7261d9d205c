"""Which server each Prometheus bearer token may go to: the (secret, origin) pairs of the
deployed policies. The evaluate function may read every secret a deployed policy names, so
a stored policy naming one with another `serverAddress` would hand the token to whoever
the policy writer chose; a token goes only to the origin it was deployed with.
"""

from __future__ import annotations

import re
from typing import Protocol
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
# A DNS name or an IP address, as urlsplit gives it (lowercased, IPv6 without brackets):
# nothing a URL parser could read as another host (escapes, userinfo, backslashes).
_PLAIN_HOST = re.compile(r"^([a-z0-9_-]+\.)*[a-z0-9_-]+$|^[0-9a-f:.]*:[0-9a-f:.]*$")

TokenOrigins = frozenset[tuple[str, str]]  # (secret, origin) pairs a token may be sent on


class BearerSource(Protocol):
    """Where a source sends a bearer token (a policy's `PrometheusSource`); the policy
    models import this module, so it names what it reads of them, not them."""

    @property
    def bearer_token_secret(self) -> str | None: ...
    @property
    def server_address(self) -> str | None: ...


def origin(address: str) -> str:
    """`scheme://host:port` of an http(s) URL, as a browser compares origins: scheme and
    host lowercased, the default port written out; ValueError naming the address when it
    has no plain host."""
    url = urlsplit(address)
    scheme = url.scheme.lower()
    try:
        host, port = url.hostname, url.port
    except ValueError:
        raise ValueError(f"{address!r} has no valid port") from None
    if "@" in url.netloc:  # userinfo: parsers disagree on which side is the host
        raise ValueError(f"{address!r} holds userinfo (an @ before the host)")
    if scheme not in DEFAULT_PORTS or not host or not _PLAIN_HOST.match(host):
        raise ValueError(f"{address!r} is not an http(s) URL with a plain host name or address")
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port if port is not None else DEFAULT_PORTS[scheme]}"


def token_pairing(source: BearerSource) -> tuple[str, str] | None:
    """(secret, origin) when the source sends a bearer token; None when it sends none."""
    if source.bearer_token_secret is None or source.server_address is None:
        return None
    return source.bearer_token_secret, origin(source.server_address)


def unbound_token(source: BearerSource, allowed: TokenOrigins) -> str | None:
    """Why the source's token must not be sent (its secret is not deployed for its
    origin), in one line; None when it sends none, or sends it where it was deployed to."""
    pairing = token_pairing(source)
    if pairing is None or pairing in allowed:
        return None
    secret, where = pairing
    deployed = sorted(o for s, o in allowed if s == secret)
    return (
        f"bearer token secret {secret} is deployed for "
        f"{' and '.join(deployed) if deployed else 'no server'}, not for {where}: refused, "
        "the token is neither read nor sent"
    )

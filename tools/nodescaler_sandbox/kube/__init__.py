"""A loopback Kubernetes API server and the pieces it is made of."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any


def write_kubeconfig(
    path: Path, server_url: str, token: str | None = None, ca_pem: bytes | None = None
) -> Path:
    """A kubeconfig whose current context is the loopback server (optionally with a token,
    and the certificate authority that signed its TLS certificate)."""
    path.write_text(json.dumps(kubeconfig(server_url, token, ca_pem)))
    return path


def kubeconfig(server_url: str, token: str | None = None, ca_pem: bytes | None = None) -> Any:
    """The kubeconfig document itself (what a cluster's secret may hold)."""
    user = {"token": token} if token else {}
    cluster: dict[str, str] = {"server": server_url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "loopback", "cluster": cluster}],
        "users": [{"name": "nodescaler", "user": user}],
        "contexts": [
            {"name": "loopback", "context": {"cluster": "loopback", "user": "nodescaler"}}
        ],
        "current-context": "loopback",
    }

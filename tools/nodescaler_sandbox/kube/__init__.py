"""A loopback Kubernetes API server and the pieces it is made of."""

from __future__ import annotations

import json
from pathlib import Path


def write_kubeconfig(path: Path, server_url: str, token: str | None = None) -> Path:
    """A kubeconfig whose current context is the loopback server (optionally with a token)."""
    user = {"token": token} if token else {}
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "loopback", "cluster": {"server": server_url}}],
                "users": [{"name": "nodescaler", "user": user}],
                "contexts": [
                    {"name": "loopback", "context": {"cluster": "loopback", "user": "nodescaler"}}
                ],
                "current-context": "loopback",
            }
        )
    )
    return path

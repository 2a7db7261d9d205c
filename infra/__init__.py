"""nodescaler's infrastructure as CDK constructs. Installed, it is the `nodescaler_cdk`
package: `from nodescaler_cdk import Nodescaler` in your own CDK app (README, Deploy).

The names below load on first use, so reading the settings alone imports no CDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .nodescaler import Nodescaler
    from .settings import DeploySettings, load_deployments, load_settings
    from .stack import NodescalerStack

EXPORTS = {
    "Nodescaler": "nodescaler",
    "NodescalerStack": "stack",
    "DeploySettings": "settings",
    "load_deployments": "settings",
    "load_settings": "settings",
}
__all__ = ["DeploySettings", "Nodescaler", "NodescalerStack", "load_deployments", "load_settings"]


def __getattr__(name: str) -> Any:
    if name not in EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{EXPORTS[name]}", __name__), name)

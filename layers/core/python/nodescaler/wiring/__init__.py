"""The runtime composition root: real adapters built from a function's settings.

One module per Lambda function assembles it (`dispatch`, `evaluate`, `fast`, `drain`,
`terminate`) from shared builders: `clients` (the AWS clients and the clock), `aws` (node
groups, scaling events), `policies`, `kubernetes` (the cluster's API), `producers` (each
metric type's, from its descriptor) and `expanders`. Handlers call a function's builder
once per cold start; tests and the sandbox pass their own `AwsClients` (moto) and clock.

Importing the package loads the clients (boto3) and nothing made of pydantic: a function's
module, with the settings, policies and services it assembles, is imported when its builder
is first named (`wiring.evaluator`), which a handler does with its first event. That keeps
the dispatch function's cold import within 1.5 times boto3's (`make bench`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from nodescaler.wiring.clients import BOTO_CONFIG, AwsClients, SystemClock

if TYPE_CHECKING:
    from nodescaler.wiring.dispatch import dispatcher
    from nodescaler.wiring.drain import drainer
    from nodescaler.wiring.evaluate import evaluator, redelivery
    from nodescaler.wiring.fast import fast_path
    from nodescaler.wiring.producers import ProducerContext, metric_producers
    from nodescaler.wiring.terminate import terminator

# Each builder named lazily, and the module that holds it (see the module docstring).
_LAZY = {
    "dispatcher": "dispatch",
    "drainer": "drain",
    "evaluator": "evaluate",
    "redelivery": "evaluate",
    "fast_path": "fast",
    "terminator": "terminate",
    "metric_producers": "producers",
    "ProducerContext": "producers",
}

__all__ = [
    "BOTO_CONFIG",
    "AwsClients",
    "ProducerContext",
    "SystemClock",
    "dispatcher",
    "drainer",
    "evaluator",
    "fast_path",
    "metric_producers",
    "redelivery",
    "terminator",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)

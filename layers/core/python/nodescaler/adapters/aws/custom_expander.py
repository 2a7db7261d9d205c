"""The custom expander on Lambda: Airbnb's gRPC expander, as a function you own.

It is called with the options (node group, new node count, the pods, the node template)
and answers `{"nodeGroups": [...]}` with the ones it keeps. An error, an answer that is
not that, or no answer within its time budget, and the next expander in the chain decides.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any

from botocore.config import Config
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nodescaler.domain.scale_up.expanders import Option
from nodescaler.errors import ExpanderError


class CustomExpanderAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    node_groups: Annotated[list[str], Field(alias="nodeGroups")]


def request_of(options: Sequence[Option]) -> dict[str, Any]:
    return {
        "options": [
            {
                "nodeGroup": o.group,
                "nodeCount": o.node_count,
                "pods": [p.key for p in o.pods],
                "nodeTemplate": {
                    "allocatable": {
                        "cpu": f"{o.template.allocatable.cpu_millis}m",
                        "memory": str(o.template.allocatable.memory_bytes),
                        "pods": str(o.template.allocatable.pods),
                    },
                    "labels": dict(o.template.labels),
                    "taints": [
                        {"key": t.key, "value": t.value, "effect": t.effect}
                        for t in o.template.taints
                    ],
                },
            }
            for o in options
        ]
    }


def budget_config(timeout_seconds: float) -> Config:
    """No retries, and the budget as the socket timeouts: a slow expander is skipped."""
    return Config(
        connect_timeout=timeout_seconds,
        read_timeout=timeout_seconds,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )


class LambdaExpander:
    def __init__(self, lambda_client: Any, function_name: str) -> None:
        self._lambda = lambda_client
        self._function = function_name

    def __call__(self, options: Sequence[Option]) -> Sequence[str]:
        try:
            response = self._lambda.invoke(
                FunctionName=self._function,
                InvocationType="RequestResponse",
                Payload=json.dumps(request_of(options)).encode(),
            )
            payload = response["Payload"].read()
        except Exception as error:  # timeouts, throttling, no such function
            raise ExpanderError(f"{self._function}: {type(error).__name__}: {error}") from None
        if response.get("FunctionError"):
            raise ExpanderError(f"{self._function} failed: {payload[:300]!r}")
        try:
            return CustomExpanderAnswer.model_validate_json(payload).node_groups
        except ValidationError as error:
            raise ExpanderError(
                f'{self._function} answered {payload[:200]!r}, not {{"nodeGroups": [...]}}: '
                f"{error.errors(include_url=False)[0]['msg']}"
            ) from None

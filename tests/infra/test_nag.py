"""cdk-nag's verdict on the stack: nothing unsuppressed, whatever the context sets
(infra/nag.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.stack_template import nag_findings


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {
            "clusterName": "prod",
            "alarms": {"email": "ops@example.com"},
            "expanders": [{"name": "custom", "functionName": "pick"}],
            "vpc": {"subnetIds": ["subnet-0a1b2c3d"], "securityGroupIds": ["sg-0b1c2d3e"]},
            "drainGroups": ["web", "gpu-ng"],
            "clusterLimits": {"maxNodes": 100},
        },
    ],
    ids=["sample", "everything-set"],
)
def test_cdk_nag_finds_nothing_unsuppressed(overrides: dict[str, Any]) -> None:
    assert nag_findings(**overrides) == []


def test_cdk_nag_finds_nothing_unsuppressed_without_a_cluster(
    no_cluster: dict[str, Any],
) -> None:
    assert nag_findings(**no_cluster, clusterLimits={"maxMemoryGib": 4096}) == []

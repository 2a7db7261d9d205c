"""A node carrying a startup taint is still starting: not Ready to the autoscaler, so its
pods are counted onto it as onto a node on its way (`domain/cluster/startup_taints.py`,
as Cluster Autoscaler's FAQ says of its startup taints)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from nodescaler.adapters.k8s.conversion import node_from_json
from nodescaler.config import EvaluateSettings
from nodescaler.domain.cluster.snapshot import Taint
from nodescaler.domain.cluster.startup_taints import KNOWN, StartupTaints
from nodescaler.errors import SettingsError

from tests.unit.test_config import BASE

READY_AT = "2026-11-30T10:00:00Z"


def wire(*taints: dict[str, str], ready: str = "True") -> dict[str, object]:
    return {
        "metadata": {"name": "ip-10-0-1-5"},
        "spec": {"providerID": "aws:///eu-west-1a/i-1", "taints": list(taints)},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": READY_AT}],
        },
    }


@pytest.mark.parametrize(
    "key",
    [
        "node.cilium.io/agent-not-ready",
        "ebs.csi.aws.com/agent-not-ready",
        "efs.csi.aws.com/agent-not-ready",
        "startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver",  # CA's prefix
        "ignore-taint.cluster-autoscaler.kubernetes.io/legacy",  # its deprecated one
    ],
)
def test_a_ready_node_with_a_known_startup_taint_is_still_starting(key: str) -> None:
    node = node_from_json(wire({"key": key, "value": "true", "effect": "NoExecute"}))
    assert not node.ready and node.ready_since is None
    assert node.taints == (Taint(key, "true", "NoExecute"),)  # what it carries is kept


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "dedicated", "value": "batch", "effect": "NoSchedule"},  # the group's own
        {"key": "node.cilium.io/agent-not-ready", "effect": "PreferNoSchedule"},  # keeps none off
    ],
)
def test_a_node_whose_taints_are_its_own_is_ready(taint: dict[str, str]) -> None:
    node = node_from_json(wire(taint))
    assert node.ready and node.ready_since == datetime(2026, 11, 30, 10, tzinfo=UTC)


def test_a_taint_the_operator_names_is_a_startup_taint_beside_the_well_known() -> None:
    startup = StartupTaints.also(["example.com/agent-not-ready"])
    mine = node_from_json(wire({"key": "example.com/agent-not-ready"}), startup)
    cilium = node_from_json(wire({"key": "node.cilium.io/agent-not-ready"}), startup)
    assert not mine.ready and not cilium.ready
    assert node_from_json(wire({"key": "example.com/agent-not-ready"}), KNOWN).ready


def test_a_node_not_ready_stays_so_whatever_its_taints() -> None:
    assert not node_from_json(wire(ready="False")).ready


def test_the_operators_startup_taints_are_read_from_startup_taints() -> None:
    settings = EvaluateSettings.from_environment(
        BASE | {"STARTUP_TAINTS": '["example.com/agent-not-ready"]'}
    )
    assert settings.startup.holds(Taint("example.com/agent-not-ready"))
    assert settings.startup.holds(Taint("node.cilium.io/agent-not-ready"))
    assert EvaluateSettings.from_environment(BASE).startup == KNOWN


@pytest.mark.parametrize("value", ['["has space"]', '"not-a-list"', '["/no-name"]'])
def test_a_startup_taint_that_is_no_taint_key_is_refused_by_name(value: str) -> None:
    with pytest.raises(SettingsError, match="STARTUP_TAINTS"):
        EvaluateSettings.from_environment(BASE | {"STARTUP_TAINTS": value})

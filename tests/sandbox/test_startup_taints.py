"""Nodes that register with startup taints (scenarios/22-startup-taints.yaml: Cilium's and
the EBS CSI driver's, lifted 40 s and 15 s after the node is Ready). A node carrying one
is still starting: the pods waiting for it are counted onto it, never given another node
(`domain/cluster/startup_taints.py`; Cluster Autoscaler's FAQ, "How does Cluster
Autoscaler treat nodes with status/startup/ignore taints?")."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from nodescaler_sandbox import runner
from nodescaler_sandbox.scenario_file import Scenario, load_scenario

pytestmark = pytest.mark.slow  # moto's server and the API server

SCENARIOS = Path(__file__).parents[2] / "scenarios"
PODS_A_NODE = 4  # one-core web pods on an m5.xlarge


def first_ramp() -> Scenario:
    """The scenario to minute 12: 20 web pods from minute 5, 5 nodes' worth."""
    return load_scenario(SCENARIOS / "22-startup-taints.yaml").model_copy(update={"minutes": 12})


def peak(tmp_path: Path, controller: str) -> int:
    summary = runner.run_one(first_ramp(), controller, tmp_path / controller)
    return int(summary["peak_desired"]["web-ng"])


def test_given_nodes_still_tainted_by_their_agents_no_node_is_bought_for_their_pods(
    tmp_path: Path,
) -> None:
    # When 20 pods wait for nodes that turn Ready tainted until their agents run
    needed = math.ceil(20 / PODS_A_NODE)
    # Then nodescaler asks for the nodes they need and no more: a tainted node is on its
    # way, not a Ready node they cannot use
    assert peak(tmp_path, runner.NODESCALER) == needed
    # and no decision says its group's nodes refuse the pods (the taint is not the node's)
    told = (tmp_path / runner.NODESCALER / "timeline.txt").read_text(encoding="utf-8")
    assert "agent-not-ready" not in told


def test_given_the_startup_taints_cluster_autoscaler_counts_those_nodes_as_upcoming(
    tmp_path: Path,
) -> None:
    # Cluster Autoscaler tuned is given them (--startup-taint): it buys what the pods need
    assert peak(tmp_path, runner.TUNED) == math.ceil(20 / PODS_A_NODE)
    # with its defaults it knows only its own prefixes: a Ready node with a taint its pods
    # do not tolerate is one they cannot use, and it buys more
    assert peak(tmp_path, runner.BASELINE) > math.ceil(20 / PODS_A_NODE)

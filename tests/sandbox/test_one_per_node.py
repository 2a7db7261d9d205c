"""Replicas spread one a node (scenarios/23-one-per-node.yaml: a required podAntiAffinity on
kubernetes.io/hostname against their own pods). Each needs a node of its own whatever room
the others leave: nodescaler buys one each at once, as Cluster Autoscaler's simulation
does, rather than a node a scale-up that the scheduler then fills with one replica
(`Placement.apart`, `adapters/k8s/conversion.apart_keys`); and never moves a replica
onto a node holding another."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from nodescaler_sandbox import figures, simulation
from nodescaler_sandbox.runner import NODESCALER, TUNED
from nodescaler_sandbox.scenario_file import Scenario, load_scenario

pytestmark = pytest.mark.slow  # moto's server and the API server

SCENARIOS = Path(__file__).parents[2] / "scenarios"


def to_minute(minute: int) -> Scenario:
    return load_scenario(SCENARIOS / "23-one-per-node.yaml").model_copy(update={"minutes": minute})


def replicas_by_node(tmp_path: Path, controller: str, minute: int) -> tuple[Counter[str], float]:
    """Where the search replicas ran (replica-placements a node), and when the last of
    those created by the scale-up at minute 5 was bound."""
    scenario = to_minute(minute)
    out = tmp_path / controller
    out.mkdir()
    result = simulation.simulate(
        scenario, controller, out, None, simulation.step_times(scenario, None)
    )
    rows = [figures.as_row(p) for p in result.pods if p.name.startswith("search-")]
    placed = Counter(r["node"] for r in rows if r["node"] and r["gone"] is None)
    bound = [r["bound"] for r in rows if r["created"] >= 5]
    assert all(b is not None for b in bound), "a replica of the scale-up never ran"
    return placed, max(b for b in bound if b is not None)


@pytest.mark.parametrize("controller", [NODESCALER, TUNED])
def test_replicas_spread_one_a_node_get_a_node_each_from_one_scale_up(
    tmp_path: Path, controller: str
) -> None:
    # When the search service grows from 3 to 12 replicas at minute 5 (half a core each,
    # nine of them would fit one new node by their requests)
    placed, last_bound = replicas_by_node(tmp_path, controller, 12)
    # Then each runs on a node of its own
    assert len(placed) == 12 and set(placed.values()) == {1}
    # and the last of them runs one boot after they came (3 minutes, and the seconds each
    # side takes to react): a node a round would take 9 boots
    assert last_bound < 5 + 3 + 1

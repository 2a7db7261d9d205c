"""The scenarios of a cluster's own capacity (issue 34), shortened, through the sandbox: a
namespace's CapacityBuffer, an On-Demand Capacity Reservation preferred, and a zone ARC
has shifted away during a burst; nodescaler, and Cluster Autoscaler as it treats each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import runner as scenarios
from nodescaler_sandbox.scenario_file import CapacityBufferSpec, DeploymentSpec

from tests.sandbox.conftest import SandboxRuns, run, scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, the runs each checks

NODESCALER, BASELINE, TUNED = scenarios.NODESCALER, scenarios.BASELINE, scenarios.TUNED
ALL_THREE = (NODESCALER, BASELINE, TUNED)


def pending_after(folder: Path, controller: str, minute: float) -> int:
    """Pods waiting for a node at any step from `minute` on, summed over the steps."""
    timeline = json.loads((folder / "timeline.json").read_text())
    return sum(r["pending_pods"] for r in timeline[controller] if r["minute"] >= minute)


def test_a_namespaces_capacity_buffer_lets_a_burst_start_on_nodes_already_there(
    sandbox_runs: SandboxRuns,
) -> None:
    # Given the shop team's CapacityBuffer of 8 checkout pods, and 8 more checkout pods at
    # minute 10 (the scenario's first burst)
    # When nodescaler, CA with its defaults and CA tuned each run the first 14 minutes
    summary, lines, folder = run(sandbox_runs, scenario("namespace-buffer", minutes=14), ALL_THREE)

    # Then under nodescaler the burst's pods find the room the buffer kept: none waits
    assert pending_after(folder, NODESCALER, 10) == 0
    assert any("CapacityBuffer shop/checkout-headroom: 8 pods" in line for line in lines)
    # Cluster Autoscaler's defaults leave its two buffer flags off (FAQ's flag table,
    # kubernetes/autoscaler cluster-autoscaler/FAQ.md: capacity-buffer-controller-enabled
    # and capacity-buffer-pod-injection-enabled, no default): the burst waits for nodes
    assert pending_after(folder, BASELINE, 10) > 0
    # with both on (the tuned run), its injected pods hold the same room
    assert pending_after(folder, TUNED, 10) == 0
    # the room costs nodes: 4 pods and 8 buffered need three 4-pod nodes before the burst
    assert summary[NODESCALER]["peak_desired"] == {"shop-ng": 5}
    assert summary[BASELINE]["peak_desired"] == {"shop-ng": 3}


def scale_requests(summary: dict[str, Any], controller: str) -> list[tuple[str, int, int]]:
    return [(r["group"], r["from"], r["to"]) for r in summary[controller]["scale_requests"]]


def test_a_scale_up_goes_to_the_group_whose_reservation_has_room_then_to_the_next(
    sandbox_runs: SandboxRuns,
) -> None:
    # Given general-ng (the priority expander's choice) and reserved-ng, in an open
    # reservation of 6 instances (its policy's minimum node in it), and 18 more 2-core pods
    # (9 nodes) at minute 5
    # When the three runs go on to minute 9
    summary, lines, _ = run(sandbox_runs, scenario("reservation-first", minutes=9), ALL_THREE)

    # Then nodescaler's reserved-first fills the reservation's 5 unused instances first
    # (reserved-ng 1 → 6, step by step as the fast path sees the pods arrive), and only then
    # sends the nodes reserved-ng cannot hold to general-ng
    asked = scale_requests(summary, NODESCALER)
    assert asked[0] == ("reserved-ng", 0, 1)  # its policy's minimum
    first_general = next(i for i, (group, _, _) in enumerate(asked) if group == "general-ng")
    assert {group for group, _, _ in asked[:first_general]} == {"reserved-ng"}
    assert asked[first_general - 1][2] == 6  # the reservation full before general-ng grows
    assert asked[first_general:] == [("general-ng", 1, 4)]
    assert any(
        "(reserved-first: 5 reserved instances unused (cr-" in line
        for line in lines
        if "reserved-ng" in line
    )
    # Cluster Autoscaler has no notion of EC2 capacity reservations: its expanders (FAQ,
    # "What are Expanders?": random, most-pods, least-waste, least-nodes, price, priority,
    # grpc) and its AWS provider (cluster-autoscaler/cloudprovider/aws/*.go, no
    # CapacityReservation) know none, so reserved-first narrows nothing and the priority
    # expander sends every new node to general-ng; the reservation stays unused (the tuned
    # run keeps reserved-ng at its policy's minimum, one node, from the start)
    for controller in (BASELINE, TUNED):
        peaks = summary[controller]["peak_desired"]
        grown = [to for g, _, to in scale_requests(summary, controller) if g == "reserved-ng"]
        assert max(grown, default=0) <= 1, controller
        assert peaks["general-ng"] + peaks["reserved-ng"] == 10, controller
        assert peaks["general-ng"] >= 9, controller


def test_during_a_zonal_shift_the_other_zones_grow_and_the_shifted_one_keeps_its_nodes(
    sandbox_runs: SandboxRuns,
) -> None:
    # Given three zonal groups, a burst from 8 to 20 pods at minute 2 (a node a zone), a
    # zonal shift away from eu-west-1a from minute 4, the pods growing to 40 by minute 8
    # and falling back to 8 at minute 10
    burst = scenario("zone-shifted-burst")
    web = burst.deployments[0].model_copy(
        update={"replicas": {0: 8, 1: 8, 2: 20, 8: 40, 9: 40, 10: 8}}
    )
    shift = burst.zonal_shifts[0].model_copy(update={"start": 4, "until": 30})
    shortened = burst.model_copy(
        update={"minutes": 15, "deployments": [web], "zonal_shifts": [shift]}
    )

    # When nodescaler and CA with its defaults go on to minute 15
    summary, lines, _ = run(sandbox_runs, shortened)

    # Then under nodescaler, from the shift on, only web-b and web-c grow, and say why
    ours = summary[NODESCALER]
    grown_after_shift = {
        r["group"] for r in ours["scale_requests"] if r["minute"] >= 4 and r["to"] > r["from"]
    }
    assert grown_after_shift == {"web-b", "web-c"}
    assert any("left out web-a: its zone" in line and "is shifted away" in line for line in lines)
    # and once the pods are gone web-b and web-c shed their nodes; web-a, in the shifted
    # zone, keeps its own
    assert ours["final_desired"]["web-a"] == ours["peak_desired"]["web-a"] == 2
    assert ours["final_desired"]["web-b"] < ours["peak_desired"]["web-b"]
    # Cluster Autoscaler knows no zonal shift (cluster-autoscaler/cloudprovider/aws/*.go
    # reads no ARC): it goes on balancing the new nodes into eu-west-1a
    theirs = summary[BASELINE]
    assert any(
        r["group"] == "web-a" and r["minute"] >= 4 and r["to"] > r["from"]
        for r in theirs["scale_requests"]
    )


def test_a_capacity_buffers_room_is_held_on_the_nodes_bought_for_it(
    sandbox_runs: SandboxRuns,
) -> None:
    # Given a reports team's CapacityBuffer of two 4-core pods on 8-core nodes that web pods
    # of half a core ramp up on, 20 to 90 over half an hour
    base = scenario("namespace-buffer")
    group = base.groups[0].model_copy(update={"instance_type": "m5.2xlarge", "max": 40})
    web = DeploymentSpec.model_validate(
        {"name": "web", "cpu": "500m", "memory": "1Gi", "replicas": {0: 20, 30: 90}}
    )
    reports = DeploymentSpec.model_validate(
        {"name": "reports", "namespace": "reports", "cpu": "4", "memory": "8Gi", "replicas": {0: 1}}
    )
    headroom = CapacityBufferSpec.model_validate(
        {
            "name": "headroom",
            "namespace": "reports",
            "replicas": 2,
            "pod": {"cpu": "4", "memory": "8Gi"},
        }
    )
    ramp = base.model_copy(
        update={
            "name": "buffer-beside-small-pods",
            "minutes": 30,
            "groups": [group],
            "deployments": [web, reports],
            "capacity_buffers": [headroom],
        }
    )
    # When nodescaler runs it
    summary, _, _ = run(sandbox_runs, ramp, (NODESCALER,))
    # Then the nodes its virtual pods are bound to are held (marked buffer-room): the top's
    # 49 cores of pods and the buffer's 8 take 8 nodes (one more allowed for a tie's luck).
    # Unmarked, each node bought for the buffer took web pods before its pods: 11
    assert summary[NODESCALER]["peak_desired"]["shop-ng"] <= 9

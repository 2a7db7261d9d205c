""" "CA tuned" with a reservation target, through the sandbox (moto's server and the
loopback API server): its cluster-proportional-autoscaler keeps placeholders taking the
target's room of the group's nodes, real pods preempt them and start without waiting for
a node, and the placeholders then pending make Cluster Autoscaler add one
(`baseline_proportional`; Cluster Autoscaler's FAQ, "How can I configure overprovisioning
with Cluster Autoscaler?", dynamic overprovisioning)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox import controllers
from nodescaler_sandbox.baseline_tuning import PLACEHOLDER_PREFIX
from nodescaler_sandbox.cadence import steps
from nodescaler_sandbox.cluster import UNSCHEDULABLE_SINCE
from nodescaler_sandbox.outages import Outages
from nodescaler_sandbox.sandbox import sandbox
from nodescaler_sandbox.scenario_file import Scenario
from nodescaler_sandbox.world import World

from tests.sandbox.conftest import scenario

pytestmark = pytest.mark.slow  # moto's server and the API server

PROPORTIONAL = f"{PLACEHOLDER_PREFIX}web-ng-proportional"


def growing_web() -> Scenario:
    """pods-that-stay's group (microservices: cpu and memory at 60 %; m5.4xlarge nodes of
    16 cores and 64 GiB; 1 to 10) with 8 one-core web pods, 16 from minute 5."""
    stay = scenario("pods-that-stay")
    web = next(d for d in stay.deployments if d.name == "web")
    web = web.model_copy(update={"replicas": {0: 8, 4: 8, 5: 16}, "disruption_budget": None})
    return stay.model_copy(update={"minutes": 11, "deployments": [web]})


def pods_of(world: World, app: str) -> list[dict[str, Any]]:
    return [
        p
        for p in world.cluster.store.objects["pods"].values()
        if p["metadata"]["labels"].get("app") == app
    ]


def test_ca_tuned_holds_the_reservations_room_with_placeholders_real_pods_preempt(
    tmp_path: Path,
) -> None:
    web = growing_web()
    seen: dict[float, dict[str, Any]] = {}
    settings: dict[str, Any] = {}
    with sandbox(web.policies_path, tmp_path, boot=timedelta(minutes=web.boot_minutes)) as box:
        world = World(web, box, hooks=False)
        act = controllers.acting(
            web, controllers.TUNED, box, world, Outages([], box), settings=settings
        )
        autoscaling = box.client("autoscaling")
        # When CA tuned runs the world, second by second in steps of 10
        for at in steps(web.minutes, web.step_seconds):
            world.step(at)
            act(at, web.step_seconds)
            world.react()
            placeholders = pods_of(world, PROPORTIONAL)
            (group,) = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
            seen[at / 60] = {
                "bound": sum(1 for p in placeholders if p["spec"].get("nodeName")),
                "pending": sum(1 for p in placeholders if not p["spec"].get("nodeName")),
                "nodes": len(world.cluster.group_nodes("web-ng")),
                "desired": group["DesiredCapacity"],
                "web": pods_of(world, "web"),
            }
            box.advance(web.step_seconds / 60, between=world.react)
    # Then its settings say what ran: CPA in linear mode, 5 cores a placeholder of 2
    cpa = settings["groups"]["web-ng"]["proportional"]["cluster-proportional-autoscaler"]
    assert cpa["--default-params"] == {"linear": {"coresPerReplica": 5.0, "min": 4, "max": 32}}
    # before the growth, on the group's one node (16 cores): 4 placeholders bound, 8 cores
    # of 16 held beside the 8 web pods (the 60 % target and a slice's rounding)
    before = seen[4.5]
    assert (before["nodes"], before["bound"], before["pending"]) == (1, 4, 0)
    # the 8 new web pods preempt them: every one bound at once, none waited for a node
    after = seen[6.5]
    assert len(after["web"]) == 16
    assert all(p["spec"].get("nodeName") for p in after["web"])
    old = {p["metadata"]["name"] for p in before["web"]}
    new = [p for p in after["web"] if p["metadata"]["name"] not in old]
    assert len(new) == 8
    assert not [p for p in new if UNSCHEDULABLE_SINCE in p["metadata"]["annotations"]]
    assert after["bound"] == 0 and after["pending"] == 4  # replaced, pending
    # the pending placeholders make CA add a node; once it is Ready CPA counts 32 cores:
    # 7 placeholders, all bound on it
    assert after["desired"] == 2
    last = seen[web.minutes]
    assert (last["nodes"], last["bound"], last["pending"]) == (2, 7, 0)

"""Through the handlers with a cluster: during an ARC zonal shift, pending pods go to a group
outside the shifted zone though the priority expander prefers the group in it, and a group
confined to the zone sheds no spare node; both decisions say why. Karpenter does the same:
no launch into, and no voluntary disruption in, a zone shifted away. Only a shift of the
cluster's resources counts: another team's practice run on their own load balancer holds
nothing. The sandbox answers GetManagedResource
(https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_GetManagedResource.html),
ListZonalShifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListZonalShifts.html)
and ListAutoshifts (https://docs.aws.amazon.com/arc-zonal-shift/latest/api/API_ListAutoshifts.html)
as AWS does, each shift naming its resourceIdentifier; moto has no ARC."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox.kube.apiserver import KubeApiServer
from nodescaler_sandbox.zonal_shifts import CLUSTER_ARN, ArcZonalShiftApi

from tests.aws import REGION, CallCounter, client, desired_capacity
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment
from tests.e2e.test_kubernetes_path import (
    BATCH_POLICY,
    group_at_zero,
    launch_template,
    two_batch_nodes,
)
from tests.kube import kubeconfig, pod

# near-ng first, then the rest
CHAIN = '[{"name": "priority", "priorities": {"10": ["near-ng"], "1": [".*"]}}]'
OUR_LB = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/app/web/50dc6c49"
THEIR_LB = "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/billing/7e1"


@pytest.fixture
def api_server() -> Iterator[KubeApiServer]:
    with KubeApiServer(token="secret") as server:
        yield server


@pytest.fixture
def arc(clock: VirtualClock) -> ArcZonalShiftApi:
    return ArcZonalShiftApi(clock)


@pytest.fixture
def deployment(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
    arc: ArcZonalShiftApi,
) -> Deployment:
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    config = str(kubeconfig(tmp_path / "kubeconfig", api_server.url))
    environment = {
        "KUBECONFIG_PATH": config,
        "EXPANDERS": CHAIN,
        # as a deployed stack names them: its EKS cluster, and cdk.json's zonalShift.resources
        "ZONAL_SHIFT_RESOURCES": json.dumps([CLUSTER_ARN, OUR_LB]),
    }
    deployed = Deployment(policies, calls, clock, environment)
    arc.watch(deployed.clients.arc_zonal_shift)  # moto has no ARC zonal shift
    return deployed


def zone_id(zone: str) -> str:
    zones = client("ec2").describe_availability_zones()["AvailabilityZones"]
    return next(str(z["ZoneId"]) for z in zones if z["ZoneName"] == zone)


def in_zone(group: str, zone: str) -> None:
    client("autoscaling").update_auto_scaling_group(
        AutoScalingGroupName=group, AvailabilityZones=[zone]
    )


def decisions(printed: Any, group: str) -> list[dict[str, Any]]:
    return [
        line["decision"]
        for line in printed.logs
        if "decision" in line and line["decision"]["node_group"] == group
    ]


def test_given_the_preferred_groups_zone_shifted_away_then_the_other_group_grows_and_says_why(
    deployment: Deployment,
    api_server: KubeApiServer,
    arc: ArcZonalShiftApi,
    clock: VirtualClock,
    output: Any,
) -> None:
    # Given two groups at zero, near-ng (the priority expander's choice) in zone a and
    # far-ng in zone b, and a zonal shift away from zone a's ID for the next hour
    launch_template("general", "m5.large")
    group_at_zero("near-ng", "general")
    group_at_zero("far-ng", "general")
    in_zone("far-ng", f"{REGION}b")
    shift = arc.start_zonal_shift(zone_id(f"{REGION}a"), timedelta(hours=1))
    expires = f"{clock.now() + timedelta(hours=1):%Y-%m-%d %H:%M:%S}Z"
    for i in range(3):  # three 1-core pods: three m5.large nodes
        api_server.cluster.put("pods", pod(f"job-{i}", cpu="1"))

    # When a tick evaluates both groups
    deployment.tick()
    printed = output()

    # Then far-ng grows for the pods, near-ng stays at zero
    assert (desired_capacity("near-ng"), desired_capacity("far-ng")) == (0, 3)
    # and both decisions name why near-ng was left out: its zone, the shift, its expiry
    why = (
        f"left out near-ng: its zone {zone_id(f'{REGION}a')} is shifted away "
        f"(zonal shift {shift} on cluster/prod, expires {expires})"
    )
    for group in ("near-ng", "far-ng"):
        (decision,) = decisions(printed, group)
        assert why in decision["metrics"][0]["detail"]
    # the shifts were read once for the batch, not once per group: one GetManagedResource
    # for each of the cluster's resources
    assert arc.calls == 2


def test_given_another_teams_practice_run_on_their_load_balancer_then_no_group_is_held(
    deployment: Deployment,
    api_server: KubeApiServer,
    arc: ArcZonalShiftApi,
    output: Any,
) -> None:
    # Given near-ng (the priority expander's choice) in zone a and far-ng in zone b, both at
    # zero; and another team's practice run and zonal shift (three days) away from zone a on
    # their own load balancer, which has zonal autoshift on, as AWS autoshifts it away from
    # zone a too; the cluster and our load balancer have nothing shifted
    launch_template("general", "m5.large")
    group_at_zero("near-ng", "general")
    group_at_zero("far-ng", "general")
    in_zone("far-ng", f"{REGION}b")
    arc.manage(THEIR_LB, autoshift=True)
    arc.manage(OUR_LB)
    away = zone_id(f"{REGION}a")
    arc.start_zonal_shift(away, timedelta(minutes=30), resource=THEIR_LB, shift_type="PRACTICE_RUN")
    arc.start_zonal_shift(away, timedelta(days=3), resource=THEIR_LB)
    arc.start_autoshift(away)
    for i in range(3):
        api_server.cluster.put("pods", pod(f"job-{i}", cpu="1"))

    # When a tick evaluates both groups
    deployment.tick()

    # Then near-ng grows for the pods as the expander prefers, and nothing names a shift
    assert (desired_capacity("near-ng"), desired_capacity("far-ng")) == (3, 0)
    for group in ("near-ng", "far-ng"):
        (decision,) = decisions(output(), group)
        assert "shift" not in json.dumps(decision)


@pytest.mark.parametrize(("shifted", "size"), [(True, 2), (False, 1)])
def test_given_a_group_confined_to_a_shifted_zone_then_its_spare_node_stays(
    deployment: Deployment,
    api_server: KubeApiServer,
    arc: ArcZonalShiftApi,
    clock: VirtualClock,
    output: Any,
    shifted: bool,
    size: int,
) -> None:
    # Given batch-ng in zone a with two nodes, one of them empty (without a shift, the
    # empty one goes once the scale-in's stabilization has passed), and maybe a shift
    two_batch_nodes(api_server)
    if shifted:
        arc.start_zonal_shift(zone_id(f"{REGION}a"), timedelta(hours=2))

    # When it is evaluated for over ten minutes
    for _ in range(12):
        deployment.tick()
        clock.advance(minutes=1)

    # Then, while the zone is shifted away, no node leaves and the decision says why
    assert desired_capacity("batch-ng") == size
    last = decisions(output(), "batch-ng")[-1]
    if shifted:
        assert "zonal-shift" in last["limited_by"]
        assert f"its zone {zone_id(f'{REGION}a')} is shifted away" in last["reason"]


def test_given_the_zonal_shift_api_refused_then_pods_still_get_nodes_and_nothing_shrinks(
    deployment: Deployment,
    api_server: KubeApiServer,
    arc: ArcZonalShiftApi,
    clock: VirtualClock,
    output: Any,
) -> None:
    # Given the API refused (the role lacks the action), a group with a spare node, and a
    # group at zero with a pending pod
    arc.refuse("AccessDeniedException")
    two_batch_nodes(api_server)
    launch_template("general", "m5.large")
    group_at_zero("near-ng", "general")
    api_server.cluster.put("pods", pod("job-new", cpu="1"))

    for _ in range(12):
        deployment.tick()
        clock.advance(minutes=1)

    # Then the pending pod's group grows, the spare node stays, and the decision says why
    assert (desired_capacity("near-ng"), desired_capacity("batch-ng")) == (1, 2)
    last = decisions(output(), "batch-ng")[-1]
    assert "zonal shifts could not be read (AccessDeniedException)" in last["reason"]

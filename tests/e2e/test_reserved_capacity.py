"""Through the handlers with a cluster: pending pods go first to the group whose capacity
reservation has room (the reserved-first expander), though another group is the priority
expander's choice; a reservation that does not exist is named and the pods go elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nodescaler_sandbox.capacity_reservations import CapacityReservations
from nodescaler_sandbox.kube.apiserver import KubeApiServer

from tests.aws import REGION, CallCounter, client, desired_capacity
from tests.builders import VirtualClock
from tests.e2e.conftest import Deployment
from tests.e2e.test_kubernetes_path import BATCH_POLICY, group_at_zero, launch_template
from tests.kube import kubeconfig, pod

# cheap-ng first, then the rest; reserved-first before it
CHAIN = (
    '[{"name": "reserved-first"}, '
    '{"name": "priority", "priorities": {"10": ["cheap-ng"], "1": [".*"]}}]'
)


@pytest.fixture
def api_server() -> Any:
    with KubeApiServer(token="secret") as server:
        yield server


@pytest.fixture
def reservations() -> CapacityReservations:
    return CapacityReservations()


@pytest.fixture
def deployment(
    policies: Path,
    calls: CallCounter,
    clock: VirtualClock,
    api_server: KubeApiServer,
    tmp_path: Path,
    reservations: CapacityReservations,
) -> Deployment:
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    config = str(kubeconfig(tmp_path / "kubeconfig", api_server.url))
    deployed = Deployment(policies, calls, clock, {"KUBECONFIG_PATH": config, "EXPANDERS": CHAIN})
    reservations.watch(deployed.clients.ec2)  # moto has no capacity reservations
    return deployed


def reserved_group(reservation_id: str) -> None:
    """reserved-ng launches m5.large into `reservation_id`, from zero."""
    target = {"CapacityReservationId": reservation_id}
    client("ec2").create_launch_template(
        LaunchTemplateName="reserved",
        LaunchTemplateData={
            "InstanceType": "m5.large",
            "ImageId": "ami-12c6146b",
            "CapacityReservationSpecification": {"CapacityReservationTarget": target},
        },
    )
    group_at_zero("reserved-ng", "reserved")


def details(printed: Any, group: str) -> list[str]:
    return [
        m["detail"]
        for line in printed.logs
        if "decision" in line and line["decision"]["node_group"] == group
        for m in line["decision"]["metrics"]
    ]


def test_given_a_reservation_with_room_then_pending_pods_go_to_its_group_not_the_first(
    deployment: Deployment,
    api_server: KubeApiServer,
    reservations: CapacityReservations,
    output: Any,
) -> None:
    # AvailableInstanceCount: 4 reserved, 1 running in it, 3 free
    # https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservations.html
    reserved = reservations.reserve("m5.large", f"{REGION}a", 4, used=1)
    launch_template("general", "m5.large")
    group_at_zero("cheap-ng", "general")
    reserved_group(reserved)
    for i in range(3):  # three 1-core pods: three m5.large nodes (1930m allocatable)
        api_server.cluster.put("pods", pod(f"job-{i}", cpu="1"))

    deployment.tick()
    printed = output()

    assert (desired_capacity("reserved-ng"), desired_capacity("cheap-ng")) == (3, 0)
    assert any(
        f"(reserved-first: 3 reserved instances unused ({reserved}))" in d
        for d in details(printed, "reserved-ng")
    )
    # the dashboard's figure: read once for the batch of both groups' evaluations
    assert printed.metric("ReservedCapacityUnused", "reserved-ng") == [3.0]


def test_given_a_reservation_that_does_not_exist_then_the_next_expander_decides_and_says_why(
    deployment: Deployment, api_server: KubeApiServer, output: Any
) -> None:
    launch_template("general", "m5.large")
    group_at_zero("cheap-ng", "general")
    reserved_group("cr-0000000000000404a")
    api_server.cluster.put("pods", pod("job", cpu="1"))

    deployment.tick()
    printed = output()

    assert (desired_capacity("reserved-ng"), desired_capacity("cheap-ng")) == (0, 1)
    assert any(
        "reserved-first: no reserved room: reservation cr-0000000000000404a does not exist" in d
        for d in details(printed, "reserved-ng")
    )
    assert printed.metric("ReservationsUncounted", "reserved-ng") == [1.0]

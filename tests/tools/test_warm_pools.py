"""The sandbox's warm pools, as Auto Scaling keeps them (moto stores the configuration and
never an instance): the pool's size, scale-outs taken from it with a warm boot, and
what it costs."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.figures import node_hours
from nodescaler_sandbox.kube.apiserver import Cluster
from nodescaler_sandbox.provision import create_group, launch_configuration
from nodescaler_sandbox.scenario_checks import ScenarioError
from nodescaler_sandbox.scenario_file import load_scenario
from nodescaler_sandbox.warm_pools import WarmPools, pool_size, waiting_share

from tests.aws import REGION, aws, client  # noqa: F401  (moto for every test here)

REPOSITORY = Path(__file__).parents[2]
START = datetime.fromisoformat("2026-11-23T09:00:00+00:00")
COLD, WARM = timedelta(minutes=3), timedelta(minutes=1)


@pytest.mark.parametrize(
    ("min_size", "max_prepared", "desired", "expected"),
    [
        (0, None, 4, 16),  # unset: the group's max (20) less the desired
        (0, 10, 4, 6),  # MaxGroupPreparedCapacity less the desired
        (0, 3, 4, 0),  # below the desired: empty ...
        (2, 3, 4, 2),  # ... unless MinSize says otherwise
        (5, 5, 9, 5),  # equal: a fixed size, whatever the desired
        (5, 5, 0, 5),
        (0, -1, 4, 16),  # -1 clears it: the group's max again
    ],
)
def test_the_pool_size_follows_auto_scaling_s_rule(
    min_size: int, max_prepared: int | None, desired: int, expected: int
) -> None:
    assert pool_size(min_size, max_prepared, desired, max_size=20) == expected


def a_group_with_a_pool(size: int, state: str = "Stopped") -> SimulatedCluster:
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.large")
    create_group(
        autoscaling, "web", region=REGION, tags={}, max_size=20, launch_configuration="web-lc"
    )
    autoscaling.put_warm_pool(
        AutoScalingGroupName="web", MinSize=size, MaxGroupPreparedCapacity=size, PoolState=state
    )
    shape = {"cpu": "2", "memory": "8Gi", "pods": "110"}
    return SimulatedCluster(Cluster(), COLD, shapes={"web": shape}, region=REGION)


def ready_at(cluster: SimulatedCluster) -> dict[str, datetime]:
    """When each instance's node turned Ready, minute by minute for ten minutes."""
    seen: dict[str, datetime] = {}
    for minute in range(10):
        now = START + timedelta(minutes=minute)
        cluster.sync(now, holds=lambda _: False)
        for instance_id in cluster.instances:
            if cluster.node_of(instance_id) and instance_id not in seen:
                seen[instance_id] = now
    return seen


def scale_to(desired: int) -> None:
    client("autoscaling").set_desired_capacity(AutoScalingGroupName="web", DesiredCapacity=desired)


def test_a_scale_out_takes_ready_warm_instances_first_and_boots_the_rest_cold() -> None:
    # Given a pool of 2 that finished initialising
    cluster = a_group_with_a_pool(2)
    pools = WarmPools(REGION, COLD, WARM)
    cluster.warm_boot = pools.boot_of
    pools.refill(START - timedelta(minutes=10))
    assert pools.waiting("web", START) == 2
    # When the group grows by 3
    scale_to(3)
    # Then two nodes are Ready a warm boot later, the third a cold boot later
    assert sorted(t - START for t in ready_at(cluster).values()) == [WARM, WARM, COLD]


def test_an_instance_still_initialising_joins_when_it_is_done_and_warm_booted() -> None:
    cluster = a_group_with_a_pool(1)
    pools = WarmPools(REGION, COLD, WARM)
    cluster.warm_boot = pools.boot_of
    pools.refill(START - timedelta(minutes=1))  # ready at START + 2 min
    scale_to(1)
    assert list(ready_at(cluster).values()) == [START + timedelta(minutes=3)]  # 2 + 1


def test_the_pool_refills_after_a_scale_out_and_sheds_its_newest_when_it_shrinks() -> None:
    a_group_with_a_pool(2)
    pools = WarmPools(REGION, COLD, WARM)
    pools.refill(START - timedelta(minutes=10))
    pools.boot_of("web", START)  # a scale-out took one
    pools.refill(START)  # its replacement initialises for a cold boot
    assert (pools.waiting("web", START), len(pools.pools["web"])) == (1, 2)
    client("autoscaling").put_warm_pool(
        AutoScalingGroupName="web", MinSize=1, MaxGroupPreparedCapacity=1
    )
    pools.refill(START)
    assert pools.pools["web"] == [START - timedelta(minutes=7)]  # the ready one stays


@pytest.mark.parametrize(("state", "share"), [("Stopped", 0.0225), ("Running", 1.0)])
def test_a_pool_costs_its_initialising_instances_in_full_and_its_waiting_ones_their_share(
    state: str, share: float
) -> None:
    a_group_with_a_pool(4, state)
    pools = WarmPools(REGION, COLD, WARM)
    pools.refill(START - timedelta(minutes=10))
    pools.boot_of("web", START)
    pools.refill(START)  # 3 waiting, 1 initialising
    assert pools.billed("web", START) == pytest.approx(1 + 3 * share, rel=0.01)
    client("autoscaling").delete_warm_pool(AutoScalingGroupName="web")
    pools.refill(START)
    assert pools.billed("web", START) == 0


@pytest.mark.parametrize(
    ("state", "instance_type", "share"),
    [
        # a 20 GiB gp3 root volume at $0.088 a GB-month over 730 hours, against the
        # instance's $ an hour on demand in eu-west-1 (https://aws.amazon.com/ebs/pricing/,
        # https://aws.amazon.com/ec2/pricing/on-demand/)
        ("Stopped", "m5.4xlarge", 20 * 0.088 / 730 / 0.856),  # 0.28 %
        ("Stopped", "m5.large", 20 * 0.088 / 730 / 0.107),  # 2.25 %
        ("Hibernated", "m5.4xlarge", (20 + 64) * 0.088 / 730 / 0.856),  # and its memory
        ("Running", "m5.4xlarge", 1.0),
    ],
)
def test_a_waiting_instance_costs_its_volume_against_its_running_price(
    state: str, instance_type: str, share: float
) -> None:
    prices = {"m5.4xlarge": 0.856, "m5.large": 0.107}
    assert waiting_share(state, instance_type, prices) == pytest.approx(share)
    # any instance type EC2 describes, at the price the scenario gives it (r5.2xlarge: 64 GiB)
    hibernated = waiting_share("Hibernated", "r5.2xlarge", {"r5.2xlarge": 0.564})
    assert hibernated == pytest.approx((20 + 64) * 0.088 / 730 / 0.564)


def test_a_warm_pool_of_an_instance_type_without_a_price_is_refused_by_name(
    tmp_path: Path,
) -> None:
    # A scenario whose warm pool is of a type the sandbox has no price for, none given
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "web.yaml").write_text((REPOSITORY / "policies" / "web.yaml").read_text())
    scenario = tmp_path / "warm.yaml"
    scenario.write_text(
        "name: warm\nminutes: 10\npolicies: policies\ngroups:\n"
        "  - {name: memory, policy: web, min: 1, max: 5, instanceType: r5.2xlarge,"
        " warmPool: {minSize: 2}}\n"
    )
    with pytest.raises(
        ScenarioError, match=r"groups\.0\.warmPool: no on-demand price for r5\.2xlarge"
    ):
        load_scenario(scenario)
    # and with its price given, it loads
    scenario.write_text(scenario.read_text() + "prices: {r5.2xlarge: 0.564}\n")
    assert load_scenario(scenario).groups[0].warm_pool is not None


def test_node_hours_count_warm_pools_at_what_they_cost() -> None:
    rows = [
        {"minute": m, "in_service": 2, "warm": 4, "warm_billed": 0.2 if m < 30 else 1.2}
        for m in range(60)
    ]
    assert node_hours(rows) == pytest.approx(2.7)  # 2 nodes, 0.2 for 30 min, 1.2 for 30
    assert node_hours([{"minute": 0, "in_service": 60}]) == 1.0  # no pool: nothing added

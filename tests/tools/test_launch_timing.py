"""Launches timed to the second: a scale request's instances boot from the second it takes
effect, not from the step that saw it (`cluster.SimulatedCluster.request`), and the node
says when it turned Ready in its Ready condition, as the kubelet does."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from nodescaler_sandbox import charging, latency, runner
from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.kube.apiserver import Cluster
from nodescaler_sandbox.provision import create_group, launch_configuration
from nodescaler_sandbox.scenario_file import load_scenario
from nodescaler_sandbox.virtual_clock import VirtualClock

from tests.aws import REGION, aws, client  # noqa: F401  (moto for every test here)

START = datetime.fromisoformat("2026-11-23T09:00:00+00:00")
BOOT = timedelta(minutes=3)
STEP = 10
REPO = Path(__file__).parents[2]
SCENARIOS = REPO / "scenarios"


def a_group() -> SimulatedCluster:
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.large")
    create_group(
        autoscaling, "web", region=REGION, tags={}, max_size=20, launch_configuration="web-lc"
    )
    shape = {"cpu": "2", "memory": "8Gi", "pods": "110"}
    return SimulatedCluster(Cluster(), BOOT, shapes={"web": shape}, region=REGION)


def scale_to(desired: int) -> None:
    client("autoscaling").set_desired_capacity(AutoScalingGroupName="web", DesiredCapacity=desired)


def nodes_at(cluster: SimulatedCluster, second: float) -> list[dict[str, object]]:
    cluster.sync(START + timedelta(seconds=second), holds=lambda _: False)
    return list(cluster.store.objects["nodes"].values())


def ready_since(node: dict[str, object]) -> str:
    status = node["status"]
    assert isinstance(status, dict)
    (condition,) = status["conditions"]
    return str(condition["lastTransitionTime"])


@pytest.mark.parametrize(
    ("effective", "ready_by"),
    [
        (7.2, "2026-11-23T09:03:07Z"),  # the fast path's request, before the step's time
        (12.0, "2026-11-23T09:03:12Z"),  # CA's loop ending after it
    ],
)
def test_a_request_s_instances_boot_from_the_second_it_takes_effect(
    effective: float, ready_by: str
) -> None:
    # Given a request in the step ending at 10 s that takes effect at `effective`
    cluster = a_group()
    cluster.request("web", START + timedelta(seconds=effective))
    scale_to(2)
    assert nodes_at(cluster, STEP) == []  # the step sees the instances launched
    # Then their nodes are Ready one boot after that second, not after the step's
    ready = effective + BOOT.total_seconds()
    assert nodes_at(cluster, ready - 0.5) == []
    nodes = nodes_at(cluster, ready)
    assert len(nodes) == 2
    assert {ready_since(n) for n in nodes} == {ready_by}  # as the kubelet says, to the second


def test_an_instance_no_request_started_boots_from_the_sync_that_found_it() -> None:
    # Given Auto Scaling's own launch (a scheduled action, a replacement): no request
    cluster = a_group()
    cluster.request("web", START)  # a request before the last sync is spent by it
    nodes_at(cluster, 0)
    scale_to(1)
    assert nodes_at(cluster, STEP) == []
    assert nodes_at(cluster, STEP + BOOT.total_seconds() - 1) == []
    assert len(nodes_at(cluster, STEP + BOOT.total_seconds())) == 1


class Waiting:
    """The world as `charging.takes_effect` reads it: its step, and the pods waiting."""

    def __init__(self, at: int, waiting: list[tuple[str, int, bool]]) -> None:
        self.at, self.start, self._waiting = at, START, waiting

    def waiting_for(self, group: str) -> list[tuple[str, int, bool]]:
        return self._waiting


def test_a_request_takes_effect_when_it_first_answers_a_pod_waiting() -> None:
    charge = latency.Charged(latency.Nodescaler(), STEP)
    waiting = [("web-1", 100, False), ("web-2", 100, False)]
    world = Waiting(100, waiting)
    takes_effect = charging.takes_effect(world, runner.NODESCALER, charge)  # type: ignore[arg-type]
    at = takes_effect("web", "fast path: 2 new unschedulable pods")
    # each pod's own effective second, as its reaction is charged; the first of them
    firsts = [
        charge.effective(charge.arrival(seen, name), 100, latency.FAST_PATH, gpu=False)
        for name, seen, _ in waiting
    ]
    assert at == START + timedelta(seconds=min(firsts))
    assert 90 < min(firsts) < 100 + 5 + 2.2


def test_a_request_for_no_pod_takes_effect_at_its_look_in_the_step() -> None:
    # a tick at 120 s sizing a group for its queue: the minute's evaluation, then its chain
    world = Waiting(120, [])
    ours = charging.takes_effect(
        world, runner.NODESCALER, latency.Charged(latency.Nodescaler(), STEP)
    )  # type: ignore[arg-type]
    assert ours("web", "tick") == START + timedelta(seconds=120 + 1.0 + 0.45 + 0.25)
    # CA's loop, for a gpu-free request: its scan in the step and the loop's second
    theirs = charging.takes_effect(
        world, runner.BASELINE, latency.Charged(latency.ClusterAutoscaler(), STEP)
    )  # type: ignore[arg-type]
    assert theirs("web", None) > START + timedelta(seconds=120)


def test_the_clock_stops_at_a_node_s_ready_second_between_two_steps() -> None:
    # Given a node due Ready at 7.2 s into a step of 10 s (and another at the step's end)
    clock = VirtualClock(START)
    clock.wake_at(START + timedelta(seconds=7.2))
    clock.wake_at(START + timedelta(seconds=10))
    seen: list[float] = []
    # When time moves on a step, the world reacting at each stop on the way
    clock.advance(timedelta(seconds=10), lambda: seen.append((clock.now() - START).total_seconds()))
    # Then it reacts at 7.2 s; the step at 10 s reacts on its own
    assert seen == [7.2]
    assert clock.now() == START + timedelta(seconds=10)


def test_a_request_at_the_first_step_launches_no_earlier_than_the_start() -> None:
    # pods seen at 0 s "arrived" up to 9 s before it; the fast path's look at -5 s would
    # take effect at -2.8 s, before the groups' first instances launch: at 0 with them
    charge = latency.Charged(latency.Nodescaler(), STEP)
    early = next(f"web-{n}" for n in range(100) if latency.arrival_offset(f"web-{n}", STEP) > 5)
    world = Waiting(0, [(early, 0, False)])
    takes_effect = charging.takes_effect(world, runner.NODESCALER, charge)  # type: ignore[arg-type]
    assert charge.effective(charge.arrival(0, early), 0, latency.FAST_PATH, gpu=False) < 0
    assert takes_effect("web", "fast path: 1 new unschedulable pod") == START


@pytest.mark.parametrize(
    ("cause", "path"),
    [
        ("tick", latency.TICK),
        ("fast path: 2 new unschedulable pods", latency.FAST_PATH),
        ("alarm ml-training-queue-backlog", latency.EVENT),
        ("launch failure in web", latency.EVENT),
        (None, latency.EVENT),
    ],
)
def test_a_request_s_path_is_read_from_its_cause(cause: str | None, path: str) -> None:
    assert charging.request_path(runner.NODESCALER, cause) == path
    assert charging.request_path(runner.BASELINE, cause) == latency.SCAN


def test_a_tick_s_request_for_pods_new_in_a_minute_step_starts_at_the_fast_path_s_look() -> None:
    # Given steps of a minute and a pod that came 50 s before the step's tick at 120 s
    step = 60
    name = next(f"web-{n}" for n in range(200) if latency.arrival_offset(f"web-{n}", step) == 50)
    world = Waiting(120, [(name, 120, False)])

    def request_at(side: latency.Nodescaler) -> datetime:
        takes_effect = charging.takes_effect(world, runner.NODESCALER, latency.Charged(side, step))  # type: ignore[arg-type]
        return takes_effect("web", "tick")

    # Then it starts at the look after its arrival (70 s → 70 s), not at the tick's
    assert request_at(latency.Nodescaler()) == START + timedelta(seconds=70 + 2.2)
    # unless the stack runs no fast path (cdk.json fastPath: false)
    off = latency.Nodescaler(fast_path=False)
    assert request_at(off) == START + timedelta(seconds=120 + 1.7)


@pytest.mark.parametrize(
    ("environment", "races"),
    [
        ({}, True),  # as deployed
        ({"FAST_PATH": "false"}, False),  # cdk.json fastPath: false
        ({"FAST_PATH_INTERVAL_SECONDS": "60"}, False),  # refused: every invocation fails
        ({"FAST_PATH_INTERVAL_SECONDS": "abc"}, False),  # refused too: not a number
        ({"FAST_PATH_INTERVAL_SECONDS": "30"}, True),
    ],
)
def test_the_tick_races_the_fast_path_only_where_it_runs(
    environment: dict[str, str], races: bool
) -> None:
    scenario = load_scenario(SCENARIOS / "17-managed-from-zero.yaml")
    scenario = scenario.model_copy(update={"environment": environment})
    side = charging.charge(runner.NODESCALER, scenario, {}).side
    assert isinstance(side, latency.Nodescaler) and side.fast_path is races


def test_the_tick_races_no_look_of_a_group_it_does_not_watch_or_while_it_fails(
    tmp_path: Path,
) -> None:
    # Given a scenario whose second group's policy takes no pending pods (ownPendingPods
    # false, no PendingPods metric), and fast-path looks that failed at 100 s
    (tmp_path / "policies").mkdir()
    queue = (REPO / "policies" / "gpu-training.yaml").read_text(encoding="utf-8")
    (tmp_path / "policies" / "queue.yaml").write_text(
        queue.replace("spec:\n", "spec:\n  ownPendingPods: false\n", 1), encoding="utf-8"
    )
    (tmp_path / "policies" / "batch.yaml").write_text(
        (SCENARIOS / "policies" / "batch.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "s.yaml").write_text(
        "name: s\nminutes: 5\npolicies: policies\ngroups:\n"
        "  - {name: jobs-ng, policy: batch, max: 4, instanceType: m5.xlarge}\n"
        "  - {name: gpu-ng, policy: gpu-training, max: 4, instanceType: m5.xlarge}\n",
        encoding="utf-8",
    )
    charge = charging.charge(
        runner.NODESCALER, load_scenario(tmp_path / "s.yaml"), {}, lambda: [100.0]
    )
    # Then the fast path is taken to watch the pending-pods group while it looks
    assert charge.watched("jobs-ng", 60) and charge.watched("jobs-ng", 160)
    assert not charge.watched("jobs-ng", 100) and not charge.watched("jobs-ng", 159)
    # and never the group it does not watch
    assert not charge.watched("gpu-ng", 60)

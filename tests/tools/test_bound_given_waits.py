"""Why a run can come out below the bound, and the figure no run can (`oracle.waits_allowance`,
`oracle_bounds.bound_given_waits`): the bound counts a deployment's new pod from a boot after it
arrived; a run whose pods wait longer (Cluster Autoscaler learning of a failed Spot launch
at its Auto Scaling cache's next refresh, a minute on) holds fewer nodes meanwhile, by at
most those pods' shares, rounded up, each step they wait beyond the boot."""

from __future__ import annotations

import math

import pytest
from nodescaler_sandbox.figures import PodRecord
from nodescaler_sandbox.oracle import Bounds, waits_allowance

STEP = 10
JUDGED = range(0, 1800, STEP)
# 4-launch-failure: Spot cannot launch; on-demand boots in 2 minutes
BOUNDS = Bounds({"spot": (0, 20), "od": (0, 20)}, None, {"spot": math.inf, "od": 120.0})


def jobs(count: int, *, created: float, bound: float, name: str = "jobs") -> list[PodRecord]:
    """Pods of a quarter node each (1 of 4 cores), either group's new node fits them."""
    return [
        PodRecord(
            f"{name}-{n}",
            created,
            unschedulable=created,
            bound=bound,
            takers=frozenset({"spot", "od"}),
            shares={"spot": 0.25, "od": 0.25},
        )
        for n in range(count)
    ]


def deployment(name: str) -> bool:
    return name.rsplit("-", 1)[0] == "jobs"


def test_pods_on_a_node_within_a_boot_of_arriving_save_nothing() -> None:
    pods = jobs(6, created=0, bound=2.0)  # Ready at 120 s: the boot, to the second
    assert waits_allowance(pods, BOUNDS, deployment, JUDGED, STEP) == 0


def test_pods_waiting_a_minute_beyond_the_boot_save_their_shares_rounded_up_per_step() -> None:
    # Given CA's 6 pods of minute 0, on a node at 181 s (a minute on: the failed Spot
    # launch read at the cache's refresh, then on-demand's boot)
    pods = jobs(6, created=0, bound=181 / 60)
    # Then the steps at 120 to 180 s may count them in the bound: 1.5 nodes, 2 rounded up
    # (the group that cannot launch gets none of them)
    allowance = waits_allowance(pods, BOUNDS, deployment, JUDGED, STEP)
    assert allowance == pytest.approx(7 * 2 * STEP / 3600)


def test_a_queue_s_workers_save_from_their_arrival_as_the_bound_counts_them() -> None:
    # the bound counts workers from their tasks, not a boot later: from creation here
    workers = jobs(4, created=1.0, bound=1.5, name="q-worker")
    allowance = waits_allowance(workers, BOUNDS, deployment, JUDGED, STEP)
    assert allowance == pytest.approx(3 * 1 * STEP / 3600)  # 60, 70, 80 s: one node

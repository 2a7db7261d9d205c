"""The pods Cluster Autoscaler would not move (a bare pod, an emptyDir cache, a kube-system
agent without a budget) keep their nodes under nodescaler and the baseline alike: the two
tests of the pods-that-stay scenario, in one file so that one xdist worker makes its run
once (make test's --dist loadfile)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sandbox.conftest import BASELINE, NODESCALER, SandboxRuns, run, scenario

pytestmark = pytest.mark.slow  # moto's server and the API server, 45 minutes under both

STAYING = ("debug-shell", "cache", "metrics-agent")  # pods-that-stay's pods CA would not move


def staying_nodes(folder: Path, controller: str) -> set[str]:
    """The nodes the run's pods that CA would not move are on (pods.json); empty if any of
    the four went (moved, or lost)."""
    pods = json.loads((folder / "pods.json").read_text())[controller]
    staying = [p for p in pods if p["pod"].rsplit("-", 1)[0] in STAYING]
    if len(staying) != 4 or any(p["gone"] is not None or not p["node"] for p in staying):
        return set()
    return {p["node"] for p in staying}


def test_the_nodes_of_pods_cluster_autoscaler_would_not_move_stay_under_both_runs(
    sandbox_runs: SandboxRuns,
) -> None:
    # A bare pod, an emptyDir cache and a kube-system agent without a budget, on four of
    # the group's nodes once the web pods are gone (CA's FAQ: "What types of pods can
    # prevent CA from removing a node?")
    shortened = scenario("pods-that-stay", minutes=45)  # its run shared with the next test
    summary, _, folder = run(sandbox_runs, shortened)
    for controller in (NODESCALER, BASELINE):
        figures = summary[controller]
        # none of them moved, and the nodes they run on stay (four nodes before launches
        # were timed to the second; since, the node the group starts with joins before
        # the scale-out's and takes more of them); web pods may move
        assert staying_nodes(folder, controller), controller
        kept = staying_nodes(folder, controller)
        assert figures["final_desired"]["web-ng"] >= len(kept), controller
        assert figures["pods_killed_with_their_instance"] == 0, controller
    kept = staying_nodes(folder, NODESCALER)
    assert summary[NODESCALER]["final_desired"] == {"web-ng": len(kept)}  # no more
    peak = summary[NODESCALER]["peak_desired"]["web-ng"]
    assert 0 < summary[NODESCALER]["nodes_removed"] <= peak - len(kept)  # the rest went
    # The same pods annotated safe-to-evict "true": they move, and their nodes go
    safe = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    movable = shortened.model_copy(
        update={
            "deployments": [
                d if d.name == "web" else d.model_copy(update={"annotations": safe})
                for d in shortened.deployments
            ]
        }
    )
    moved = run(sandbox_runs, movable).summary
    assert moved[NODESCALER]["final_desired"]["web-ng"] <= 2
    # the baseline spends the web pods' budget at planning, as CA 1.37 does (core/scaledown/
    # planner, categorizeNodes; pdb/basic.go): one node unneeded at a time, so one of them
    # gone by minute 45
    assert moved[BASELINE]["final_desired"]["web-ng"] <= 3
    assert moved[BASELINE]["nodes_removed"] >= 1
    for controller in (NODESCALER, BASELINE):
        assert moved[controller]["pods_killed_with_their_instance"] == 0


def test_the_baseline_keeps_the_nodes_of_pods_cluster_autoscaler_would_not_move(
    sandbox_runs: SandboxRuns,
) -> None:
    # utils/drain/drain.go (GetPodsForDeletionOnNodeDrain): a pod with no controller blocks
    # its node's removal; a kube-system pod no budget selects only with
    # --skip-nodes-with-system-pods, one with an emptyDir only with
    # --skip-nodes-with-local-storage, both true by default (the FAQ's flags)
    shortened = scenario("pods-that-stay", minutes=45)
    # (the run the test above checks under both: made once a session)
    ran = run(sandbox_runs, shortened)
    as_ca_starts = ran.summary
    # the four pods never move, and the nodes they run on stay (pods.json: each pod's node)
    pods = json.loads((ran.folder / "pods.json").read_text())[BASELINE]
    staying = [p for p in pods if p["pod"].rsplit("-", 1)[0] in STAYING]
    assert len(staying) == 4 and all(p["gone"] is None for p in staying)
    kept = {p["node"] for p in staying}
    assert as_ca_starts[BASELINE]["final_desired"]["web-ng"] >= len(kept)
    # (the flags turned off let these pods move: tests/tools/test_baseline_rules.py; here,
    # by minute 45, the web pods' budget and the planner's recheck timeout decide alone)

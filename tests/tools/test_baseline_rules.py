"""The Cluster Autoscaler baseline's rules, each on a hand-made case whose answer Cluster
Autoscaler's source or FAQ (shared/reference) gives: its node-group backoff, how it reads
a failed launch on AWS, how many empty nodes a scan deletes, when a drain gives up, and
which nodes' pods it believes can move. AWS through moto, the cluster in the sandbox's
API server store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler_sandbox.baseline import ReactiveBaseline
from nodescaler_sandbox.baseline_flags import (
    CLOUD_REFRESH,
    MAX_SCALE_DOWN_PARALLELISM,
    DrainFlags,
    Flags,
    GroupSpec,
)
from nodescaler_sandbox.baseline_scale_down import (
    UTILIZATION_TAG,
    Budgets,
    Place,
    blocks_drain,
    moves_elsewhere,
    underutilized,
    utilization,
    utilization_threshold,
)
from nodescaler_sandbox.baseline_scale_up import Backoff, launch_failed_since
from nodescaler_sandbox.cluster import SimulatedCluster
from nodescaler_sandbox.kube.apiserver import Cluster
from nodescaler_sandbox.provision import (
    create_group,
    group_sizes,
    launch_configuration,
    moto_groups,
)

from tests.aws import REGION, aws, client  # noqa: F401  (moto for the tests that ask)
from tests.kube import node, pdb, pod

T0 = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


# --- backoff: utils/backoff/exponential_backoff.go, with CA's default flags -------------


def test_a_failure_after_the_backoff_ended_doubles_it_up_to_30_minutes() -> None:
    # Given failures each after the last backoff ended (--initial-node-group-backoff-duration
    # 5m, --max-node-group-backoff-duration 30m), then each backoff doubles, up to 30
    backoff = Backoff()
    ends = []
    at = T0
    for _ in range(5):
        until = backoff.fail("spot-ng", at)
        ends.append(round((until - at) / MINUTE))
        at = until + MINUTE  # the next failure once the backoff is over
    assert ends == [5, 10, 20, 30, 30]


def test_a_failure_during_the_backoff_does_not_lengthen_it() -> None:
    # "Multiple concurrent scale-ups failing shouldn't cause backoff duration to increase"
    backoff = Backoff()
    backoff.fail("spot-ng", T0)
    assert backoff.fail("spot-ng", T0 + 2 * MINUTE) == T0 + 7 * MINUTE
    assert backoff.active("spot-ng", T0 + 6 * MINUTE)
    assert not backoff.active("spot-ng", T0 + 7 * MINUTE)


def test_3_hours_without_failure_or_a_completed_scale_up_restart_it_at_5_minutes() -> None:
    # RemoveStaleBackoffData after --node-group-backoff-reset-timeout (3h); RemoveBackoff
    # when a scale-up finishes (clusterstate.go, updateScaleRequests)
    backoff = Backoff()
    backoff.fail("spot-ng", T0)
    later = T0 + timedelta(hours=3, minutes=1)
    backoff.forget_stale(later)
    assert backoff.fail("spot-ng", later) == later + 5 * MINUTE
    backoff.fail("spot-ng", later + 10 * MINUTE)  # would be 10 minutes
    backoff.succeeded("spot-ng")
    assert backoff.fail("spot-ng", later + 30 * MINUTE) == later + 35 * MINUTE


# --- a failed launch: cloudprovider/aws/auto_scaling_groups.go, isNodeGroupAvailable ---


def activity(minute: int, status: str) -> dict[str, Any]:
    return {"StartTime": T0 + minute * MINUTE, "StatusCode": status}


@pytest.mark.parametrize(
    ("activities", "failed"),
    [
        ([activity(3, "Failed")], True),  # since the group was last set (minute 2)
        ([activity(2, "Failed")], True),  # at the same instant: not before it
        ([activity(1, "Failed")], False),  # before it: an old failure
        ([activity(4, "Successful"), activity(3, "Failed")], True),  # newest first
        ([activity(4, "Successful"), activity(1, "Failed")], False),  # stops at the first older
        ([], False),
    ],
)
def test_a_failed_scaling_activity_counts_only_since_the_group_was_last_set(
    activities: list[dict[str, Any]], failed: bool
) -> None:
    assert launch_failed_since(activities, T0 + 2 * MINUTE) is failed


# --- scale-down, on a cluster of moto's instances -----------------------------------------


def a_group_of(
    size: int, tags: dict[str, str] | None = None
) -> tuple[SimulatedCluster, ReactiveBaseline]:
    """`size` Ready nodes of one group (min 0, its Auto Scaling `tags`), none of them a
    pod's, and the baseline scaling it."""
    autoscaling = client("autoscaling")
    launch_configuration(autoscaling, "web-lc", "m5.xlarge")
    create_group(
        autoscaling, "web", region=REGION, tags={}, desired=size, launch_configuration="web-lc"
    )
    cluster = SimulatedCluster(
        Cluster(), MINUTE, shapes={"web": {"cpu": "4", "memory": "16Gi", "pods": "110"}}
    )
    cluster.region = REGION
    cluster.sync(T0 - 30 * MINUTE, holds=lambda _: False)
    cluster.sync(T0 - 20 * MINUTE, holds=lambda _: False)  # booted: Ready nodes
    spec = GroupSpec(0, 100, {"cpu": "4", "memory": "16Gi"}, tags or {})
    baseline = ReactiveBaseline(cluster, autoscaling, {"web": spec}, expanders=[])
    return cluster, baseline


def desired() -> int:
    return group_sizes(REGION)["web"][0]


def said(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The baseline's log lines printed since the last call (its run's log, `baseline_log`)."""
    lines = capsys.readouterr().out.splitlines()
    return [json.loads(line)["message"] for line in lines if '"cluster-autoscaler"' in line]


@pytest.mark.usefixtures("aws")
def test_a_scan_deletes_at_most_10_empty_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    # core/scaledown/budgets/budgets.go, CropNodes: at most --max-scale-down-parallelism (10)
    # nodes, empty or drained, are deleted in parallel
    # Given 12 empty nodes unneeded for 11 minutes, when one scan runs, then 10 go
    cluster, baseline = a_group_of(12)
    names = [n["metadata"]["name"] for n in cluster.store.objects["nodes"].values()]
    baseline.unneeded = dict.fromkeys(names, T0 - 11 * MINUTE)
    baseline.act(T0)  # one scan
    assert desired() == 12 - MAX_SCALE_DOWN_PARALLELISM
    # and its log says which went, and for how long they had been unneeded
    lines, first = said(capsys), sorted(names)[0]
    assert lines[0] == f"Scale-down: removing empty node {first} of web (unneeded 660s)"
    assert f"Scale-down: node {first} removed, group web size 11" in lines
    assert sum(" removed, group web size " in line for line in lines) == 10
    baseline.act(T0 + timedelta(seconds=10))  # the next scan takes the rest
    assert desired() == 0


@pytest.mark.usefixtures("aws")
def test_a_drain_a_budget_blocks_gives_up_after_2_minutes_and_uncordons(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the FAQ ("Does CA work with PodDisruptionBudget in scale-down?"): it evicts "retrying,
    # if needed, for up to 2 min ... If one of the evictions fails, the node is saved and it
    # is not terminated"; core/scaledown/actuation/drain.go: MaxPodEvictionTime 2 minutes
    # Given a due node with two pods of a budget that allows one disruption (so the planner
    # finds it removable), when the second eviction is refused for 2 minutes, then the
    # node is uncordoned and kept, and scale-down rests
    cluster, baseline = a_group_of(2)
    kept, other = sorted(n["metadata"]["name"] for n in cluster.store.objects["nodes"].values())
    for name in ("db-0", "db-1"):
        cluster.store.put("pods", pod(name, kept, labels={"app": "db"}))
    cluster.store.put("pods", pod("web-0", other, cpu="100m"))  # not empty: `kept` is first
    cluster.store.put("poddisruptionbudgets", pdb("db", {"app": "db"}, minAvailable=1))
    baseline.unneeded = {kept: T0 - 11 * MINUTE, other: T0}  # only `kept` is due
    baseline.act(T0)
    assert cluster.store.objects["nodes"][("", kept)]["spec"]["unschedulable"] is True
    baseline.act(T0 + MINUTE)
    assert kept in baseline.draining  # still retrying
    baseline.act(T0 + 2 * MINUTE)
    assert kept not in baseline.draining
    assert said(capsys) == [
        f"Scale-down: removing node, pods to move {kept} of web (unneeded 660s)",
        f"Scale-down: failed to drain node {kept} in time, given up",
    ]
    assert cluster.store.objects["nodes"][("", kept)]["spec"]["unschedulable"] is False
    assert desired() == 2
    pods = cluster.store.objects["pods"].values()
    assert [p["spec"]["nodeName"] for p in pods if p["metadata"]["name"] != "web-0"] == [kept]
    baseline.act(T0 + 3 * MINUTE)  # --scale-down-delay-after-failure: 3 minutes of rest
    assert cluster.store.objects["nodes"][("", kept)]["spec"]["unschedulable"] is False


# --- which nodes are underutilized: eligibility.go, isNodeAtOrBelowUtilizationThreshold ---


def test_the_utilization_threshold_tag_is_read_as_a_float_else_the_flag() -> None:
    # cloudprovider/aws/aws_manager_test.go, TestGetAsgOptions: "0.42" is read; a value
    # that is no float keeps --scale-down-utilization-threshold (0.5)
    assert utilization_threshold({UTILIZATION_TAG: "0.42"}) == 0.42
    assert utilization_threshold({UTILIZATION_TAG: "0"}) == 0.0
    assert utilization_threshold({UTILIZATION_TAG: "not-a-float"}) == 0.5
    assert utilization_threshold({}) == 0.5


@pytest.mark.parametrize(
    ("utilization", "threshold", "below"),
    [
        (0.25, 0.5, True),
        (0.5, 0.5, True),  # at the threshold: only `Utilization > threshold` keeps it
        (0.75, 0.5, False),
        (0.25, 0.0, False),  # the FAQ: threshold 0 keeps every non-empty node
        (0.0, 0.0, True),  # ... and lets empty ones go
    ],
)
def test_a_node_is_underutilized_at_or_below_its_threshold_an_empty_one_always(
    utilization: float, threshold: float, below: bool
) -> None:
    assert underutilized(utilization, threshold) is below


def jobs_on_two_of_three_nodes(tags: dict[str, str]) -> tuple[SimulatedCluster, ReactiveBaseline]:
    """Three nodes of 4 cores unneeded for 11 minutes: a 1-core job on each of two, the
    third empty (each job would fit beside the other)."""
    cluster, baseline = a_group_of(3, tags)
    names = sorted(n["metadata"]["name"] for n in cluster.store.objects["nodes"].values())
    for index, name in enumerate(names[:2]):
        cluster.store.put("pods", pod(f"job-{index}", name, labels={"app": "jobs"}))
    baseline.unneeded = dict.fromkeys(names, T0 - 11 * MINUTE)
    return cluster, baseline


def jobs_cordoned(cluster: SimulatedCluster) -> list[str]:
    """The jobs whose node is cordoned: to be evicted."""
    nodes = cluster.store.objects["nodes"]
    return [
        p["metadata"]["name"]
        for p in cluster.store.objects["pods"].values()
        if nodes[("", p["spec"]["nodeName"])]["spec"].get("unschedulable")
    ]


@pytest.mark.usefixtures("aws")
def test_with_its_threshold_tag_at_0_a_group_loses_only_its_empty_nodes() -> None:
    # the FAQ ("How can I prevent Cluster Autoscaler from scaling down non-empty nodes?"):
    # "set the utilization threshold to 0"; per group, the scaledownutilizationthreshold
    # tag (cloudprovider/aws/README.md)
    # Given two nodes each running a job that would fit beside the other, and an empty one,
    # in a group tagged 0, when scans run, then the empty node goes and no job is evicted
    cluster, baseline = jobs_on_two_of_three_nodes({UTILIZATION_TAG: "0"})
    baseline.act(T0)
    baseline.act(T0 + timedelta(seconds=10))
    assert desired() == 2
    assert jobs_cordoned(cluster) == []
    assert {p["metadata"]["name"] for p in cluster.store.objects["pods"].values()} == {
        "job-0",
        "job-1",
    }


@pytest.mark.usefixtures("aws")
def test_without_the_tag_a_job_is_evicted_to_pack_its_node_away() -> None:
    # Given the same nodes in a group with no tag (the flag's 0.5), when scans run, then
    # after the empty node a job's node (a quarter used) is drained: its job evicted
    cluster, baseline = jobs_on_two_of_three_nodes({})
    baseline.act(T0)
    baseline.act(T0 + timedelta(seconds=10))
    assert desired() == 1
    assert len(cluster.store.objects["pods"]) == 1


# --- can the pods move? simulator: the scheduler's filters, not CPU and memory alone -----

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}


def places(*nodes: tuple[dict[str, Any], list[dict[str, Any]]]) -> dict[str, Place]:
    return {n["metadata"]["name"]: Place.of(n, pods) for n, pods in nodes}


def gpu_pod(name: str) -> dict[str, Any]:
    found = pod(name, "gpu-a", spec={"tolerations": [GPU_TAINT | {"operator": "Equal"}]})
    found["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    return found


@pytest.mark.parametrize(
    ("moving", "destination", "fits"),
    [
        # plenty of CPU and memory on the other node, but ...
        (pod("web", "a"), node("b"), True),
        (pod("web", "a"), node("b", pods="1"), False),  # no pod slot left (b runs one)
        (gpu_pod("train"), node("b"), False),  # no GPU there
        (gpu_pod("train"), node("b", taints=[GPU_TAINT]) | {}, False),  # a taint, no GPU
        (pod("web", "a", spec={"nodeSelector": {"team": "blue"}}), node("b"), False),
        (
            pod("web", "a", spec={"nodeSelector": {"team": "blue"}}),
            node("b", labels={"team": "blue"}),
            True,
        ),
        (pod("web", "a"), node("b", taints=[GPU_TAINT]), False),  # a taint it cannot tolerate
        (
            pod(
                "web",
                "a",
                spec={
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {"key": "zone", "operator": "In", "values": ["1a"]}
                                        ]
                                    }
                                ]
                            }
                        }
                    }
                },
            ),
            node("b", labels={"zone": "1b"}),
            False,
        ),
    ],
)
def test_a_pod_moves_only_to_a_node_every_filter_passes(
    moving: dict[str, Any], destination: dict[str, Any], fits: bool
) -> None:
    # simulator/cluster.go (RemovalSimulator, findPlaceFor): a pod can move to a node the
    # scheduler framework's filters pass (NodeResourcesFit, NodeAffinity, TaintToleration)
    already_there = [pod("other", "b", cpu="100m", memory="100Mi")]
    rooms = places((node("a"), [moving]), (destination, already_there))
    assert (moves_elsewhere([moving], "a", rooms) is not None) is fits


def test_a_gpu_pod_moves_to_a_tainted_gpu_node_with_a_gpu_free() -> None:
    gpu_node = node("gpu-b", taints=[GPU_TAINT])
    gpu_node["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    rooms = places((node("gpu-a"), [gpu_pod("train")]), (gpu_node, []))
    assert moves_elsewhere([gpu_pod("train")], "gpu-a", rooms) == {"gpu-b": [gpu_pod("train")]}
    rooms = places((node("gpu-a"), [gpu_pod("t1")]), (gpu_node, [gpu_pod("t2")]))
    assert moves_elsewhere([gpu_pod("t1")], "gpu-a", rooms) is None  # its GPU is taken


def spread_pod(name: str, on: str) -> dict[str, Any]:
    own = {"labelSelector": {"matchLabels": {"app": "zk"}}, "topologyKey": "kubernetes.io/hostname"}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own]}}
    found = pod(name, on, cpu="100m", memory="100Mi", spec={"affinity": anti})
    found["metadata"]["labels"] = {"app": "zk"}
    return found


def test_a_replica_spread_one_a_node_moves_only_to_a_node_without_one() -> None:
    # InterPodAffinity: a required anti-affinity on the node keeps it off b, which runs one
    rooms = places((node("a"), [spread_pod("zk-a", "a")]), (node("b"), [spread_pod("zk-b", "b")]))
    assert (moves_elsewhere([spread_pod("zk-a", "a")], "a", rooms) is not None) is False
    rooms = places((node("a"), [spread_pod("zk-a", "a")]), (node("b"), []), (node("c"), []))
    assert (moves_elsewhere([spread_pod("zk-a", "a")], "a", rooms) is not None) is True
    # two moving at once take a node each: b and c, never both on b
    both = [spread_pod("zk-1", "a"), spread_pod("zk-2", "a")]
    assert (
        moves_elsewhere(both, "a", places((node("a"), both), (node("b"), []))) is not None
    ) is False
    assert (moves_elsewhere(both, "a", rooms) is not None) is True


# --- Cluster Autoscaler 1.37's rules, each on a hand-made case ---------------------------


def nodes_of(cluster: SimulatedCluster) -> list[str]:
    return sorted(n["metadata"]["name"] for n in cluster.store.objects["nodes"].values())


@pytest.mark.usefixtures("aws")
def test_a_budget_with_no_disruption_left_makes_its_node_unremovable_at_planning() -> None:
    # simulator/drainability/rules/pdb/rule.go, Drainable: a pod whose budget allows fewer
    # than one disruption blocks its node's removal in the planner, before any eviction
    # Given a node whose pod a maxUnavailable 0 budget covers, when the planner runs, then
    # the node is not unneeded and is never cordoned
    cluster, baseline = a_group_of(2)
    kept, _ = nodes_of(cluster)
    cluster.store.put("pods", pod("db-0", kept, labels={"app": "db"}))
    cluster.store.put("poddisruptionbudgets", pdb("db", {"app": "db"}, maxUnavailable=0))
    baseline.act(T0)
    assert kept not in baseline.unneeded
    baseline.act(T0 + 11 * MINUTE)
    assert not cluster.store.objects["nodes"][("", kept)]["spec"].get("unschedulable")


@pytest.mark.usefixtures("aws")
def test_the_planner_spends_a_budget_over_the_nodes_it_finds_removable() -> None:
    # core/scaledown/planner/planner.go, categorizeNodes: RemainingPdbTracker.RemovePods
    # after each removable node (pdb/basic.go): a budget allowing one disruption lets one
    # of two nodes with one of its pods each be unneeded, not both
    cluster, baseline = a_group_of(3)
    first, second, _ = nodes_of(cluster)
    for index, name in enumerate((first, second)):
        cluster.store.put("pods", pod(f"db-{index}", name, labels={"app": "db"}))
    cluster.store.put("poddisruptionbudgets", pdb("db", {"app": "db"}, maxUnavailable=1))
    baseline.act(T0)
    assert len({first, second} & set(baseline.unneeded)) == 1


@pytest.mark.usefixtures("aws")
def test_the_planner_keeps_each_removable_nodes_moves_for_the_next() -> None:
    # simulator/cluster.go, SimulateNodeRemoval: planner.go builds the removal simulator
    # with persistSuccessfulSimulations true, so a removable node's pods stay where they
    # were placed for the next candidate, and move with it if it goes too
    # Given a and b each a quarter used (1.25 cores) and c needed (2.5 cores: 1.5 free),
    # when the planner runs, then a's pod goes to b, and b, holding both, cannot go: only
    # one of the two is unneeded (without the moves kept, both were: their pods to c's 1.5)
    cluster, baseline = a_group_of(3)
    first, second, third = nodes_of(cluster)
    for name, cpu in ((first, "1250m"), (second, "1250m"), (third, "2500m")):
        cluster.store.put("pods", pod(f"web-{name}", name, cpu=cpu, labels={"app": "web"}))
    baseline.act(T0)
    assert set(baseline.unneeded) == {first}


@pytest.mark.usefixtures("aws")
def test_empty_nodes_then_the_last_loops_unneeded_ones_are_simulated_first() -> None:
    # scaledowncandidates' sorting processor (builder: EmptySorting, then
    # PreviousCandidates): with each removal's moves kept, the first simulated goes
    # Given a quarter-used node first by name and an empty one, when the planner runs, then
    # the empty one goes and the other, its pod with nowhere left to go, stays
    cluster, baseline = a_group_of(2)
    busy, empty = nodes_of(cluster)
    cluster.store.put("pods", pod("web-0", busy, cpu="1"))
    baseline.act(T0)
    assert set(baseline.unneeded) == {empty}
    # Given both a quarter used, the second unneeded at the last loop, then it goes first
    cluster.store.put("pods", pod("web-1", empty, cpu="1"))
    baseline.unneeded = {empty: T0}
    baseline.act(T0 + timedelta(seconds=10))
    assert set(baseline.unneeded) == {empty}


@pytest.mark.usefixtures("aws")
def test_a_node_found_unremovable_is_looked_at_again_only_after_5_minutes() -> None:
    # eligibility.go, IsRecent: a node whose pods had no place (NoPlaceToMovePods) is
    # skipped for --unremovable-node-recheck-timeout (5m; planner.go, AddTimeout)
    # Given a quarter-used node whose pod fits nowhere, when room appears on another node
    # 10 s later, then it is unneeded only once 5 minutes have passed since it was found
    cluster, baseline = a_group_of(3)
    small, roomy, full = nodes_of(cluster)
    cluster.store.put("pods", pod("web-0", small, cpu="1"))
    for name in (roomy, full):
        cluster.store.put("pods", pod(f"big-{name}", name, cpu="3500m"))
    baseline.act(T0)
    assert small not in baseline.unneeded
    cluster.store.delete("pods", ("default", f"big-{roomy}"))
    cluster.store.put("pods", pod("half", roomy, cpu="2500m"))  # 1.5 cores free, needed
    baseline.act(T0 + timedelta(seconds=10))
    baseline.act(T0 + 5 * MINUTE - timedelta(seconds=10))
    assert small not in baseline.unneeded
    baseline.act(T0 + 5 * MINUTE)
    assert small in baseline.unneeded


@pytest.mark.usefixtures("aws")
def test_a_node_goes_once_its_unneeded_time_is_strictly_past() -> None:
    # core/scaledown/unneeded/nodes.go, unremovableReason: NotUnneededLongEnough unless
    # since + the unneeded time is before now: at exactly 10 minutes it stays a loop more
    cluster, baseline = a_group_of(2)
    baseline.unneeded = dict.fromkeys(nodes_of(cluster), T0 - 10 * MINUTE)
    baseline.act(T0)
    assert desired() == 2
    baseline.act(T0 + timedelta(seconds=10))
    assert desired() == 0


@pytest.mark.usefixtures("aws")
def test_a_group_at_its_minimum_has_no_candidate_yet_its_nodes_take_pods() -> None:
    # PreFilteringScaleDownNodeProcessor: GetScaleDownCandidates drops the nodes of a group
    # whose size is at or below its minimum; GetPodDestinationCandidates keeps every node
    # Given two quarter-used nodes of a group whose minimum is 2, then neither is unneeded
    cluster, baseline = a_group_of(2)
    first, second = nodes_of(cluster)
    for name in (first, second):
        cluster.store.put("pods", pod(f"web-{name}", name, cpu="1"))
    client("autoscaling").update_auto_scaling_group(AutoScalingGroupName="web", MinSize=2)
    baseline.act(T0 + CLOUD_REFRESH)  # read at the Auto Scaling cache's refresh
    assert baseline.groups["web"].min == 2
    assert baseline.unneeded == {}
    # and with a minimum of 1, one of them is: its pod to the other
    client("autoscaling").update_auto_scaling_group(AutoScalingGroupName="web", MinSize=1)
    baseline.act(T0 + 2 * CLOUD_REFRESH)
    assert len(baseline.unneeded) == 1


@pytest.mark.usefixtures("aws")
def test_unneeded_nodes_get_the_deletion_candidate_soft_taint_and_lose_it_when_needed() -> None:
    # core/scaledown/actuation/softtaint.go, UpdateSoftDeletionTaints (called from
    # static_autoscaler.go, scaleDown, in every loop): unneeded nodes get the
    # DeletionCandidateOfClusterAutoscaler PreferNoSchedule taint, others lose it
    cluster, baseline = a_group_of(2)
    busy, idle = nodes_of(cluster)
    cluster.store.put("pods", pod("web-0", busy, cpu="3"))  # 75 %: needed
    baseline.act(T0)
    taints = cluster.store.objects["nodes"][("", idle)]["spec"]["taints"]
    assert [(t["key"], t["effect"]) for t in taints] == [
        ("DeletionCandidateOfClusterAutoscaler", "PreferNoSchedule")
    ]
    assert not cluster.store.objects["nodes"][("", busy)]["spec"].get("taints")
    cluster.store.put("pods", pod("web-1", idle, cpu="3"))  # now needed too
    baseline.act(T0 + timedelta(seconds=10))
    assert cluster.store.objects["nodes"][("", idle)]["spec"]["taints"] == []


@pytest.mark.usefixtures("aws")
def test_at_most_10_nodes_are_soft_tainted_a_loop() -> None:
    # --max-bulk-soft-taint-count 10 (config/flags/flags.go; softtaint.go, budgetTracker)
    cluster, baseline = a_group_of(12)
    baseline.act(T0)
    tainted = [n for n in cluster.store.objects["nodes"].values() if n["spec"].get("taints")]
    assert len(tainted) == 10
    baseline.act(T0 + timedelta(seconds=10))
    assert all(n["spec"].get("taints") for n in cluster.store.objects["nodes"].values())


@pytest.mark.usefixtures("aws")
def test_a_node_exactly_at_the_threshold_is_unneeded() -> None:
    # eligibility.go, isNodeAtOrBelowUtilizationThreshold: 2 of 4 cores is 0.5, not above
    cluster, baseline = a_group_of(2)
    half, other = nodes_of(cluster)
    cluster.store.put("pods", pod("web-0", half, cpu="2", memory="1Gi"))
    cluster.store.put("pods", pod("web-1", other, cpu="1", memory="1Gi"))  # its room, kept
    baseline.act(T0)
    assert half in baseline.unneeded


def system_pod(created: datetime) -> dict[str, Any]:
    found = pod("metrics-agent", "a", namespace="kube-system")
    found["metadata"]["creationTimestamp"] = created.isoformat().replace("+00:00", "Z")
    return found


@pytest.mark.parametrize(
    ("age", "blocks"), [(59 * MINUTE, True), (60 * MINUTE, True), (61 * MINUTE, False)]
)
def test_a_kube_system_pod_without_a_budget_blocks_for_an_hour(
    age: timedelta, blocks: bool
) -> None:
    # simulator/drainability/rules/system/rule.go, isBspPassedDisruptionTimeout: a kube-system
    # pod no budget selects blocks until --blocking-system-pod-distruption-timeout (1h) after
    # its creation, then is drained like any other
    found = system_pod(T0 - age)
    assert blocks_drain(found, Budgets([]), DrainFlags(), T0) is blocks
    covered = Budgets([("kube-system", {}, [1])])  # a budget selecting it, one disruption
    assert blocks_drain(found, covered, DrainFlags(), T0) is False


def test_the_skip_flags_turned_off_let_system_and_local_storage_pods_move() -> None:
    # --skip-nodes-with-system-pods and --skip-nodes-with-local-storage (true by default;
    # the scenario's SKIP_NODES_WITH_*): a kube-system pod no budget selects, and a pod with
    # an emptyDir volume, block their node only while the flag is on
    scratch = pod("render-0", "a", spec={"volumes": [{"name": "tmp", "emptyDir": {}}]})
    system = system_pod(T0 - MINUTE)
    for found in (scratch, system):  # each a ReplicaSet's (a pod no controller owns blocks)
        found["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "controller": True}]
    off = DrainFlags.of(
        {"SKIP_NODES_WITH_LOCAL_STORAGE": "false", "SKIP_NODES_WITH_SYSTEM_PODS": "false"}
    )
    for found in (scratch, system):
        assert blocks_drain(found, Budgets([]), DrainFlags(), T0) is True
        assert blocks_drain(found, Budgets([]), off, T0) is False


def test_a_kube_system_pod_past_its_hour_is_drainable_whatever_the_later_rules_say() -> None:
    # rules/rules.go, Rules.Drainable: the first rule with an outcome decides; the system
    # rule comes before notsafetoevict and localstorage, and past the timeout answers
    # NewDrainableStatus, so neither is asked of such a pod (rules/system/rule.go, Drainable)
    for young in (True, False):
        found = system_pod(T0 - (59 * MINUTE if young else 61 * MINUTE))
        found["metadata"]["annotations"] = {
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"
        }
        found["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
        assert blocks_drain(found, Budgets([]), DrainFlags(), T0) is young
    # with a budget selecting it the system rule has no outcome: the later rules decide
    covered = Budgets([("kube-system", {}, [1])])
    assert blocks_drain(found, covered, DrainFlags(), T0) is True


def test_the_scenarios_system_pod_timeout_reaches_the_baseline_as_the_functions_read_it() -> None:
    flags = DrainFlags.of({"BLOCKING_SYSTEM_POD_DISRUPTION_TIMEOUT_SECONDS": "600"})
    assert DrainFlags.of({}).system_pod_timeout == 60 * MINUTE  # the flag's default
    found = system_pod(T0 - 11 * MINUTE)
    assert blocks_drain(found, Budgets([]), flags, T0) is False
    assert blocks_drain(found, Budgets([]), DrainFlags(), T0) is True


def test_a_kube_system_pod_with_no_creation_time_blocks() -> None:
    # isBspPassedDisruptionTimeout: a zero CreationTimestamp never passes the timeout
    found = pod("metrics-agent", "a", namespace="kube-system")
    found["metadata"].pop("creationTimestamp", None)
    assert blocks_drain(found, Budgets([]), DrainFlags(), T0 + 1000 * MINUTE) is True


@pytest.mark.usefixtures("aws")
def test_a_loop_that_scales_up_still_tracks_unneeded_nodes() -> None:
    # core/static_autoscaler.go, RunOnce: scaleDown (the planner's UpdateClusterState) runs
    # after a successful scale-up too; only the deletions wait (isScaleDownInCooldown)
    cluster, baseline = a_group_of(2)
    busy, idle = nodes_of(cluster)
    cluster.store.put("pods", pod("big-0", busy, cpu="3"))
    cluster.store.put("pods", pod("big-1", None, cpu="3"))  # unschedulable: no node has 3
    baseline.act(T0)
    assert desired() == 3  # a scale-up ...
    assert baseline.unneeded == {idle: T0}  # ... and the idle node tracked since this loop


class FailedLaunches:
    """moto's Auto Scaling, with a failed launch listed from `failed_at` on (moto lists
    none): what the AWS provider reads in isNodeGroupAvailable."""

    def __init__(self, failed_at: datetime) -> None:
        self.moto, self.failed_at = client("autoscaling"), failed_at
        self.now = T0

    def describe_scaling_activities(self, **_: Any) -> dict[str, Any]:
        failed = {"StartTime": self.failed_at, "StatusCode": "Failed"}
        return {"Activities": [failed] if self.now >= self.failed_at else []}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.moto, name)


@pytest.mark.usefixtures("aws")
def test_a_failed_launch_is_seen_at_the_auto_scaling_caches_next_refresh(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # cloudprovider/aws/aws_manager.go, Refresh: the ASG cache (where
    # createPlaceholdersForDesiredNonStartedInstances reads failed activities) is
    # regenerated at most every refreshInterval, 1 minute
    # Given a scale-up at T0 whose launch fails at T0+10s, when scans run every 10 s, then
    # the group is backed off at the refresh a minute after the last, not at the next scan
    cluster, baseline = a_group_of(1)
    busy = nodes_of(cluster)[0]
    cluster.store.put("pods", pod("big-0", busy, cpu="3"))
    cluster.store.put("pods", pod("big-1", None, cpu="3"))
    faulty = FailedLaunches(T0 + timedelta(seconds=10))
    baseline.autoscaling = faulty
    for seconds in range(0, 60, 10):
        faulty.now = T0 + timedelta(seconds=seconds)
        baseline.act(faulty.now)
        group = moto_groups(REGION)["web"]
        group.instance_states = group.instance_states[:1]  # the new one never launched
        assert not baseline.backoff.active("web", faulty.now), seconds
    faulty.now = T0 + MINUTE
    baseline.act(faulty.now)
    assert baseline.backoff.active("web", faulty.now)
    assert said(capsys) == [
        "Scale-up: setting group web size to 2 (was 1)",
        "Failed to launch, backing off: setting group web size to 1 (was 2)",
    ]


# --- utilization: simulator/utilization/info.go, Calculate ------------------------------


def daemonset_pod(name: str) -> dict[str, Any]:
    return pod(name, "a", cpu="1", memory="1Gi", owner="DaemonSet")


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (Flags(), 2 / 4),  # by default a DaemonSet's requests count like any pod's
        # --ignore-daemonsets-utilization: out of the requests and of the allocatable
        (Flags(ignore_daemonsets_utilization=True), 1 / 3),
    ],
)
def test_utilization_counts_daemonset_pods_unless_told_to_skip_them(
    flags: Flags, expected: float
) -> None:
    four_cores = node("a", cpu="4", memory="64Gi")
    pods = [daemonset_pod("agent"), pod("web", "a", cpu="1", memory="1Gi")]
    assert utilization(four_cores, pods, T0, flags) == pytest.approx(expected)


def test_a_gpu_nodes_utilization_is_its_gpus_alone() -> None:
    # Calculate: "Skips cpu and memory utilization calculation for node with GPU"
    gpu_node = node("gpu-a", cpu="8", memory="64Gi")
    gpu_node["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    cpu_heavy = pod("prep", "gpu-a", cpu="7", memory="1Gi")  # 7/8 of its CPU
    assert utilization(gpu_node, [cpu_heavy], T0) == 0.0
    assert utilization(gpu_node, [cpu_heavy, gpu_pod("train")], T0) == 0.25


@pytest.mark.parametrize(
    ("kind", "blocks"),
    [("ReplicaSet", False), ("StatefulSet", False), ("Job", False), ("SparkApplication", True)],
)
def test_a_pod_an_unknown_controller_owns_blocks_its_node(kind: str, blocks: bool) -> None:
    # rules/replicated/rule.go: with --skip-nodes-with-custom-controller-pods (true by
    # default) only replicatedKind's controllers make a pod replicated
    found = pod("driver", "a")
    found["metadata"]["ownerReferences"] = [
        {"apiVersion": "x/v1", "kind": kind, "name": "app", "uid": "u-1", "controller": True}
    ]
    assert blocks_drain(found, Budgets([]), DrainFlags(), T0) is blocks


def test_a_node_with_a_startup_taint_is_upcoming_for_its_first_15_minutes_only() -> None:
    # Cluster Autoscaler: unready, never a template, and among its group's upcoming nodes
    # while created less than MaxNodeStartupTime ago (the FAQ on startup taints)
    created = datetime(2026, 11, 30, 10, tzinfo=UTC)
    node = {
        "metadata": {"name": "n", "creationTimestamp": "2026-11-30T10:00:00Z"},
        "spec": {"taints": [{"key": "node.cilium.io/agent-not-ready", "effect": "NoExecute"}]},
    }
    told = Flags(startup_taints=("node.cilium.io/agent-not-ready",))
    assert told.starting(node) and told.starting(node, created + timedelta(minutes=14))
    assert not told.starting(node, created + timedelta(minutes=15))
    assert not Flags().starting(node)  # a key it was not told of is the node's own taint
    prefixed = {
        **node,
        "spec": {"taints": [{"key": "startup-taint.cluster-autoscaler.kubernetes.io/x"}]},
    }
    assert Flags().starting(prefixed)

"""The figures a sandbox run is judged by, on hand-made timelines whose answer is known."""

from __future__ import annotations

from typing import Any

from nodescaler_sandbox.figures import (
    NEVER_SCHEDULED,
    PodRecord,
    ScaleUp,
    budget_short_minutes,
    demand_to_scale_request,
    disruption,
    dominant_share,
    fit_no_group,
    idle_node_hours,
    longest,
    metric_to_scale_request,
    node_hours,
    percentile,
    pod_reactions,
    pod_ready,
    pod_waits,
    queue_reactions,
    reaction_seconds,
    undone_raises,
    unschedulable_pod_minutes,
)

GROUPS = ["cpu-ng", "gpu-ng"]
CPU = frozenset({"cpu-ng"})


def test_another_groups_scale_up_does_not_answer_a_pod_it_cannot_take() -> None:
    gpu_pod = PodRecord(
        "trainer", 0, unschedulable=0, bound=32, group="gpu-ng", takers=frozenset({"gpu-ng"})
    )
    cpu_pod = PodRecord(
        "web", 0, unschedulable=0, bound=3, group="cpu-ng", takers=frozenset({"cpu-ng"})
    )
    scale_ups = [ScaleUp(0, "cpu-ng"), ScaleUp(29, "gpu-ng")]
    assert demand_to_scale_request([gpu_pod, cpu_pod], scale_ups, GROUPS, end=60) == {
        "cpu-ng": 0,
        "gpu-ng": 29,  # the pod waited 29 minutes for its group, whatever cpu-ng did
    }


def test_a_scale_up_in_the_pods_own_mid_minute_step_answers_it_at_once() -> None:
    # Given a pod turning unschedulable at 10:50 and its group scaled up in that step (the
    # runner's rows round a step's minute: 10.833), the pod bound 3 minutes later
    pod = PodRecord("web", 65 / 6, unschedulable=65 / 6, bound=83 / 6, takers=frozenset({"cpu-ng"}))
    # When the demand-to-scale-request time is figured
    longest = demand_to_scale_request([pod], [ScaleUp(10.833, "cpu-ng")], GROUPS, end=60)
    # Then the pod was answered in its step, not when it bound
    assert longest["cpu-ng"] == 0


def test_a_pod_that_finds_room_without_a_scale_up_is_answered_when_it_binds() -> None:
    pod = PodRecord("web", 5, unschedulable=5, bound=12, takers=frozenset({"cpu-ng"}))
    assert demand_to_scale_request([pod], [], GROUPS, end=60)["cpu-ng"] == 7


def test_a_pod_bound_to_a_node_launched_before_it_asked_waited_for_no_request() -> None:
    # Given a queue's worker made at 01:00 (KEDA's poll) on a node launched at 00:50 for
    # the queue, bound at 03:50: the node was asked for before the pod needed one
    pod = PodRecord("w", 1, unschedulable=1, bound=3.833, node_launched=0.833, takers=CPU)
    assert demand_to_scale_request([pod], [ScaleUp(0.833, "cpu-ng")], GROUPS, end=60) == {
        "cpu-ng": 0,
        "gpu-ng": 0,
    }


def test_a_pod_never_answered_waits_to_the_end_of_the_run() -> None:
    pod = PodRecord("web", 0, unschedulable=10, takers=frozenset({"cpu-ng", "gpu-ng"}))
    earlier = [ScaleUp(5, "cpu-ng")]  # before the pod needed a node: no answer
    assert demand_to_scale_request([pod], earlier, GROUPS, end=60) == {"cpu-ng": 50, "gpu-ng": 50}


def test_only_pods_that_waited_count_and_each_under_the_group_it_bound_to() -> None:
    pods = [
        PodRecord("a", 0, unschedulable=0, bound=2, group="cpu-ng"),
        PodRecord("b", 0, unschedulable=0, bound=4, group="cpu-ng"),
        PodRecord("c", 10, unschedulable=10, bound=40, group="gpu-ng"),
        PodRecord("d", 50, unschedulable=50),  # never bound: waits to the end
        PodRecord("e", 0, unschedulable=0, gone=6),  # removed while it waited
        PodRecord("quick", 0, bound=0, group="cpu-ng"),  # found room at once: no wait
    ]
    waits = pod_waits(pods, end=60)
    assert waits["overall"] == {"pods": 5, "p50": 6.0, "p99": 30.0, "max": 30.0}
    assert waits["cpu-ng"] == {"pods": 2, "p50": 2.0, "p99": 4.0, "max": 4.0}
    assert waits["gpu-ng"]["max"] == 30.0
    assert waits[NEVER_SCHEDULED] == {"pods": 2, "p50": 6.0, "p99": 10.0, "max": 10.0}


def test_no_pod_waited_reads_as_no_figure_not_zero() -> None:
    assert pod_waits([PodRecord("quick", 0, bound=0)], end=10)["overall"] == {
        "pods": 0,
        "p50": None,
        "p99": None,
        "max": None,
    }


def test_percentiles_are_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 0.5) == 50
    assert percentile(values, 0.99) == 99
    assert percentile([7], 0.99) == 7


def test_pods_no_group_could_take_are_named() -> None:
    pods = [
        PodRecord("huge", 0, unschedulable=0),
        PodRecord("fits", 0, unschedulable=0, takers=frozenset({"cpu-ng"})),
        PodRecord("never-waited", 0, bound=0),
    ]
    assert fit_no_group(pods) == ["huge"]


def test_ready_times_count_pods_that_waited_and_turned_ready_by_the_group_they_bound_to() -> None:
    pods = [
        PodRecord("a", 0, unschedulable=0, bound=2, ready=3, group="cpu-ng"),
        PodRecord("b", 10, unschedulable=10, bound=12, ready=17, group="cpu-ng"),
        PodRecord("c", 0, unschedulable=0, bound=30, ready=31.5, group="gpu-ng"),
        PodRecord("d", 0, unschedulable=0, bound=5, group="gpu-ng"),  # never Ready: no figure
        PodRecord("quick", 0, bound=0, ready=9, group="cpu-ng"),  # never waited for a node
    ]
    ready = pod_ready(pods)
    assert ready["overall"] == {"pods": 3, "p50": 7.0, "p99": 31.5, "max": 31.5}
    assert ready["cpu-ng"] == {"pods": 2, "p50": 3.0, "p99": 7.0, "max": 7.0}
    assert ready["gpu-ng"] == {"pods": 1, "p50": 31.5, "p99": 31.5, "max": 31.5}
    assert set(ready) == {"overall", "cpu-ng", "gpu-ng"}


def minute(at: int, pending: int, groups: list[str] = GROUPS) -> list[dict[str, Any]]:
    """A minute's rows, one a group, each with the cluster's pending pods."""
    return [{"minute": at, "group": g, "pending_pods": pending} for g in groups]


def test_unschedulable_pod_minutes_count_each_minute_once_whatever_the_groups() -> None:
    rows = [*minute(0, 0), *minute(1, 3), *minute(2, 3), *minute(3, 1), *minute(4, 0)]
    assert unschedulable_pod_minutes(rows) == 7  # not 14: both groups' rows carry the 3
    assert unschedulable_pod_minutes(minute(0, 5, ["only-ng"])) == 5
    assert unschedulable_pod_minutes([]) == 0


def test_a_budget_is_short_only_after_it_was_first_met() -> None:
    looks = [
        (0, "web", 0, 2),  # its pods still starting: nothing disrupted them
        (1, "web", 3, 2),
        (3, "web", 1, 2),  # a disruption
        (3.5, "web", 1, 2),  # the same minute again: counted once
        (4, "web", 2, 2),
        (6, "web", 1, 2),
        (6, "db", 1, 1),
        (7, "db", 0, 1),
        (9, "jobs", 0, 1),  # never met: never short
    ]
    assert budget_short_minutes(looks) == [3, 6, 7]


def test_a_budget_asking_for_more_while_new_pods_start_is_not_short() -> None:
    # Given a budget of 80 % met by 10 pods, and its deployment scaled to 20
    looks = [
        (1, "web", 10, 8),
        (2, "web", 10, 16),  # the 10 new pods starting: none lost
        (3, "web", 14, 16),  # 4 of them Ready
        (4, "web", 13, 16),  # then one evicted: a disruption
        (5, "web", 14, 16),  # its replacement Ready: back to the most since it was met
        (6, "web", 16, 16),
    ]
    assert budget_short_minutes(looks) == [4]


def test_two_budgets_short_in_one_minute_count_one_minute() -> None:
    looks = [(0, "web", 2, 2), (0, "db", 1, 1), (5, "web", 1, 2), (5, "db", 0, 1)]
    assert budget_short_minutes(looks) == [5]
    assert (
        disruption(evictions_asked=0, evicted=0, nodes_removed=0, killed=0, budget_short=[5])[
            "disruption_budget_short_minutes"
        ]
        == 1
    )


def test_evictions_refused_by_a_budget_and_pods_killed_are_counted_apart() -> None:
    figures = disruption(
        evictions_asked=10, evicted=7, nodes_removed=3, killed=2, budget_short=[4, 5]
    )
    assert figures == {
        "evictions": 7,
        "evictions_refused_by_budget": 3,
        "nodes_removed": 3,
        "evictions_per_removed_node": 2.33,
        "pods_killed_with_their_instance": 2,
        "disruption_budget_short_minutes": 2,
    }


def test_with_no_node_removed_evictions_per_node_is_no_figure() -> None:
    figures = disruption(evictions_asked=2, evicted=2, nodes_removed=0, killed=0, budget_short=[])
    assert figures["evictions_per_removed_node"] is None


def test_a_metric_over_its_target_counts_until_its_group_scales_up() -> None:
    def row(minute: int, desired: int, asks: int | None, status: str = "ok") -> dict[str, object]:
        queue = {"recommendation": asks, "status": status, "value": 1.0, "target": "4/replica"}
        return {"minute": minute, "group": "cpu-ng", "desired": desired, "metrics": {"q": queue}}

    # the queue asks for 6 from minute 2; a backoff holds the group until minute 9
    rows = [row(m, 2, 2) for m in range(2)] + [row(m, 2, 6) for m in range(2, 9)]
    rows += [row(m, 6, 6) for m in range(9, 12)]
    scale_ups = [ScaleUp(9, "cpu-ng"), ScaleUp(1, "gpu-ng")]
    assert metric_to_scale_request(rows, scale_ups, GROUPS, end=12)["cpu-ng"] == 7
    # a forecast asking for more is not demand; still asking at the end counts to the end
    forecasting = [row(m, 2, 9, status="forecast") for m in range(5)]
    assert metric_to_scale_request(forecasting, [], GROUPS, end=12)["cpu-ng"] == 0
    assert metric_to_scale_request([row(3, 2, 6)], [], GROUPS, end=12)["cpu-ng"] == 9
    assert longest({"a": 1.0, "b": 4.0}, {"a": 3.0, "b": 0.0}) == {"a": 3.0, "b": 4.0}


def test_node_hours_bill_the_instances_a_lifecycle_hook_holds() -> None:
    # Given 2 nodes in service and 1 instance held in Terminating:Wait for an hour: EC2
    # bills an instance until it is terminated, and a held one is still running
    # (https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks-overview.html)
    rows = [{"minute": m, "in_service": 2, "held": 1} for m in range(60)]
    assert node_hours(rows) == 3.0


def minute_rows(n: int, **row: float) -> list[dict[str, Any]]:
    return [{"minute": m, "group": "ng", "pending_pods": 0, **row} for m in range(n)]


def test_a_node_half_requested_for_an_hour_is_half_a_node_hour_idle() -> None:
    # Given one node in service for 60 minutes, its pods asking half its CPU (and less
    # of its memory)
    used = dominant_share({"cpu": 2000, "memory": 2 * 2**30}, {"cpu": 4000, "memory": 8 * 2**30})
    rows = minute_rows(60, in_service=1, used_nodes=used)
    # Then half a node-hour was paid for and asked for by no pod
    assert idle_node_hours(rows) == 0.5


def test_the_resource_most_asked_for_says_how_full_a_node_is() -> None:
    # Given pods asking a quarter of a node's CPU and three quarters of its memory
    node = {"cpu": 4000, "memory": 8 * 2**30}
    assert dominant_share({"cpu": 1000, "memory": 6 * 2**30}, node) == 0.75
    # or its one GPU: the node holds no more GPU pods, it is full
    gpu = dominant_share({"cpu": 100, "nvidia.com/gpu": 1}, node | {"nvidia.com/gpu": 1})
    assert gpu == 1.0
    # and an empty node is empty
    assert dominant_share({}, node) == 0.0


def test_an_empty_node_and_a_warm_pool_are_idle_at_what_they_are_billed() -> None:
    # Given an empty node for an hour, and a warm pool billed at a twentieth of a node
    rows = minute_rows(60, in_service=1, used_nodes=0, warm_billed=0.05)
    # Then all of it is idle: the node, and the pool at its share
    assert idle_node_hours(rows) == 1.05


def test_a_full_node_is_not_idle() -> None:
    rows = minute_rows(120, in_service=2, used_nodes=2)
    assert idle_node_hours(rows) == 0.0


def test_a_world_of_ten_second_steps_counts_each_step_for_ten_seconds() -> None:
    # Given an hour of 10-second steps (360 rows): one node in service, half requested,
    # and 3 pods waiting for the first minute (6 steps), both groups' rows carrying them
    step = 10 / 60
    rows = [
        {"minute": round(s * step, 3), "group": g, "pending_pods": 3 if s < 6 else 0}
        | ({"in_service": 1, "used_nodes": 0.5} if g == GROUPS[0] else {"in_service": 0})
        for s in range(360)
        for g in GROUPS
    ]
    # Then an hour of a node, half of it idle, and 3 pod-minutes (not 18: a step is a sixth)
    assert node_hours(rows, step) == 1.0
    assert idle_node_hours(rows, step) == 0.5
    assert unschedulable_pod_minutes(rows, step) == 3


def _queue_row(minute: float, desired: int, visible: int) -> dict[str, Any]:
    return {"minute": minute, "group": "gpu-ng", "desired": desired, "queues": {"jobs": visible}}


def test_reaction_to_pending_pods_runs_to_the_scale_up_of_a_group_that_takes_them() -> None:
    # Given pods turning unschedulable at 0:10 and 0:20, answered by gpu-ng's scale-up at
    # 0:30, while cpu-ng's scale-up at 0:20 answers none of them
    pods = [
        PodRecord(f"p{i}", 1 / 6, unschedulable=at, takers=frozenset({"gpu-ng"}))
        for i, at in enumerate((1 / 6, 2 / 6))
    ]
    scale_ups = [ScaleUp(2 / 6, "cpu-ng"), ScaleUp(0.5, "gpu-ng")]
    # When the reactions are figured
    figures = reaction_seconds(pod_reactions(pods, scale_ups, end=60), [])
    # Then each pod waited for gpu-ng's answer: 20 s and 10 s
    assert figures["gpu-ng"] == {"count": 2, "p50": 10, "p99": 20, "max": 20}
    # and a scale-up in the pod's own step (its minute rounded, as the runner's rows are)
    # answers it at once
    same_step = reaction_seconds(pod_reactions(pods[1:], [ScaleUp(0.333, "gpu-ng")], 60), [])
    assert same_step["gpu-ng"]["max"] == 0
    assert figures["pending_pods"]["max"] == 20
    assert figures["queue"]["count"] == 0 and "cpu-ng" not in figures


def test_a_pod_that_finds_room_before_any_scale_up_asked_nothing_new() -> None:
    # Given a pod waiting for a node already booting, bound at 3:00, and a later scale-up
    pod = PodRecord("web", 0, unschedulable=0, bound=3, takers=frozenset({"cpu-ng"}))
    # When the reactions are figured, then it is not a reaction (nor the later scale-up's)
    assert pod_reactions([pod], [ScaleUp(40, "cpu-ng")], end=60) == []


def test_a_pod_bound_to_a_node_on_its_way_before_it_waited_asked_nothing_new() -> None:
    # Given a pod unschedulable at 1:50 that bound at 3:00 to a node launched at 1:00, and a
    # scale-up at 2:40 for other demand (a buffer's room) before it bound
    on_its_way = PodRecord(
        "batch-18", 11 / 6, unschedulable=11 / 6, bound=3, node_launched=1, takers=CPU
    )
    # and one that bound to the node that scale-up launched
    answered = PodRecord(
        "batch-30", 2.5, unschedulable=2.5, bound=4, node_launched=8 / 3, takers=CPU
    )
    # When the reactions are figured
    reactions = pod_reactions([on_its_way, answered], [ScaleUp(2.667, "cpu-ng")], end=60)
    # Then the first is not counted (its node was already coming), the second waited 10 s
    assert reaction_seconds(reactions, [])["pending_pods"] == {
        "count": 1,
        "p50": 10,
        "p99": 10,
        "max": 10,
    }


class _Early:
    """A side's latencies whose demand arrives 5 s before the step that saw it, and whose
    answers take effect in their own step."""

    def arrival(self, seen: int, name: str) -> int:
        return seen - 5

    def reaction(
        self, since: float, name: str, answer: ScaleUp, *, gpu: bool, pod: bool = False
    ) -> float:
        return (answer.minute - since) * 60 + 5


_EARLY = _Early()


def test_a_pod_bound_to_a_node_there_from_the_start_asked_nothing_new() -> None:
    # Given a pod unschedulable in the first step (its arrival charged seconds before the
    # start) that bound at 3:00 to the group's first node, launched at 0:00 as the world
    # began, and a scale-up at 0:10 for a buffer's placeholders
    pod = PodRecord("api-0", 0, unschedulable=0, bound=3, node_launched=0, takers=CPU)
    # When the reactions are figured, then it is not a reaction to that scale-up
    assert pod_reactions([pod], [ScaleUp(1 / 6, "cpu-ng")], end=60, charge=_EARLY) == []
    # while a pod bound to the node a scale-up of its own step launched is one
    assert pod_reactions([pod], [ScaleUp(0, "cpu-ng")], end=60, charge=_EARLY) == [(CPU, 5 / 60)]


def test_reaction_to_a_queue_runs_from_passing_its_target_to_the_next_scale_up() -> None:
    # Given a queue of 4 messages a node, past 1 node at 0:10 (8 messages), answered by a
    # scale-up at 0:40; then past 2 nodes beyond tolerance at 2:00, answered at once
    rows = [
        _queue_row(0, 1, 4),
        _queue_row(1 / 6, 1, 8),
        _queue_row(2 / 6, 1, 12),
        _queue_row(4 / 6, 3, 12),
        _queue_row(1, 3, 13),  # 3.25 nodes' worth: within the 10 % tolerance, no ask
        _queue_row(2, 5, 40),
    ]
    scale_ups = [ScaleUp(4 / 6, "gpu-ng"), ScaleUp(2, "gpu-ng")]
    # When the reactions are figured
    reactions = queue_reactions(rows, scale_ups, {"gpu-ng": [("jobs", 4)]}, {"gpu-ng": 1}, 60)
    figures = reaction_seconds([], reactions)
    # Then the first backlog waited 30 s, the second none
    assert figures["queue"] == {"count": 2, "p50": 0, "p99": 30, "max": 30}
    assert figures["gpu-ng"]["max"] == 30


def test_a_queue_still_unanswered_at_the_end_reacts_at_the_end() -> None:
    rows = [_queue_row(0, 0, 0), _queue_row(1, 0, 5), _queue_row(3, 0, 9)]
    reactions = queue_reactions(rows, [], {"gpu-ng": [("jobs", 4)]}, {"gpu-ng": 0}, end=3)
    assert reaction_seconds([], reactions)["queue"]["max"] == 120


def test_a_queue_asking_beyond_its_groups_maximum_asks_nothing_there() -> None:
    # Given a queue asking for 10 nodes of a group of at most 2, raised to 2 at 0:20
    rows = [_queue_row(0, 1, 4), _queue_row(1 / 6, 1, 40), _queue_row(2 / 6, 2, 40)]
    rows += [_queue_row(m, 2, 40) for m in range(1, 31)]
    scale_ups = [ScaleUp(2 / 6, "gpu-ng")]
    # When the reactions are figured, the group's maximum known
    reactions = queue_reactions(
        rows, scale_ups, {"gpu-ng": [("jobs", 4)]}, {"gpu-ng": 1}, 30, most={"gpu-ng": 2}
    )
    # Then the one ask was answered in 10 s; at its maximum the group is asked nothing
    # more, so no reaction runs to the end
    assert reaction_seconds([], reactions)["queue"] == {"count": 1, "p50": 10, "p99": 10, "max": 10}


def test_a_raise_undone_within_its_step_is_a_scale_request_the_rows_never_show() -> None:
    # Given spot-ng asked for 1 node by the fast path at 8 min 42 s and set back to 0 in
    # the same 10-s step (its launch failed), and on-demand-ng raised 2 → 3 in that step
    rows = [
        {"minute": 8.667, "group": "spot-ng", "desired": 0},
        {"minute": 8.667, "group": "on-demand-ng", "desired": 2},
        {"minute": 8.833, "group": "spot-ng", "desired": 0},
        {"minute": 8.833, "group": "on-demand-ng", "desired": 3},
    ]
    writes = [
        (8.7, "spot-ng", 1, "fast path: 4 new unschedulable pods"),
        (8.7, "spot-ng", 0, "launch failure: spot-ng"),
        (8.7, "on-demand-ng", 3, "launch failure: spot-ng"),
    ]
    # Then the spot request counts, at its step, with the path that made it; on-demand's
    # shows in its rows already, and the write back to 0 is no raise
    raised = undone_raises(rows, writes, step_seconds=10)
    assert raised == [
        {
            "minute": 8.833,
            "group": "spot-ng",
            "from": 0,
            "to": 1,
            "cause": "fast path: 4 new unschedulable pods",
        }
    ]


def test_a_raise_the_rows_show_is_not_counted_twice() -> None:
    rows = [
        {"minute": 0.0, "group": "a", "desired": 0},
        {"minute": 0.167, "group": "a", "desired": 4},
    ]
    assert undone_raises(rows, [(0.1, "a", 4, "fast path: x")], step_seconds=10) == []

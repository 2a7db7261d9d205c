"""A run's figures (`summary.json`, each controller's key): node-hours, waits, reactions,
disruption, AWS writes, what each trace did; and the runs' figures side by side, in
columns, as the runner prints them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from nodescaler_sandbox import (
    charging,
    figures,
    replay_figures,
)
from nodescaler_sandbox.cadence import MINUTE
from nodescaler_sandbox.controllers import CONTROLLERS, LABELS, NODESCALER
from nodescaler_sandbox.observation import Run
from nodescaler_sandbox.scenario_file import Scenario
from nodescaler_sandbox.timeline import clock


def summarize(scenario: Scenario, result: Run) -> dict[str, Any]:
    """The run's figures (`figures`) over its judged minutes, what it replayed (`replay_figures`),
    then what only some runs have (queues emptied, faults, drains, CA tuned's settings)."""
    groups = [g.name for g in scenario.groups]
    by_minute: dict[int, list[dict[str, Any]]] = {}
    for row in result.minutes:
        by_minute.setdefault(row["minute"], []).append(row)
    judged = [r for r in result.minutes if r["minute"] >= scenario.judged_from]
    step = scenario.step_seconds / MINUTE  # a row is a group's step
    summary: dict[str, Any] = {
        "node_hours": figures.node_hours(judged, step),
        "idle_node_hours": figures.idle_node_hours(judged, step),
        "unschedulable_pod_minutes": figures.unschedulable_pod_minutes(judged, step),
        "pod_wait_minutes": figures.pod_waits(result.pods, scenario.minutes),
        "pod_ready_minutes": figures.pod_ready(result.pods),
        **_reactions(scenario, result, groups),
        **_unserved(result),
        "aws_write_calls": {g: result.writes.get(g, 0) for g in groups},
        **figures.disruption(
            evictions_asked=result.evictions_asked,
            evicted=result.evicted,
            nodes_removed=result.nodes_removed,
            killed=result.killed,
            budget_short=result.budget_short,
        ),
        "peak_desired": {
            g: max(r["desired"] for r in result.minutes if r["group"] == g) for g in groups
        },
        "final_desired": {r["group"]: r["desired"] for r in by_minute[scenario.minutes]},
        "scale_requests": result.scale_requests,
    }
    summary |= _replay_figures(scenario, result, judged, step)
    summary |= _queues_and_faults(scenario, result, by_minute)
    summary |= _actions(scenario, result)
    return summary


def _scale_ups(result: Run) -> list[figures.ScaleUp]:
    """The run's raises, each with the path that brought it (`charging.request_path`):
    those its rows show, then those set back within their step."""
    causes = {(r["minute"], r["group"]): r.get("cause") for r in result.minutes}
    scale_ups = [
        figures.ScaleUp(
            r["minute"],
            r["group"],
            charging.request_path(result.controller, causes.get((r["minute"], r["group"]))),
        )
        for r in result.scale_requests
        if r["to"] > r["from"]
    ]
    scale_ups += [
        figures.ScaleUp(
            r["minute"], r["group"], charging.request_path(result.controller, r["cause"])
        )
        for r in result.undone_raises
    ]
    return scale_ups


def _reactions(scenario: Scenario, result: Run, groups: list[str]) -> dict[str, Any]:
    """Each group's longest demand-to-scale-request time, and the reactions' spread, in
    seconds, as the side's latencies are charged (`charging.charge`)."""
    scale_ups = _scale_ups(result)
    failed = result.fast_path_failed
    charge = charging.charge(result.controller, scenario, result.settings, lambda: failed)
    return {
        "longest_demand_to_scale_request_minutes": figures.longest(
            figures.demand_to_scale_request(result.pods, scale_ups, groups, scenario.minutes),
            figures.metric_to_scale_request(result.minutes, scale_ups, groups, scenario.minutes),
        ),
        "reaction_s": figures.reaction_seconds(
            figures.pod_reactions(result.pods, scale_ups, scenario.minutes, charge=charge),
            figures.queue_reactions(
                result.minutes,
                scale_ups,
                _queue_targets(scenario),
                {g.name: g.min for g in scenario.groups},
                scenario.minutes,
                charge=charge,
                most=largest_sizes(scenario),
            ),
        ),
    }


def _unserved(result: Run) -> dict[str, Any]:
    """The pods no group could take, and the first NotTriggerScaleUp Events told of them."""
    fit_no_group = figures.fit_no_group(result.pods)
    return {
        "pods_that_fit_no_group": {"count": len(fit_no_group), "first": fit_no_group[:10]},
        "not_trigger_scale_up_events": [
            f"{e['involvedObject']['name']}: {e['message']}"
            for e in result.events
            if e.get("reason") == "NotTriggerScaleUp"
        ][:10],
    }


def _queues_and_faults(
    scenario: Scenario, result: Run, by_minute: dict[int, list[dict[str, Any]]]
) -> dict[str, Any]:
    """Where the scenario has them: the minute judging starts, the minute its queues were
    first empty, and its faults' windows with what they cost."""
    summary: dict[str, Any] = {}
    if scenario.judged_from:
        summary["judged_from_minute"] = scenario.judged_from
    if scenario.queues:
        empty = next(
            (m for m, rows in by_minute.items() if m > 0 and not any(rows[0]["queues"].values())),
            None,
        )
        summary["minutes_to_empty_queues"] = empty
    if scenario.faults:
        summary["faults"] = {
            "windows": [
                f"{f.kind}{' ' + f.target if f.target else ''} {clock(f.start)}–{clock(f.until)}"
                for f in scenario.faults
            ],
            "calls_failed": result.faults_injected,
            "invocations_failed": result.failed_invocations,
            "tasks_lost": result.tasks_lost,
        }
    return summary


def _actions(scenario: Scenario, result: Run) -> dict[str, Any]:
    """Where the run has them: the termination policy's answers, the launches that failed,
    the requests' share of the nodes, the drains, and CA tuned's settings."""
    summary: dict[str, Any] = {}
    if result.termination_asked or result.termination_failed:
        summary["termination_policy"] = {
            "asked": len(result.termination_asked) + result.termination_failed,
            "instances_allowed": sum(len(ids) for _, ids in result.termination_asked),
            "failed": result.termination_failed,
        }
        if result.undrained:
            summary["termination_policy"]["undrained"] = result.undrained
    if result.launch_failures:
        summary["launch_failures_at_minute"] = [m for m, _ in result.launch_failures]
    if scenario.deployments:
        summary["requested_pct"] = _requested(scenario, result)
    if result.drains:
        summary["drains"] = [
            {
                "node": d.get("node"),
                "outcome": d.get("outcome"),
                "evicted": len(d.get("evicted") or ()),
                "left_on_the_node": len(d.get("remaining") or ()),
                "seconds": d.get("seconds"),
                "ended": d.get("at"),
            }
            for d in result.drains
        ]
    if result.settings:  # CA tuned: the flags and placeholders it ran with
        summary["settings"] = result.settings
    return summary


def _replay_figures(
    scenario: Scenario, result: Run, judged: list[dict[str, Any]], step: float
) -> dict[str, Any]:
    """The waits a user feels (each pod's arrival to Ready, in seconds), the cost in
    dollars, and what each trace did (`replay_figures`)."""
    waits = replay_figures.pod_wait_seconds(result.pods, scenario.minutes)
    hours = {
        g.name: figures.node_hours([r for r in judged if r["group"] == g.name], step)
        for g in scenario.groups
    }
    groups = [(g.name, g.instance_type, g.capacity_type) for g in scenario.groups]
    replay: dict[str, Any] = {
        "pod_wait_s": replay_figures.wait_spread(waits),
        "pod_wait_s_by_workload": replay_figures.waits_by_workload(
            result.pods, scenario.minutes, result.workloads
        ),
        "cost_usd": replay_figures.cost_usd(groups, hours, scenario.priced()),
    }
    if scenario.pod_traces or scenario.queues:  # Jobs' work, and queue workers'
        traced = (t.get("lost_job_minutes", 0) for t in result.replayed.values())
        replay["lost_job_minutes"] = round(sum(traced) + result.queue_work_lost_minutes, 1)
    if result.replayed:
        replay["traces"] = result.replayed
    return replay


def largest_sizes(scenario: Scenario) -> dict[str, int]:
    """Each group's largest size: its MaxSize, or its policy's maxReplicas inside it (which
    nodescaler keeps and CA tuned's MaxSize is set to): past it no request can answer."""
    from nodescaler.adapters.deployed_policies import load_policies

    policies = load_policies(scenario.policies_path)
    return {
        g.name: min(g.max, p.spec.max_replicas) if (p := policies.get(g.policy)) else g.max
        for g in scenario.groups
    }


def _queue_targets(scenario: Scenario) -> dict[str, list[tuple[str, float]]]:
    """Each group's queues read by an SQSQueue metric, with their messages per node."""
    from nodescaler.adapters.deployed_policies import load_policies
    from nodescaler.domain.policy import SqsQueueMetric

    policies = load_policies(scenario.policies_path)
    targets: dict[str, list[tuple[str, float]]] = {}
    for group in scenario.groups:
        policy = policies.get(group.policy)
        for metric in policy.spec.metrics if policy else ():
            per_node = metric.target.average_value if isinstance(metric, SqsQueueMetric) else None
            if isinstance(metric, SqsQueueMetric) and per_node:
                targets.setdefault(group.name, []).append((metric.sqs_queue.queue, float(per_node)))
    return targets


def _requested(scenario: Scenario, result: Run) -> dict[str, dict[str, float]]:
    """Each group's CPU and memory requested (% of its nodes' allocatable), over the minutes
    it had nodes: the low, the mean and the high."""
    figures = {}
    for group in scenario.groups:
        for resource in ("cpu", "memory"):
            values = [
                r[f"{resource}_requested_pct"]
                for r in result.minutes
                if r["group"] == group.name and r["in_service"]
            ]
            if values:
                figures[f"{group.name}/{resource}"] = {
                    "low": min(values),
                    "mean": round(sum(values) / len(values), 1),
                    "high": max(values),
                }
    return figures


def unpriced(summary: Mapping[str, Any]) -> list[str]:
    """A note naming the instance types no price was found for (so `cost_usd` has no
    total, never a cost of 0), or none."""
    types = sorted({t for c in CONTROLLERS if c in summary for t in _unpriced_types(summary[c])})
    if not types:
        return []
    return [f"no price for {', '.join(types)}: cost_usd has no total (set `prices:`)"]


def notes(summary: dict[str, Any]) -> str:
    """What follows the figures: the unpriced instance types, the undrained groups."""
    return "".join(f"\n   {note}" for note in why_notes(summary))


def why_notes(summary: Mapping[str, Any]) -> list[str]:
    """What a run says beside its figures: the unpriced types, the undrained groups."""
    return unpriced(summary) + undrained(summary)


def undrained(summary: Mapping[str, Any]) -> list[str]:
    """A note for each group whose scale-ins kept nodes with pods as it has no drain hook
    (their pods would end with the instance: only empty nodes leave it)."""
    kept = (summary.get(NODESCALER) or {}).get("termination_policy", {}).get("undrained", {})
    return [
        f"{group}: its termination policy's answers kept a node with pods {count} times, as "
        "the group has no drain hook (only its empty nodes leave; Cluster Autoscaler drains "
        "the others): give it `drain: true`, or leave DRAIN_OPTED_IN_GROUPS on (deployed: "
        "drainOptedInGroups, docs/deploy.md)"
        for group, count in sorted(kept.items())
    ]


def _unpriced_types(run: Mapping[str, Any]) -> list[str]:
    cost = run.get("cost_usd")
    return list(cost.get("unpriced_instance_types", ())) if isinstance(cost, dict) else []


def side_by_side(summary: dict[str, Any]) -> str:
    """The runs' figures in columns, the first run's naming the rows (nodescaler's)."""
    ran = [c for c in CONTROLLERS if c in summary]
    ours, *others = (summary[c] for c in ran)
    lines = ["   " + " " * 52 + "".join(f" {LABELS[c]:>14}" for c in ran)]

    def line(label: str, mine: Any, *path: str) -> None:
        cells = "".join(f" {_cell(_dig(other, path)):>14}" for other in others)
        lines.append(f"   {label:<52} {_cell(mine):>14}{cells}")

    lines.append(
        f"   {'oracle_node_hours (a bound no run can beat)':<52} "
        f"{_cell(summary.get('oracle_node_hours')):>14}\n"
        f"   {'packed_node_hours (first-fit decreasing, heuristic)':<52} "
        f"{_cell(summary.get('packed_node_hours')):>14}"
    )
    for key, value in ours.items():
        for label, mine, path in _rows(key, value):
            line(label, mine, *path)
    return "\n".join(lines)


def _rows(key: str, value: Any) -> Iterator[tuple[str, Any, tuple[str, ...]]]:
    """The table's rows for one of the first run's figures: its label, its value, and
    where the other runs hold theirs; a figure per group (and per percentile) a row each."""
    if isinstance(value, int | float) or value is None:
        yield key, value, (key,)
    elif key in ("pod_wait_minutes", "pod_ready_minutes", "reaction_s"):
        for group, figures_ in value.items():
            for name in ("p50", "p99", "max"):
                yield f"{key} {group} {name}", figures_[name], (key, group, name)
    elif key == "pods_that_fit_no_group":
        yield key, value["count"], (key, "count")
    elif key in (
        "longest_demand_to_scale_request_minutes",
        "aws_write_calls",
        "final_desired",
        "peak_desired",
    ):
        for group, figure in value.items():
            yield f"{key} {group}", figure, (key, group)


def _dig(figures: Any, path: Sequence[str]) -> Any:
    """A run's figure at `path` in its summary (None where it has none)."""
    for key in path:
        figures = figures.get(key) if isinstance(figures, dict) else None
    return figures


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)

"""The controllers a scenario runs under (nodescaler, the Cluster Autoscaler baseline, and
that baseline tuned as an operator would), and what each does at a step, every part on its
real cadence: nodescaler's tick, alarms and fast path; CA's scan loop and, tuned, its
settings and scheduled actions (`baseline_tuning`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from nodescaler.domain.cluster.instance_templates import zone_labels

from nodescaler_sandbox import (
    baseline_proportional,
    baseline_tuning,
    demand,
    oracle,
)
from nodescaler_sandbox.baseline import (
    SCAN,
    DrainFlags,
    Flags,
    GroupSpec,
    Limits,
    ReactiveBaseline,
    managed_node_group,
)
from nodescaler_sandbox.baseline_proportional import Proportional, ProportionalAutoscaler
from nodescaler_sandbox.cadence import EVERY_MINUTE, MINUTE, Cadence
from nodescaler_sandbox.outages import THROTTLED, Outages
from nodescaler_sandbox.sandbox import Sandbox
from nodescaler_sandbox.scenario_file import Scenario
from nodescaler_sandbox.world import World
from nodescaler_sandbox.world_setup import instance_capacity, node_labels

if TYPE_CHECKING:
    from nodescaler.domain.policy import NodeGroupPolicy

NODESCALER, BASELINE = "nodescaler", "cluster-autoscaler-baseline"
TUNED = "cluster-autoscaler-tuned"  # the baseline as an operator tunes it to the policy
CONTROLLERS = (NODESCALER, BASELINE, TUNED)  # what `make demo` runs, in its columns' order
LABELS = {NODESCALER: "nodescaler", BASELINE: "CA defaults", TUNED: "CA tuned"}


def acting(
    scenario: Scenario,
    controller: str,
    box: Sandbox,
    world: World,
    outages: Outages,
    *,
    settings: dict[str, Any] | None = None,
) -> Callable[[int, int], None]:
    """What a controller does at a step (its time in seconds from the start, and the
    step's length), each part on its real cadence, not the step's; CA tuned's settings
    written into `settings`."""
    if controller == NODESCALER:
        return _nodescaler(scenario, box, world, outages)
    return _cluster_autoscaler(scenario, controller, box, world, outages, settings=settings)


def _nodescaler(
    scenario: Scenario, box: Sandbox, world: World, outages: Outages
) -> Callable[[int, int], None]:
    """nodescaler's step: the gauges and queue metrics its sources read, its alarms, the
    stack's tick and the fast path's look, with the AWS calls it makes watched for faults."""
    for service in THROTTLED:
        outages.watch(service, getattr(box.clients, service))

    tick = Cadence(scenario.tick_minutes * MINUTE)  # the stack's EventBridge schedule

    def nodescaler(at: int, step: int) -> None:
        # An exporter's gauge is current whenever scraped: Prometheus holds it within a
        # step (a scrape interval of at most the world's), before anything reads it.
        if scenario.prometheus:
            box.publish_gauges(world.gauges())
        if EVERY_MINUTE.due(at, step) and (scenario.queues or scenario.request_traces):
            box.publish_queue_metrics(world.queue_depths(visible_only=True))  # SQS's
        if scenario.alarms:
            box.evaluate_alarms()  # each alarm when its evaluation is due
        if tick.due(at, step):
            box.tick()
        # The fast path looks every 5 s; the world moves in steps of 10: a look a step is
        # what that rate sees of it. Its schedule starts an invocation each minute.
        box.fast_look(invoked=EVERY_MINUTE.due(at, step))

    return nodescaler


def _cluster_autoscaler(
    scenario: Scenario,
    controller: str,
    box: Sandbox,
    world: World,
    outages: Outages,
    *,
    settings: dict[str, Any] | None,
) -> Callable[[int, int], None]:
    """The baseline's step, untuned or tuned (its settings made first, `_tune`): its
    scheduled actions at their time, and its loop at each scan."""
    actions: baseline_tuning.ScheduledActions | None = None
    flags = Flags()
    autoscalers: list[ProportionalAutoscaler] = []
    if controller == TUNED:
        actions, flags, autoscalers = _tune(
            scenario, box, world, {} if settings is None else settings
        )
    baseline = ReactiveBaseline(
        world.cluster,
        outages.watch("autoscaling", box.controller_autoscaling()),
        _as_cluster_autoscaler_reads_them(scenario, box),
        ReactiveBaseline.expander_chain(scenario.environment.get("EXPANDERS")),
        Limits.of(scenario.environment),
        DrainFlags.of(scenario.environment),
        settings=flags,
    )

    scan = Cadence(int(SCAN.total_seconds()))

    def cluster_autoscaler(at: int, step: int) -> None:
        # the tuned run's scheduled actions are Auto Scaling's, run at their time; the
        # baseline sees their bounds at its Auto Scaling cache's next refresh
        if actions is not None:
            actions.run(box.clock.now())
        if outages.kubernetes_down:  # CA and CPA read the API server
            return
        for autoscaler in autoscalers:  # each on its own poll; the pods made at `react`
            autoscaler.poll(at, step, world.cluster.store)
        if not scan.due(at, step):
            return
        try:
            baseline.act(box.clock.now())
        except ClientError:  # an AWS call refused (a fault): the next scan tries again
            return

    return cluster_autoscaler


def _tune(
    scenario: Scenario, box: Sandbox, world: World, settings: dict[str, Any]
) -> tuple[baseline_tuning.ScheduledActions, Flags, list[ProportionalAutoscaler]]:
    """The tuned run's settings, made before it starts (`baseline_tuning`): each group's
    tags, bounds and scheduled actions (those already due applied, as if they had been
    running; a forecast's as scheduled minimums from its first day), its nodes' group
    label, its overprovisioning placeholders and the cluster-proportional-autoscaler of
    its proportional ones; the cluster's CapacityBuffers' pods, as CA injects them; and
    the cluster's flags. What it ran with is written into `settings`."""
    from nodescaler.adapters.deployed_policies import load_policies

    policies = load_policies(scenario.policies_path)
    autoscaling = box.client("autoscaling")
    tunings, autoscalers = [], []
    for group in scenario.groups:
        policy = policies[group.policy]
        tuning = baseline_tuning.tune(policy, group.name, group.min, group.max)
        tuning = replace(tuning, proportional=_proportional(policy, world, tuning))
        if baseline_tuning.has_forecast(policy):
            tuning = replace(
                tuning,
                scheduled_actions=tuning.scheduled_actions
                + _forecast_minimums(scenario, world, tuning),
            )
        baseline_tuning.configure(autoscaling, tuning)
        world.cluster.labels[group.name] = world.cluster.labels[group.name] | tuning.labels
        world.deployments += [
            baseline_tuning.placeholder_deployment(p, i) for i, p in enumerate(tuning.placeholders)
        ]
        if tuning.proportional is not None:
            placeholders = baseline_tuning.proportional_deployment(tuning.proportional)
            world.deployments.append(placeholders)
            autoscalers.append(ProportionalAutoscaler(tuning.proportional, placeholders))
        tunings.append(tuning)
    buffers = baseline_tuning.buffer_placeholders(scenario.capacity_buffers)
    world.deployments += [
        baseline_tuning.placeholder_deployment(p, i) for i, p in enumerate(buffers)
    ]
    actions = baseline_tuning.ScheduledActions(autoscaling, datetime.min.replace(tzinfo=UTC))
    actions.run(box.clock.now())
    # the operator knows the startup taints its nodes register with
    startup = sorted({t.key for g in scenario.groups for t in g.startup_taints})
    flags = replace(baseline_tuning.cluster_flags(tunings), startup_taints=tuple(startup))
    settings |= baseline_tuning.settings(flags, tunings, buffers)
    return actions, flags, autoscalers


def _proportional(
    policy: NodeGroupPolicy, world: World, tuning: baseline_tuning.GroupTuning
) -> Proportional | None:
    """The group's CPA, from the room a new node of it offers (`baseline_proportional`)."""
    return baseline_proportional.proportional(
        policy,
        tuning.group,
        world.cluster.empty_node(tuning.group),
        (tuning.min_size, tuning.max_size),
        tuning.labels,
    )


def _forecast_minimums(
    scenario: Scenario, world: World, tuning: baseline_tuning.GroupTuning
) -> list[baseline_tuning.ScheduledAction]:
    """The group's scheduled minimums from the scenario's first day (the history its
    forecast learns from): each minute, the nodes the demand it can take needs."""
    group = next(g for g in scenario.groups if g.name == tuning.group)
    room = {group.name: world.cluster.empty_node(group.name)}
    per_minute = MINUTE // scenario.step_seconds
    day = itertools.islice(demand.demand(scenario), 0, 24 * 60 * per_minute, per_minute)
    needed = [oracle.lower_bound(step, room, oracle.Bounds({})).nodes for step in day]
    boot = scenario.warm_boot_minutes if group.warm_pool else scenario.boot_minutes
    return baseline_tuning.forecast_minimums(
        group.name,
        needed,
        scenario.start,
        timedelta(minutes=math.ceil(boot)),
        (tuning.min_size, tuning.max_size),
    )


def _as_cluster_autoscaler_reads_them(scenario: Scenario, box: Sandbox) -> dict[str, GroupSpec]:
    """Each group's bounds, tags and instance type's capacity, read from AWS."""
    described = box.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[g.name for g in scenario.groups]
    )["AutoScalingGroups"]
    tags = {d["AutoScalingGroupName"]: {t["Key"]: t["Value"] for t in d["Tags"]} for d in described}
    bounds = {d["AutoScalingGroupName"]: (d["MinSize"], d["MaxSize"]) for d in described}
    # its template's zone: the group's first (aws_manager.go, getAsgTemplate)
    zones = {d["AutoScalingGroupName"]: d["AvailabilityZones"][:1] for d in described}
    return {
        g.name: GroupSpec(
            *bounds[g.name],
            instance_capacity(box.client("ec2"), g.instance_type),
            tags[g.name],
            node_labels(box.client("ec2"), g.instance_type) | zone_labels(zones[g.name]),
            *managed_node_group(box.client("eks"), tags[g.name]),
        )
        for g in scenario.groups
    }

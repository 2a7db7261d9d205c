"""Replays the scaling core over the reference design's two examples on a virtual clock.

This is the demo until the sandbox lands: no AWS or Kubernetes, just the real policy
files and the real core fed by a small model of each workload (nodes boot for a few
minutes, then consume work), printing every decision as a timeline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nodescaler.domain.autoscaler import GroupSize, decide, record_scale
from nodescaler.domain.decision import Decision
from nodescaler.domain.history import History
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.readings import MetricReading, Reading
from nodescaler.policy_files import load_policies

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TICK = timedelta(minutes=1)


@dataclass
class Fleet:
    """A node group whose new nodes take `boot_minutes` to come into service."""

    boot_minutes: int
    desired: int = 0
    launches: list[tuple[int, int]] = field(default_factory=list)  # (ready at minute, count)
    in_service: int = 0

    def set_desired(self, minute: int, desired: int) -> None:
        if desired > self.desired:
            self.launches.append((minute + self.boot_minutes, desired - self.desired))
        else:  # scale-in removes in-service nodes first once nothing is booting
            self.launches = [(t, n) for t, n in self.launches if t > minute]
            booting = sum(n for _, n in self.launches)
            self.in_service = min(self.in_service, desired - min(booting, desired))
        self.desired = desired

    def advance(self, minute: int) -> None:
        self.in_service += sum(n for t, n in self.launches if t == minute)
        self.launches = [(t, n) for t, n in self.launches if t > minute]


@dataclass(frozen=True)
class Scenario:
    name: str
    policy: str
    minutes: int
    boot_minutes: int
    start_size: int
    # (minute, fleet) -> readings by metric name
    observe: Callable[[int, Fleet], dict[str, float]]
    show: tuple[str, ...]


def queue_burst() -> Scenario:
    """2400 tasks, 4 per node; each node finishes a task every 2.5 minutes."""
    state = {"queue": 2400.0}

    def observe(minute: int, fleet: Fleet) -> dict[str, float]:
        if minute > 0:
            state["queue"] = max(0.0, state["queue"] - fleet.in_service * 0.4)
        return {"training-queue": math.ceil(state["queue"])}

    return Scenario("queue-burst", "gpu-training", 45, 3, 0, observe, ("training-queue",))


def reservation_ramp() -> Scenario:
    """1-core/1 GB pods on 16-core/20 GB nodes: 9 pods, up to 150 by minute 30, back by 70."""

    def pods_at(minute: int) -> int:
        if minute <= 30:
            return 9 + round(141 * minute / 30)
        return max(9, 150 - round(141 * (minute - 30) / 20))

    def observe(minute: int, fleet: Fleet) -> dict[str, float]:
        pods, nodes = pods_at(minute), fleet.in_service
        running = min(pods, nodes * 16)
        pending = pods - running
        booting = sum(n for _, n in fleet.launches)
        values: dict[str, float] = {"pending-pods": max(0, math.ceil(pending / 16) - booting)}
        if nodes:
            values["reservation-cpu"] = 100 * running / (nodes * 16)
            values["reservation-memory"] = 100 * running / (nodes * 20)
        return values

    return Scenario(
        "reservation-ramp",
        "microservices",
        100,
        2,
        1,
        observe,
        ("reservation-cpu", "reservation-memory", "pending-pods"),
    )


SCENARIOS = {s.name: s for s in (queue_burst(), reservation_ramp())}


def replay(scenario: Scenario, policy: NodeGroupPolicy) -> Iterator[tuple[int, Fleet, Decision]]:
    fleet = Fleet(
        scenario.boot_minutes, desired=scenario.start_size, in_service=scenario.start_size
    )
    history = History()
    for minute in range(scenario.minutes + 1):
        now = START + minute * TICK
        fleet.advance(minute)
        values: dict[str, Reading] = {
            name: MetricReading(value=value, at=now)
            for name, value in scenario.observe(minute, fleet).items()
        }
        evaluation = decide(
            node_group=f"{scenario.name}-ng",
            policy=policy,
            size=GroupSize(fleet.desired, ready=fleet.in_service),
            readings=values,
            history=history,
            now=now,
        )
        decision, history = evaluation.decision, evaluation.history
        if decision.desired != decision.current:
            history = record_scale(history, policy, decision)
            fleet.set_desired(minute, decision.desired)
        yield minute, fleet, decision


def _metric_cell(decision: Decision, name: str) -> str:
    for metric in decision.metrics:
        if metric.name == name:
            value = "-" if metric.value is None else f"{metric.value:.4g}"
            return f"{value} / {metric.target}"
    return "-"


def run(names: list[str], policies_folder: Path, write: Callable[[str], None] = print) -> None:
    policies = load_policies(policies_folder)
    for name in names:
        scenario = SCENARIOS[name]
        write(
            f"\n== {scenario.name}: policy {scenario.policy} "
            f"(core replay, {scenario.boot_minutes} min boot)"
        )
        header = ["t", "in service", *scenario.show, "current → desired", "why"]
        write(" | ".join(header))
        last = None
        for minute, fleet, decision in replay(scenario, policies[scenario.policy]):
            row = (fleet.in_service, decision.current, decision.desired, decision.limited_by)
            if row == last and minute % 10:
                continue  # print changes, plus every 10 minutes
            last = row
            cells = [f"+{minute:02d}m", str(fleet.in_service)]
            cells += [_metric_cell(decision, m) for m in scenario.show]
            cells += [f"{decision.current} → {decision.desired}", decision.reason.split(" | ")[-1]]
            write(" | ".join(cells))

"""The checks of a scenario that no field can make alone (`scenario_file`): zones, a
shift's end, names given twice, what a fault names, and points within the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nodescaler.errors import PermanentError

if TYPE_CHECKING:
    from nodescaler_sandbox.scenario_file import FaultSpec, Scenario

SANDBOX_ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")  # the sandbox's region's
THROTTLED_SERVICES = ("autoscaling", "cloudwatch", "dynamodb", "ec2", "eks", "sqs")


class ScenarioError(PermanentError, ValueError):
    """A scenario file that cannot be run; the message names the file and the field, and
    `problems` each of its schema defects, a line each."""

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


def check_zones_and_names(where: Path, scenario: Scenario) -> None:
    """Zones of the sandbox's region; a shift that ends after it starts; a buffer, and a
    DaemonSet, once."""
    zones = [(f"groups.{i}.zone", g.zone) for i, g in enumerate(scenario.groups)]
    zones += [(f"zonalShifts.{i}.zone", s.zone) for i, s in enumerate(scenario.zonal_shifts)]
    for field, zone in zones:
        if zone is not None and zone not in SANDBOX_ZONES:
            raise ScenarioError(
                f"{where}: {field}: {zone} is not a zone of the sandbox's region "
                f"({', '.join(SANDBOX_ZONES)})"
            )
    for index, shift in enumerate(scenario.zonal_shifts):
        if shift.until <= shift.start:
            raise ScenarioError(
                f"{where}: zonalShifts.{index}.until: {shift.until:g} is not after from "
                f"({shift.start:g})"
            )
    _once(where, "capacityBuffers", [(b.namespace, b.name) for b in scenario.capacity_buffers])
    _once(where, "daemonSets", [(d.namespace, d.name) for d in scenario.daemon_sets])


def _once(where: Path, field: str, names: list[tuple[str, str]]) -> None:
    """Each (namespace, name) of `field` given once."""
    seen: set[tuple[str, str]] = set()
    for index, (namespace, name) in enumerate(names):
        if (namespace, name) in seen:
            raise ScenarioError(f"{where}: {field}.{index}: {namespace}/{name} appears twice")
        seen.add((namespace, name))


def check_points(where: Path, scenario: Scenario) -> None:
    """No time past the end of the run where it would change nothing in it: the trap of
    "HH:MM" read as the clock, when it counts from the start. A replica curve's later points
    still shape its ramp (linear between points), so only its first may not be past the end;
    a task sent, a fault or a shift starting past the end never happens in the run."""
    late: list[tuple[str, float, str]] = [
        (f"deployments.{i}.replicas", min(d.replicas), "the curve never changes in the run")
        for i, d in enumerate(scenario.deployments)
    ]
    late += [
        (f"queues.{i}.tasks", max(q.tasks, default=0), "those tasks are never sent")
        for i, q in enumerate(scenario.queues)
    ]
    late += [
        (f"faults.{i}.from", f.start, "it never starts") for i, f in enumerate(scenario.faults)
    ]
    late += [
        (f"zonalShifts.{i}.from", z.start, "it never starts")
        for i, z in enumerate(scenario.zonal_shifts)
    ]
    for field, minute, so in late:
        if minute > scenario.minutes:
            hours, minutes = divmod(int(minute), 60)
            raise ScenarioError(
                f"{where}: {field}: minute {minute:g} ({hours:02d}:{minutes:02d}) is past the "
                f"end of the run (minute {scenario.minutes}), so {so}: "
                '"HH:MM" counts from the start of the run, not the clock'
            )


def check_fault(where: str, fault: FaultSpec, queues: set[str]) -> None:
    if fault.until <= fault.start:
        raise ScenarioError(f"{where}.until: {fault.until:g} is not after from ({fault.start:g})")
    if fault.kind == "queue-deleted" and fault.target not in queues:
        raise ScenarioError(
            f"{where}.target: a queue-deleted fault names a queue of the scenario "
            f"({', '.join(sorted(queues)) or 'it has none'}), not {fault.target!r}"
        )
    if fault.kind == "throttling" and fault.target not in THROTTLED_SERVICES:
        raise ScenarioError(
            f"{where}.target: throttling names a service ({', '.join(THROTTLED_SERVICES)}), "
            f"not {fault.target!r}"
        )
    if fault.kind not in ("queue-deleted", "throttling") and fault.target is not None:
        raise ScenarioError(f"{where}.target: a {fault.kind} fault takes no target")
    # checked here, as `seconds` has a default: given to another kind it would do nothing
    if fault.kind != "kubernetes-slow" and "seconds" in fault.model_fields_set:
        raise ScenarioError(f"{where}.seconds: a {fault.kind} fault takes no seconds")

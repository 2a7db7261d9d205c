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
    """No replica or task point past the end of the run, where it would never take effect:
    the trap of "HH:MM" read as the clock, when it counts from the start."""
    points = [
        (f"deployments.{i}.replicas", d.replicas) for i, d in enumerate(scenario.deployments)
    ] + [(f"queues.{i}.tasks", q.tasks) for i, q in enumerate(scenario.queues)]
    for field, curve in points:
        late = [m for m in curve if m > scenario.minutes]
        if late:
            hours, minutes = divmod(round(late[0]), 60)
            raise ScenarioError(
                f"{where}: {field}: minute {late[0]:g} ({hours:02d}:{minutes:02d}) is past the "
                f"end of the run (minute {scenario.minutes}), so it never takes effect: "
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

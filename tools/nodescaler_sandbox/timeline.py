"""The timeline a run prints and writes (`timeline.txt`): a line for each decision that
changed a group's size or said why it could not, the faults and the pods no group can
take, told on one clock, time since the start."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox.observation import Run
from nodescaler_sandbox.scenario_file import Scenario

if TYPE_CHECKING:
    from collections.abc import Iterable


def clock(minute: float) -> str:
    """ "HH:MM" since the start, ":SS" after it within a minute (a step of seconds)."""
    seconds = round(minute * 60)
    clock = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}"
    return clock + (f":{seconds % 60:02d}" if seconds % 60 else "")


def _when(scenario: Scenario, minute: float) -> str:
    """Time since the start; with the local clock too when the scenario has a zone."""
    if scenario.start.utcoffset() == timedelta(0) and str(scenario.start.tzinfo) == "UTC":
        return clock(minute)
    at = scenario.start.astimezone(UTC) + timedelta(minutes=minute)  # not wall-clock sums
    local = at.astimezone(scenario.start.tzinfo)
    return f"{clock(minute)} ({local:%a %H:%M %Z})"


_WALL_TIME = re.compile(r"\b(\d{2}):(\d{2}):(\d{2})Z")


def on_the_timeline_clock(why: str, scenario: Scenario, minute: float) -> str:
    """`why` with each UTC time of day it quotes (`until 09:18:50Z`, from the functions'
    reasons) told on the timeline's clock, time since the start (`until 00:18:50`): one
    clock a line. A time of day is the next one at or after the row's own time."""
    at = scenario.start.astimezone(UTC) + timedelta(minutes=minute)

    def elapsed(match: re.Match[str]) -> str:
        hours, minutes, seconds = (int(part) for part in match.groups())
        when = at.replace(hour=hours, minute=minutes, second=seconds, microsecond=0)
        if when < at - timedelta(minutes=1):  # a time past midnight
            when += timedelta(days=1)
        return clock((when - scenario.start.astimezone(UTC)).total_seconds() / 60)

    return _WALL_TIME.sub(elapsed, why)


def _metrics_cell(row: dict[str, Any]) -> str:
    metrics = row.get("metrics") or {}
    return (
        ", ".join(f"{name} {_number(m['value'])}/{m['target']}" for name, m in metrics.items())
        or "-"
    )


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2f}"


def lines(scenario: Scenario, result: Run) -> list[str]:
    """A line for each decision that changed a group's size or said why it could not,
    and one an hour (10 minutes in a short scenario) to show the steady state."""
    every = 60 if scenario.minutes > 180 else 10
    lines = ["time since the start | group | metrics (value/target) | current → desired | why"]
    seen: dict[str, tuple[Any, ...]] = {}
    before = {g.name: g.min for g in scenario.groups}
    faults = sorted(
        [(f.start, f"{f.kind}{' ' + f.target if f.target else ''} begins") for f in scenario.faults]
        + [(f.until, f"{f.kind}{' ' + f.target if f.target else ''} ends") for f in scenario.faults]
    )
    told = _told(scenario, result.events)
    for row in result.minutes:
        while faults and faults[0][0] <= row["minute"]:
            at, what = faults.pop(0)
            lines.append(f"{_when(scenario, at)} | (fault) | - | - | {what}")
        while told and told[0][0] <= row["minute"]:
            at, pods, message = told.pop(0)
            lines.append(f"{_when(scenario, at)} | ({pods}) | - | - | {message}")
        current, before[row["group"]] = before[row["group"]], row["desired"]
        key = (row["desired"], row.get("backed_off"), row.get("decided"))
        if key == seen.get(row["group"]) and row["minute"] % every:
            continue
        seen[row["group"]] = key
        earlier = (
            _earlier(row, result.desired_writes, scenario.step_seconds)
            if _held_only(row, current)
            else None
        )
        why = _why(row, current, None if earlier is None else _said(earlier))
        why = on_the_timeline_clock(why, scenario, row["minute"])
        if row.get("cause"):  # the path that brought the decision
            why = f"{why} [{_path(row['cause'])}]"
        lines.append(
            f"{_when(scenario, row['minute'])} | {row['group']} | {_metrics_cell(row)} | "
            f"{current} → {row['desired']} | {why}"
        )
    return lines


def _told(scenario: Scenario, events: Iterable[dict[str, Any]]) -> list[tuple[float, str, str]]:
    """The NotTriggerScaleUp Events on pods no group can take, a line for each time shown
    and message: a hundred queue workers waiting at a capped group are one line, not a
    hundred (at the first of their times)."""
    said: dict[tuple[str, str], tuple[float, list[str]]] = {}
    for event in events:
        if event.get("reason") == "NotTriggerScaleUp":
            at = minutes_since(scenario, event["firstTimestamp"])
            key = (_when(scenario, at), event["message"])
            first, names = said.setdefault(key, (at, []))
            said[key] = (min(first, at), [*names, event["involvedObject"]["name"]])
    told = sorted((at, message, names) for (_, message), (at, names) in said.items())
    return [(at, _pods(names), message) for at, message, names in told]


def _pods(names: list[str]) -> str:
    """ "pod worker-1", "pods worker-1, worker-2", "pods worker-1, worker-2 and 98 more"."""
    names = sorted(names, key=_in_number_order)
    if len(names) == 1:
        return f"pod {names[0]}"
    shown = ", ".join(names[:2])
    return f"pods {shown}" + (f" and {len(names) - 2} more" if len(names) > 2 else "")


def _in_number_order(name: str) -> list[tuple[int, int | str]]:
    """A sort key: "worker-2" before "worker-10"."""
    return [(0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", name)]


def _why(row: dict[str, Any], current: int, earlier: str | None = None) -> str:
    """The step's last decision's reason, less what the row already shows ("scale up 2 →
    3"): the metric that drove it and what held it. When an earlier decision of the step
    made the change this one only holds, it says so, and which (`earlier`: its time and
    cause, where the run's writes tell it); its reason is in the logs."""
    what, *rest = (row.get("why") or "").split(" | ")
    why = " | ".join(rest) or what
    if _held_only(row, current):
        by = (
            f"an earlier decision in the step ({earlier})"
            if earlier
            else "an earlier decision in the step"
        )
        return f"changed by {by}; then {what}" + (f" | {why}" if rest else "")
    return why


def _held_only(row: dict[str, Any], current: int) -> bool:
    """Whether the step's last decision only held what an earlier one of the step set."""
    return row.get("current") == row.get("decided") and current != row["desired"]


def _earlier(
    row: dict[str, Any], writes: Iterable[tuple[float, str, int, str | None]], step_seconds: int
) -> tuple[float, int, str | None] | None:
    """The last write of the row's group within its step that set what the row shows:
    (minute, desired, cause)."""
    since = row["minute"] - step_seconds / 60
    found = [
        (minute, desired, cause)
        for minute, group, desired, cause in writes
        if group == row["group"]
        and since < minute <= row["minute"] + 1e-6
        and desired == row["desired"]
    ]
    return found[-1] if found else None


def _said(write: tuple[float, int, str | None]) -> str:
    """ "at 01:32:45, fast path: 1 new unschedulable pods" """
    minute, _, cause = write
    return f"at {clock(minute)}, {cause}" if cause else f"at {clock(minute)}"


def _path(cause: str) -> str:
    """ "fast path: 3 new unschedulable pods" → "fast path"; "alarm x: OK → ALARM" → "alarm"."""
    for path in ("fast path", "alarm", "launch failure", "tick"):
        if cause.startswith(path):
            return path
    return cause


def minutes_since(scenario: Scenario, at: str) -> float:
    return (datetime.fromisoformat(at.replace("Z", "+00:00")) - scenario.start).total_seconds() / 60

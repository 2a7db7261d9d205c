"""timeline.txt tells every time on one clock, time since the start: a reason quoting a
UTC time of day (`backed off until 09:18:50Z`) is told on it too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from nodescaler_sandbox.scenario_file import load_scenario
from nodescaler_sandbox.timeline import on_the_timeline_clock

REPO = Path(__file__).parents[2]


def test_a_reasons_time_of_day_is_told_as_time_since_the_start() -> None:
    scenario = load_scenario(REPO / "scenarios" / "4-launch-failure.yaml")
    start = scenario.start.astimezone(UTC)
    # Given a backoff decided 8:50 in, until 10 minutes later, said in UTC by the function
    until = start + timedelta(minutes=18, seconds=50)
    why = f"backed off until {until:%H:%M:%S}Z after a failed scale-up: no capacity"
    # Then the line says it on the timeline's clock
    assert on_the_timeline_clock(why, scenario, 8 + 50 / 60) == (
        "backed off until 00:18:50 after a failed scale-up: no capacity"
    )


def test_a_time_of_day_past_midnight_is_the_next_day_s() -> None:
    scenario = load_scenario(REPO / "scenarios" / "4-launch-failure.yaml")
    start = scenario.start.astimezone(UTC)
    late = datetime.combine(start.date(), datetime.min.time(), UTC) + timedelta(
        hours=23, minutes=55
    )
    minute = (late - start).total_seconds() / 60
    told = on_the_timeline_clock("until 00:05:00Z", scenario, minute)
    expected = (late + timedelta(minutes=10) - start).total_seconds()
    assert told == f"until {int(expected // 3600):02d}:{int(expected // 60 % 60):02d}"


def test_a_rows_reason_shows_the_driver_and_the_hold_and_says_when_another_decision_changed_it() -> (
    None
):
    from nodescaler_sandbox.timeline import _why

    # a scale-in shows both the metric that drove it and the window that held the rest
    shrink = {
        "why": "scale down 87 → 78 | pending-pods: 14 unneeded → 75 | held by the scale-down "
        "window: no lower than its highest recommendation of the last 600s",
        "current": 87,
        "decided": 78,
        "desired": 78,
    }
    assert _why(shrink, 87) == (
        "pending-pods: 14 unneeded → 75 | held by the scale-down window: no lower than its "
        "highest recommendation of the last 600s"
    )
    # a step whose last decision only holds what an earlier one raised says so
    hold = {"why": "hold at 8", "current": 8, "decided": 8, "desired": 8}
    assert _why(hold, 1) == "changed by an earlier decision in the step; then hold at 8"
    assert _why(hold, 8) == "hold at 8"


def test_an_earlier_decision_of_the_step_is_named_by_its_time_and_cause() -> None:
    from nodescaler_sandbox.timeline import _earlier, _said, _why

    # Given a minute's step whose last decision (the tick) holds at 7, and the writes of
    # the run: the fast path set 7 within the step, another group and an earlier step 6
    row = {"minute": 93.0, "group": "gpu", "why": "hold at 7", "current": 7, "decided": 7}
    row["desired"] = 7
    writes = [
        (91.5, "gpu", 6, "tick"),
        (92.25, "web", 7, "tick"),
        (92.75, "gpu", 7, "fast path: 1 new unschedulable pods"),
        (93.0, "gpu", 7, None),
    ]
    # When its reason is told, Then it names the last write of that group in the step
    # that set what the row shows: its second and cause
    earlier = _earlier(row, writes[:3], step_seconds=60)
    assert earlier == (92.75, 7, "fast path: 1 new unschedulable pods")
    assert _why(row, 6, _said(earlier)) == (
        "changed by an earlier decision in the step (at 01:32:45, fast path: 1 new "
        "unschedulable pods); then hold at 7"
    )
    assert _said(_earlier(row, writes, step_seconds=60) or (0, 0, "")) == "at 01:33"
    # a write of another step, or none that set it: no name
    assert _earlier(row, writes[:1], step_seconds=60) is None
    assert _earlier(row | {"desired": 8}, writes, step_seconds=60) is None


def test_the_waiting_pods_told_at_one_moment_with_one_message_are_one_line() -> None:
    from nodescaler_sandbox.observation import Run
    from nodescaler_sandbox.timeline import lines

    scenario = load_scenario(REPO / "scenarios" / "4-launch-failure.yaml")
    start = scenario.start.astimezone(UTC)

    def told(pod: str, minute: int, message: str) -> dict[str, object]:
        at = (start + timedelta(minutes=minute)).isoformat()
        return {
            "reason": "NotTriggerScaleUp",
            "firstTimestamp": at,
            "involvedObject": {"name": pod},
            "message": message,
        }

    full = "pod didn't trigger scale-up: gpu-ng: at its maximum size, 2 nodes"
    events = [told(f"worker-{n}", 3, full) for n in range(10, 0, -1)]  # worker-10 is 10th
    events += [told("worker-9", 3, "pod didn't trigger scale-up: no room"), told("lone", 4, full)]
    rows = [{"minute": m, "group": "spot-ng", "desired": 1} for m in range(6)]
    run = Run("nodescaler", minutes=rows, events=events)
    said = [line for line in lines(scenario, run) if "(pod" in line]
    assert said == [
        f"00:03 | (pods worker-1, worker-2 and 8 more) | - | - | {full}",
        "00:03 | (pod worker-9) | - | - | pod didn't trigger scale-up: no room",
        f"00:04 | (pod lone) | - | - | {full}",
    ]

"""Scale-in windows: while one is open, at most its budget of nodes goes in any hour;
0 forbids; outside every window the decision is as it would be."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from nodescaler.domain.policy import NodeGroupPolicy
from nodescaler.domain.scaling.decision import Limit
from nodescaler.domain.scaling.history import History, ScaleEvent
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.domain.scaling.scale_in_windows import WindowRoom, is_open, scale_in_room
from nodescaler.errors import PolicyError
from pydantic import ValidationError

from tests.builders import (
    UNLIMITED,
    act,
    policy,
    queue_metric,
    run,
)

MONDAY_10_PARIS = datetime.fromisoformat("2026-11-23T10:00:00+01:00")  # 09:00 UTC


def with_windows(*windows: dict[str, Any]) -> NodeGroupPolicy:
    base = policy(queue_metric("load", per_node=10), behavior=UNLIMITED, max_replicas=100)
    spec = base.spec.model_dump(by_alias=True, exclude_none=True) | {
        "scaleInWindows": list(windows)
    }
    return NodeGroupPolicy.model_validate({"metadata": {"name": "web"}, "spec": spec})


BUSINESS_HOURS = {
    "name": "business-hours",
    "schedule": "0 9 * * MON-FRI",
    "durationMinutes": 600,
    "timeZone": "Europe/Paris",
    "maxNodesPerHour": "10%",
}


def load(nodes: int, at: datetime) -> dict[str, MetricReading]:
    return {"load": MetricReading(value=nodes * 10, at=at)}  # 10 a node: wants `nodes`


def test_in_business_hours_at_most_ten_percent_go_an_hour() -> None:
    windows = with_windows(BUSINESS_HOURS)
    first = run(windows, 20, load(5, MONDAY_10_PARIS), now=MONDAY_10_PARIS)
    assert first.decision.desired == 18  # 10 % of 20
    assert first.decision.limited_by == (Limit.SCALE_IN_WINDOW,)
    assert first.decision.reason.endswith(
        "scale-in window business-hours (10% nodes an hour): 2 more may go this hour"
    )
    history = act(windows, first)
    later = MONDAY_10_PARIS + timedelta(minutes=30)
    held = run(windows, 18, load(5, later), history=history, now=later)
    assert held.decision.desired == 18  # the hour's budget is spent
    next_hour = MONDAY_10_PARIS + timedelta(minutes=61)
    again = run(windows, 18, load(5, next_hour), history=act(windows, held), now=next_hour)
    assert again.decision.desired == 17  # 10 % of 18, rounded down


def test_outside_its_hours_a_window_holds_nothing_back() -> None:
    windows = with_windows(BUSINESS_HOURS)
    evening = datetime.fromisoformat("2026-11-23T19:30:00+01:00")  # closed at 19:00 local
    assert run(windows, 20, load(5, evening), now=evening).decision.desired == 5
    saturday = datetime.fromisoformat("2026-11-28T10:00:00+01:00")
    assert run(windows, 20, load(5, saturday), now=saturday).decision.desired == 5


def test_a_window_of_zero_forbids_scale_in_and_never_stops_a_scale_up() -> None:
    frozen = with_windows(BUSINESS_HOURS | {"name": "freeze", "maxNodesPerHour": 0})
    held = run(frozen, 20, load(5, MONDAY_10_PARIS), now=MONDAY_10_PARIS).decision
    assert (held.desired, held.reason.split(" | ")[-1]) == (
        20,
        "scale-in window freeze (0 nodes an hour): no scale-in",
    )
    assert run(frozen, 20, load(30, MONDAY_10_PARIS), now=MONDAY_10_PARIS).decision.desired == 30


def test_the_tightest_open_window_wins_and_earlier_removals_count() -> None:
    windows = with_windows(BUSINESS_HOURS, BUSINESS_HOURS | {"name": "one", "maxNodesPerHour": 1})
    history = History(
        scale_events=(ScaleEvent(at=MONDAY_10_PARIS - timedelta(minutes=20), change=-1),)
    )
    decision = run(windows, 20, load(5, MONDAY_10_PARIS), history=history, now=MONDAY_10_PARIS)
    assert decision.decision.desired == 20  # "one" allows 1 an hour, and 1 went 20 minutes ago


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"schedule": "0 9 * *"},
            "scaleInWindows[0].schedule: cron expression '0 9 * *': has 4 fields, expected 5",
        ),
        (
            {"timeZone": "Europe/Pariss"},
            "scaleInWindows[0].timeZone: unknown time zone",
        ),
        (
            {"maxNodesPerHour": "110%"},
            "scaleInWindows[0].maxNodesPerHour: a count of nodes",
        ),
        (
            {"durationMinutes": 0},
            "scaleInWindows[0].durationMinutes: Input should be greater than or equal to 1",
        ),
    ],
)
def test_a_bad_window_is_named_by_its_field(change: dict[str, Any], message: str) -> None:
    import yaml
    from nodescaler.domain.policy.parsing import parse_policy

    document = {
        "apiVersion": "nodescaler.io/v1alpha1",
        "kind": "NodeGroupPolicy",
        "metadata": {"name": "web"},
        "spec": {
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": [{"type": "PendingPods"}],
            "scaleInWindows": [BUSINESS_HOURS | change],
        },
    }
    with pytest.raises(PolicyError) as caught:
        parse_policy(yaml.safe_dump(document), source="web.yaml")
    (problem,) = caught.value.problems
    assert problem.startswith(f"web.yaml: spec.{message}")


# Windows at their edges: the opening minute, the last hour, a yearly or a leap-day schedule.


def nine_to_ten(**fields: object) -> object:
    window = {"schedule": "0 9 * * *", "durationMinutes": 60, "timeZone": "UTC"}
    return with_windows(window | {"maxNodesPerHour": 1} | fields).spec.scale_in_windows[0]


def at(hour: int, minute: int, second: int = 0, microsecond: int = 0) -> datetime:
    return datetime(2026, 3, 2, hour, minute, second, microsecond, tzinfo=UTC)


def test_a_window_opens_on_its_minute_and_closes_after_its_duration() -> None:
    window = nine_to_ten()
    assert is_open(window, at(9, 0, 30))  # type: ignore[arg-type]
    assert is_open(window, at(9, 59, 59))  # type: ignore[arg-type]
    for before in (at(8, 59, 30), at(8, 59, 0, 500_000), at(8, 59, 59, 999_999), at(10, 0)):
        assert not is_open(window, before), before  # type: ignore[arg-type]


def test_a_node_removed_exactly_an_hour_ago_no_longer_counts() -> None:
    window = nine_to_ten(maxNodesPerHour=2)
    now = at(9, 30)
    history = History().with_scale_event(now - timedelta(hours=1), 5, 4, keep_seconds=7200)
    room = scale_in_room([window], 4, history, now)  # type: ignore[list-item]
    assert room is not None and room.room == 2
    later = History().with_scale_event(now - timedelta(minutes=59), 5, 4, keep_seconds=7200)
    assert scale_in_room([window], 4, later, now).room == 1  # type: ignore[list-item, union-attr]


def test_a_window_of_no_percent_says_no_scale_in() -> None:
    window = nine_to_ten(maxNodesPerHour="0%")
    assert WindowRoom(window, 0).describe().endswith(": no scale-in")  # type: ignore[arg-type]


def test_a_window_opening_once_a_year_at_new_year_fires_every_year() -> None:
    window = nine_to_ten(schedule="0 0 1 1 *")
    assert window.schedule == "0 0 1 1 *"  # type: ignore[attr-defined]


def test_a_window_opening_only_in_leap_years_is_refused_saying_why() -> None:
    with pytest.raises(ValidationError) as raised:
        nine_to_ten(schedule="0 0 29 2 *")
    assert (
        "cron expression '0 0 29 2 *' does not fire every year (a date that does not exist, "
        "or only in leap years): its window would never open or never close"
    ) in str(raised.value)

"""Small rules at their edges: opt-in tags and allowed groups, scale-in windows' opening
minute and last hour, and one metric's recommendation with nodes not yet measured."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nodescaler.domain.ahead.cron import cron_problem
from nodescaler.domain.cluster.reservation import reservation
from nodescaler.domain.groups.optin import AllowedGroups, TagNames, read_opt_in
from nodescaler.domain.policy import ReservationResource
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.proportional import Tolerances, recommend
from nodescaler.domain.scaling.scale_in_windows import WindowRoom, is_open, scale_in_room
from pydantic import ValidationError

from tests.builders import metric, reservation_metric, value_metric
from tests.unit.test_buffer import buffer
from tests.unit.test_reservation import nodes, pods_on
from tests.unit.test_windows import with_windows

DEFAULT = Tolerances(up=0.1, down=0.1)

# --- opt-in --------------------------------------------------------------------------------


def test_a_dry_run_tag_of_false_acts_without_a_problem() -> None:
    tags = {"nodescaler/policy": "web", "nodescaler/dry-run": "False"}
    opt_in = read_opt_in("ng-1", tags, TagNames())
    assert (opt_in.dry_run, opt_in.problems) == (False, ())


def test_an_allowed_prefix_is_the_whole_text_before_its_star() -> None:
    allowed = AllowedGroups(("web-*", "batch"))
    assert [allowed.allows(g) for g in ("web-1", "webapp", "w", "batch", "batch-2")] == [
        True,
        False,
        False,
        True,
        False,
    ]
    assert allowed.refusal("api") == (
        "node group api: opted in, but not in allowedGroups (web-*, batch); it is never resized"
    )


# --- scale-in windows ----------------------------------------------------------------------


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


# --- one metric's recommendation ------------------------------------------------------------


def test_a_value_with_nothing_in_service_sizes_for_the_value_alone() -> None:
    made = recommend(metric(value_metric("load", 100)), 250, 3, DEFAULT, ready=0)
    assert (made.replicas, made.usage_ratio) == (3, 2.5)


def test_a_value_scales_the_nodes_in_service_not_the_size() -> None:
    made = recommend(metric(value_metric("load", 100)), 300, 1, DEFAULT, ready=2)
    assert made.replicas == 6


def test_a_utilization_measured_over_more_nodes_than_ready_frees_no_extra_room() -> None:
    cpu = metric(reservation_metric("cpu", 60))
    made = recommend(cpu, 30, 4, DEFAULT, ready=4, measured=5)  # half the target on 5
    assert made.replicas == 3


# --- cron expressions ----------------------------------------------------------------------


def test_a_cron_problem_names_the_first_field_truly_wrong() -> None:
    assert cron_problem("*/1 25 * * *") == "hour 25 out of range (0-23)"  # a step of 1 is fine
    assert cron_problem("59 24 * * *") == "hour 24 out of range (0-23)"  # 59 is a minute
    assert cron_problem("1-2-3 * * * *") == "minute '2-3' is not a number (0-59)"


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


def test_pods_left_out_of_a_reservation_do_not_end_the_count() -> None:
    first_out = [
        *pods_on("other-0", 1),
        *pods_on("ng-0", 1, daemon_set=True),
        *pods_on("ng-0", 3),
    ]
    counted = reservation(
        "ng", nodes(1), first_out, ReservationResource.CPU, include_daemon_sets=False
    )
    assert counted.pods == 3


def test_a_buffer_of_extended_resources_names_them() -> None:
    gpus = buffer(2, **{"requests": {"cpu": "1", "nvidia.com/gpu": "1"}})
    assert gpus.describe() == "room for 2 × 1 cpu/1 nvidia.com/gpu"

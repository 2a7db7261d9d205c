"""Boundaries of small rules: exactly at a limit, a clock's edge or a count's edge, each
is on the side its docstring says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodescaler.domain.ahead.scheduled_capacity import scheduled_replicas
from nodescaler.domain.groups.node_group import ScalingActivity, unconfirmed_launch_failure
from nodescaler.domain.outside_text import MAX_PROBLEMS, bounded_problems, outside
from nodescaler.domain.scale_down.pod_rules import deletion_deadline
from nodescaler.domain.scale_down.termination_policy import QUIET, Wait
from nodescaler.domain.scale_up.backoff import BackoffRules, Provisioning, provision_check
from nodescaler.domain.scaling.history import History
from nodescaler.domain.scaling.limits import ClusterLimits, GroupUsage, ceiling
from nodescaler.domain.token_origins import unbound_token

from tests.unit.test_schedule import OFFICE
from tests.unit.test_token_origins import source

T = datetime(2026, 3, 2, 12, tzinfo=UTC)


def test_a_text_cut_for_length_says_so_even_when_what_is_left_is_short() -> None:
    text = "\x1b" * 1000 + "tail"  # the first 800 characters clean to nothing
    assert outside(text) == "… (cut, 1,004 characters)"


def test_a_long_problem_is_kept_to_two_thousand_characters() -> None:
    (kept,) = bounded_problems(["p" * 1500])
    assert kept == "p" * 1500


def test_problems_beyond_the_last_kept_are_counted_from_one() -> None:
    assert bounded_problems(["x"] * MAX_PROBLEMS) == ("x",) * MAX_PROBLEMS
    one_more = bounded_problems(["x"] * (MAX_PROBLEMS + 1))
    assert one_more == (*("x",) * MAX_PROBLEMS, "… and 1 more problems")


def test_one_node_added_counts_as_a_scale_up() -> None:
    history = History().with_scale_event(T, 3, 4, keep_seconds=600)
    later = T + timedelta(seconds=60)
    assert history.replicas_changed_within(600, later, up=True) == 1
    assert history.replicas_changed_within(600, later, up=False) == 0


def test_a_recommendation_exactly_a_window_old_is_still_kept() -> None:
    history = History().with_recommendation(T, 5, 300)
    later = history.with_recommendation(T + timedelta(seconds=300), 3, 300)
    assert [r.replicas for r in later.recommendations] == [5, 3]


def test_an_ask_exactly_a_quiet_period_after_the_last_continues_the_wait() -> None:
    wait = Wait(T, T)
    assert wait.asked(T + QUIET) == Wait(T, T + QUIET)
    assert wait.asked(T + QUIET + timedelta(seconds=1)) == Wait(
        T + QUIET + timedelta(seconds=1), T + QUIET + timedelta(seconds=1)
    )


def test_an_ask_at_the_first_instant_continues_and_one_before_it_starts_afresh() -> None:
    wait = Wait(T, T + timedelta(minutes=1))
    assert wait.asked(T) == Wait(T, T)
    before = T - timedelta(seconds=1)
    assert wait.asked(before) == Wait(before, before)


def test_a_scale_up_exactly_at_its_provision_time_is_not_yet_overdue() -> None:
    rules = BackoffRules()
    flight = Provisioning(since=T, target=5)
    at_limit = T + rules.max_provision_time
    assert provision_check(flight, desired=5, in_service=3, now=at_limit, rules=rules) == (
        flight,
        None,
    )
    late = at_limit + timedelta(seconds=1)
    assert provision_check(flight, desired=5, in_service=3, now=late, rules=rules)[1] == (
        "2 of the instances asked for at 12:00:00Z were not ready after 15 minutes"
    )


def test_a_launch_failure_exactly_an_hour_old_is_still_confirmed() -> None:
    failed = ScalingActivity("a-1", "Failed", launch=True, started=T)
    assert unconfirmed_launch_failure("ng", "a-1", failed, T + timedelta(hours=1)) is None


def test_a_pod_deleted_without_a_grace_period_gets_the_default() -> None:
    assert deletion_deadline(T, None) == T + timedelta(seconds=60)  # 30 s grace + 30 s


def test_a_token_deployed_for_two_other_servers_names_both() -> None:
    allowed = frozenset({("prom/token", "https://a:443"), ("prom/token", "https://b:443")})
    assert unbound_token(source("https://evil"), allowed) == (
        "bearer token secret prom/token is deployed for https://a:443 and https://b:443, not "
        "for https://evil:443: refused, the token is neither read nor sent"
    )


def test_a_cluster_limit_leaves_room_for_whole_nodes_only() -> None:
    group = GroupUsage(nodes=0, vcpus_per_node=4, memory_mib_per_node=2050)
    by_cpu = ceiling(ClusterLimits(max_vcpus=10), group, [])
    by_memory = ceiling(ClusterLimits(max_memory_gib=10), group, [])
    assert by_cpu is not None and (by_cpu.nodes, by_cpu.limit) == (2, "maximum of 10 vCPUs")
    assert by_memory is not None and by_memory.nodes == 4  # 10,240 MiB: 4.99 nodes


def test_a_schedule_opens_on_its_minute_not_its_second() -> None:
    for before in (
        datetime(2026, 3, 2, 7, 29, 30, tzinfo=UTC),
        datetime(2026, 3, 2, 7, 29, 0, 500_000, tzinfo=UTC),
    ):
        assert scheduled_replicas(OFFICE, before) == (
            2,
            "no schedule entry is open: defaultReplicas",
        )

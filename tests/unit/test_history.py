"""A group's history (`domain.scaling.history`) at its edges: what counts as a scale-up,
and a recommendation exactly a window old."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodescaler.domain.scaling.history import MAX_ENTRIES, MAX_UNNEEDED, History

T = datetime(2026, 3, 2, 12, tzinfo=UTC)


def test_one_node_added_counts_as_a_scale_up() -> None:
    history = History().with_scale_event(T, 3, 4, keep_seconds=600)
    later = T + timedelta(seconds=60)
    assert history.replicas_changed_within(600, later, up=True) == 1
    assert history.replicas_changed_within(600, later, up=False) == 0


def test_a_recommendation_exactly_a_window_old_is_still_kept() -> None:
    history = History().with_recommendation(T, 5, 300)
    later = history.with_recommendation(T + timedelta(seconds=300), 3, 300)
    assert [r.replicas for r in later.recommendations] == [5, 3]


def test_a_node_unneeded_at_every_evaluation_keeps_its_time_and_one_found_needed_starts_again() -> (
    None
):
    history = History().with_unneeded(T, ["a", "b"], trusted_seconds=600)
    later = T + timedelta(seconds=300)
    history = history.with_unneeded(later, ["a", "c"], trusted_seconds=600)  # b needed; c new
    assert [(u.node, u.since) for u in history.unneeded] == [("a", T), ("c", later)]
    again = history.with_unneeded(later + timedelta(seconds=1), ["a", "b", "c"], 600)
    assert [u.since for u in again.unneeded] == [T, later + timedelta(seconds=1), later]
    # the cluster unread (no node named): every one starts again
    assert history.with_unneeded(later, [], trusted_seconds=600).unneeded == ()


def test_after_a_gap_longer_than_trusted_every_node_starts_again() -> None:
    history = History().with_unneeded(T, ["a"], trusted_seconds=600)
    within = history.with_unneeded(T + timedelta(seconds=600), ["a"], trusted_seconds=600)
    assert within.unneeded[0].since == T and within.unneeded_read == T + timedelta(seconds=600)
    gap = T + timedelta(seconds=601)
    assert history.with_unneeded(gap, ["a"], trusted_seconds=600).unneeded[0].since == gap
    twice = within.with_unneeded(T + timedelta(seconds=600), ["a"], trusted_seconds=600)
    assert twice.unneeded[0].since == T  # read twice at one time (two messages): kept
    back = T - timedelta(seconds=1)  # a clock gone back: not trusted either
    assert history.with_unneeded(back, ["a"], trusted_seconds=600).unneeded[0].since == back


def test_no_more_than_max_unneeded_nodes_are_timed() -> None:
    names = [f"ip-10-0-{i // 250}-{i % 250}" for i in range(MAX_UNNEEDED + 5)]
    history = History().with_unneeded(T, names, trusted_seconds=600)
    assert [u.node for u in history.unneeded] == names[:MAX_UNNEEDED]
    # the item stays small: 253-character names, every one timed
    long = History().with_unneeded(T, [f"{i:03}" + "x" * 250 for i in range(300)], 600)
    assert len(long.model_dump_json()) < 80_000


def test_a_node_unneeded_for_exactly_the_window_counts_and_a_second_less_does_not() -> None:
    history = (
        History()
        .with_unneeded(T, ["a", "b"], trusted_seconds=600)
        .with_unneeded(T + timedelta(seconds=60), ["a", "b", "c"], trusted_seconds=600)
    )
    at_window = T + timedelta(seconds=600)
    assert history.unneeded_for(600, at_window, {"a", "b", "c"}) == 2
    assert history.unneeded_for(600, at_window - timedelta(seconds=1), {"a", "b", "c"}) == 0
    assert history.unneeded_for(600, at_window, {"a"}) == 1  # only the nodes asked about
    assert history.unneeded_for(0, T + timedelta(seconds=60), {"c"}) == 1


def test_a_history_full_to_every_bound_fits_a_dynamodb_item() -> None:
    # an evaluation every few seconds (the fast path), each count new: nothing to fold
    history = History()
    for i in range(MAX_ENTRIES + 50):
        at = T + timedelta(seconds=2 * i)
        history = history.with_recommendation(at, 1000 + i, keep_seconds=3600)
        history = history.with_need(at, 1000 + i, keep_seconds=3600)
        history = history.with_scale_event(at, 1000 + i, 1001 + i, keep_seconds=3600)
    assert len(history.recommendations) == len(history.needs) == MAX_ENTRIES
    assert len(history.scale_events) == MAX_ENTRIES
    names = [f"{i:03}" + "x" * 250 for i in range(MAX_UNNEEDED)]
    full = history.with_unneeded(T, names, trusted_seconds=3600)
    assert len(full.model_dump_json()) < 300_000  # DynamoDB allows 400 KB an item


def test_past_its_bound_the_oldest_recommendations_fold_into_their_highest() -> None:
    # Given more changes within one window than the history keeps: a high count first,
    # then counts jittering below it (no run to fold)
    history = History().with_recommendation(T, 40, keep_seconds=3600)
    for i in range(1, MAX_ENTRIES + 5):
        at = T + timedelta(seconds=2 * i)
        history = history.with_recommendation(at, 10 + i % 2 + (i // 2) % 3, keep_seconds=3600)
    kept = history.recommendations
    # Then the history is bounded, and its oldest entry carries the 40 a scale-in waits for,
    # at the latest time of those folded into it; the newest are as they were
    assert len(kept) == MAX_ENTRIES
    assert kept[0].replicas == 40 and kept[0].at == T + timedelta(seconds=2 * 5)
    assert max(r.replicas for r in kept[1:]) < 40
    assert kept[-1].at == T + timedelta(seconds=2 * (MAX_ENTRIES + 4))

"""A group's history (`domain.scaling.history`) at its edges: what counts as a scale-up,
and a recommendation exactly a window old."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nodescaler.domain.scaling.history import History

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

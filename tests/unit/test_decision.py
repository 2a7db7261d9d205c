"""A decision made fit to store at the edges of its size: exactly at the limit, cut once
(texts to 2,000 characters, 20 waiting pods), cut twice (texts to 200, no pod named); and
a held decision saying which way it would have gone."""

from __future__ import annotations

from nodescaler.domain.scaling.decision import Decision, Limit, fit_to_store

from tests.builders import EXACT, policy, queue_metric, readings, run


def decision(reason: str = "r", waiting: int = 0) -> Decision:
    made = run(policy(queue_metric("jobs", per_node=4), behavior=EXACT), 5, readings(jobs=40))
    metric = made.decision.metrics[0]
    pods = {f"pod-{i}": "no room" for i in range(waiting)}
    return made.decision.model_copy(
        update={"reason": reason, "metrics": (metric.model_copy(update={"waiting": pods}),)}
    )


def size(made: Decision) -> int:
    return len(made.model_dump_json().encode())


def test_a_decision_exactly_at_its_limit_is_stored_as_it_is() -> None:
    made = decision()
    assert fit_to_store(made, size(made)) is made


def test_cut_once_its_texts_keep_2000_characters_and_twenty_one_pods_name_twenty() -> None:
    # Given a 5,000-character reason and 21 waiting pods, over a limit the first cut meets
    made = decision("r" * 5_000, waiting=21)
    # When made fit to store
    stored = fit_to_store(made, 4_000)
    # Then the reason keeps 2,000 characters, 20 pods are named with why, and the 21st counted
    assert stored.reason == "r" * 2_000 + "… (cut, 5,000 characters)"
    waiting = stored.metrics[0].waiting
    assert len(waiting) == 21 and waiting["pod-0"] == "no room"
    assert waiting["…"] == "1 more pods (the decision was cut)"


def test_cut_once_twenty_waiting_pods_are_all_named_with_no_marker() -> None:
    stored = fit_to_store(decision("r" * 5_000, waiting=20), 4_000)
    assert "…" not in stored.metrics[0].waiting and len(stored.metrics[0].waiting) == 20


def test_cut_once_a_decision_with_no_pod_waiting_names_none() -> None:
    stored = fit_to_store(decision("r" * 5_000), 3_000)
    assert stored.metrics[0].waiting == {} and stored.reason.endswith("(cut, 5,000 characters)")


def test_cut_twice_its_texts_keep_200_characters_and_only_the_pods_count() -> None:
    # Given a reason the first cut still leaves over a 2,000-byte limit
    made = decision("r" * 5_000, waiting=50)
    # When made fit to store
    stored = fit_to_store(made, 2_000)
    # Then the reason keeps 200 characters and no pod is named, only counted
    assert stored.reason == "r" * 200 + "… (cut, 5,000 characters)"
    assert stored.metrics[0].waiting == {"…": "50 more pods (the decision was cut)"}
    assert (stored.current, stored.desired) == (made.current, made.desired)


def test_a_held_decision_says_which_way_it_would_have_gone() -> None:
    up = decision().model_copy(update={"current": 5, "desired": 6, "reason": "queue"})
    down = up.model_copy(update={"desired": 4})
    assert up.held("paused", Limit.PAUSED).reason == "paused: would scale out 5 → 6 | queue"
    assert down.held("paused", Limit.PAUSED).reason == "paused: would scale in 5 → 4 | queue"

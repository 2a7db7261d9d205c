"""Text from outside, and the decisions quoting it, bounded before they are stored, logged
or printed: one line, no control characters, a marker where it was cut."""

from __future__ import annotations

import json

from nodescaler.domain.outside_text import MAX_PROBLEMS, bounded_problems, outside
from nodescaler.domain.policy.versions import StoredPolicy
from nodescaler.domain.scaling.decision import MAX_DECISION_BYTES, fit_to_store
from nodescaler.domain.scaling.readings import MetricUnavailable
from nodescaler.service.stored_policies import validated

from tests.builders import EXACT, policy, policy_document, queue_metric, readings, run

ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m\r\u202e"


def test_given_terminal_escapes_then_outside_text_keeps_the_words_on_one_line() -> None:
    assert outside(f"queue{ESCAPES}full\nof jobs") == "queue [2J ]0;owned 31m full of jobs"


def test_given_600_kb_then_outside_text_keeps_200_characters_and_says_how_long_it_was() -> None:
    assert outside("x" * 600_000) == "x" * 200 + "… (cut, 600,000 characters)"
    assert outside("x" * 200) == "x" * 200


def test_given_a_producers_reason_with_escapes_then_the_reading_holds_none() -> None:
    # Given any producer's reason quoting its source (CloudWatch, SQS, Kubernetes, Prometheus)
    reading = MetricUnavailable(reason=f"HTTP 503: {ESCAPES}{'y' * 600_000}")
    # Then it is one bounded line
    assert reading.reason.isprintable() and len(reading.reason) < 2_100


def test_given_thousands_of_problems_then_the_group_keeps_twenty_and_counts_the_rest() -> None:
    kept = bounded_problems(f"problem {i}: {'z' * 10_000}" for i in range(5_000))
    assert len(kept) == MAX_PROBLEMS + 1 and kept[-1] == "… and 4980 more problems"
    assert all(len(p) < 2_100 for p in kept)


def test_given_a_decision_over_its_size_then_it_is_cut_with_markers_and_keeps_its_numbers() -> None:
    # Given a decision whose reason and metric detail are 600 KB, and 50,000 pods waiting
    decision = run(policy(queue_metric("jobs", per_node=4), behavior=EXACT), 5, readings(jobs=40))
    metric = decision.decision.metrics[0]
    huge = decision.decision.model_copy(
        update={
            "reason": "r" * 600_000,
            "metrics": (
                metric.model_copy(
                    update={
                        "detail": "d" * 600_000,
                        "waiting": {f"pod-{i}": "no room" for i in range(50_000)},
                    }
                ),
            ),
        }
    )
    # When it is made fit to store
    stored = fit_to_store(huge)
    # Then it is under the limit, says where it was cut, and decides the same
    assert len(stored.model_dump_json().encode()) <= MAX_DECISION_BYTES
    assert stored.reason.endswith("… (cut, 600,000 characters)")
    assert stored.metrics[0].detail.endswith("… (cut, 600,000 characters)")
    assert stored.metrics[0].waiting["…"] == "49980 more pods (the decision was cut)"
    assert (stored.desired, stored.current, stored.metrics[0].value) == (10, 5, 40)
    assert json.loads(stored.model_dump_json())["limited_by"] == list(huge.limited_by)


def test_given_a_decision_within_its_size_then_it_is_stored_as_it_is() -> None:
    decision = run(policy(queue_metric("jobs", per_node=4)), 5, readings(jobs=40)).decision
    assert fit_to_store(decision) is decision


def test_given_a_stored_document_over_its_limit_then_the_functions_refuse_it_unparsed() -> None:
    padded = policy_document("gpu", queue_metric("jobs", 4), max_replicas=5) + "#\n" * 40_000
    version = validated(StoredPolicy("gpu", 3, padded))
    assert version.policy is None
    assert version.problem == (
        f"stored policy gpu v3 is invalid: {len(padded):,} characters, over 64,000"
    )


def test_given_a_stored_policy_with_a_number_of_5000_digits_then_it_is_named_not_a_crash() -> None:
    # Given a stored document (or a file) whose target is a number Python will not convert
    document = policy_document("gpu").replace("maxReplicas: 1000", "maxReplicas: " + "9" * 5000)
    assert "9" * 5000 in document
    # When the functions read it
    version = validated(StoredPolicy("gpu", 3, document))
    # Then it is refused by the line and column of the number, not raised, and bounded
    assert version.policy is None
    assert version.problem == (
        "stored policy gpu v3 is invalid: line 7, column 16: "
        "a number of 5,000 characters, too long to read"
    )


# At the boundaries: exactly at a limit, a clock's edge or a count's edge, each test on
# the side its name says.


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

"""Policy documents at the parser's edges: nesting, keys, units, several documents in a
file, and the names a broken document still declares."""

from __future__ import annotations

from pathlib import Path

import pytest
from nodescaler.domain.policy.parsing import (
    declared_name,
    did_you_mean,
    index_by_name,
    parse_policies,
    parse_policy,
)
from nodescaler.errors import PolicyError, SettingsError

BASE = "metadata: {name: a}\nspec:\n  minReplicas: 0\n  maxReplicas: 3\n  metrics: [{type: PendingPods}]\n"


def problems(text: str, source: str = "p.yaml") -> tuple[str, ...]:
    with pytest.raises(PolicyError) as raised:
        parse_policy(text, source)
    assert raised.value.source == source
    return raised.value.problems


def test_nesting_after_a_closed_mapping_is_still_counted_from_where_it_is() -> None:
    # depth 3 at `x`, an empty mapping closed beside it, then 30 lists: 33 deep
    text = BASE + "  x: {b: {}, c: " + "[" * 30 + "]" * 30 + "}\n"
    assert problems(text) == ("p.yaml: line 6, column 46: nested more than 32 levels deep",)


def test_many_collections_side_by_side_are_not_nesting() -> None:
    text = BASE + "  x: [" + ", ".join(["{}"] * 40) + "]\n"
    assert problems(text) == ("p.yaml: spec.x: unknown field",)


def test_a_key_that_is_a_list_is_refused_where_it_is() -> None:
    assert problems("metadata:\n  [a, b]: 1\n") == (
        "p.yaml: line 2, column 3: a key must be a plain name, not a list or mapping",
    )


def test_a_long_key_given_twice_is_named_whole() -> None:
    key = "k" * 300
    (problem,) = problems(f"{key}: 1\n{key}: 2\n")
    assert problem == f"p.yaml: line 2, column 1: key '{key}' is given twice"


@pytest.mark.parametrize(
    ("field", "says"),
    [
        (
            "  behavior: {scaleDown: {stabilizationWindowSeconds: abc}}\n",
            "spec.behavior.scaleDown.stabilizationWindowSeconds: should be a whole number of "
            "seconds (120 for two minutes); got 'abc'",
        ),
        (
            "  behavior: {scaleDown: {stabilizationWindowSeconds: 1.5}}\n",
            "spec.behavior.scaleDown.stabilizationWindowSeconds: should be a whole number of "
            "seconds (120 for two minutes); got 1.5",
        ),
        (
            "  scaleInWindows: [{schedule: '0 9 * * *', durationMinutes: 1.5, "
            "maxNodesPerHour: 1}]\n",
            "spec.scaleInWindows[0].durationMinutes: should be a whole number of minutes; got 1.5",
        ),
    ],
)
def test_a_duration_that_is_not_a_whole_number_says_its_unit(field: str, says: str) -> None:
    assert problems(BASE + field) == (f"p.yaml: {says}",)


def test_a_list_too_short_or_too_long_says_how_many_in_words() -> None:
    empty = BASE.replace("metrics: [{type: PendingPods}]", "metrics: []")
    assert problems(empty) == ("p.yaml: spec.metrics: should list at least 1 item; got 0",)
    buffer = "{pods: 1, requests: {cpu: '1'}}"
    nine = f"pendingPods: {{buffer: [{', '.join([buffer] * 9)}]}}"
    many = BASE.replace("{type: PendingPods}", f"{{type: PendingPods, {nine}}}")
    assert problems(many) == (
        "p.yaml: spec.metrics[0].pendingPods.buffer: should list at most 8 items; got 9",
    )


def test_a_name_only_loosely_like_a_field_is_no_suggestion() -> None:
    assert did_you_mean("maxRep", ["maxReplicas"]) == ""
    assert did_you_mean("maxRepl", ["maxReplicas"]) == " (did you mean maxReplicas?)"
    assert did_you_mean(None, ["maxReplicas"]) == ""


def test_a_settings_typo_is_matched_against_the_settings_not_a_policys_fields() -> None:
    from infra.settings import load_settings

    with pytest.raises(
        SettingsError, match=r"clusterNme: unknown field \(did you mean clusterName"
    ):
        load_settings({"clusterNme": "prod"}, Path("."))


def test_a_problem_in_a_later_document_keeps_the_files_line_number() -> None:
    second = BASE.replace("name: a", "name: b").replace(
        "minReplicas: 0", "minReplicas: 0\n  minReplicas: 1"
    )
    with pytest.raises(PolicyError) as raised:
        parse_policies("\n" + BASE + "---\n" + second, "f.yaml")
    assert raised.value.source == "f.yaml"
    assert raised.value.problems == (
        "f.yaml (document 2): line 11, column 3: key 'minReplicas' is given twice",
    )


def test_a_document_that_cannot_be_read_is_reported_not_dropped() -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policies(BASE + "---\n!custom 3\n", "f.yaml")
    assert raised.value.problems == (
        "f.yaml (document 2): line 7, column 1: could not determine a constructor for the "
        "tag '!custom'",
    )


def test_a_documents_text_is_kept_from_its_first_line_indent_and_all() -> None:
    text = "\n\n  # the web group\n" + BASE
    ((source, policy, kept),) = parse_policies(text, "f.yaml")
    assert (source, policy.name, kept) == ("f.yaml", "a", "  # the web group\n" + BASE)


def test_policies_are_indexed_by_name_and_a_name_used_twice_is_refused() -> None:
    a, b = parse_policy(BASE, "a.yaml"), parse_policy(BASE.replace("name: a", "name: b"), "b.yaml")
    assert index_by_name([("a.yaml", a), ("b.yaml", b)]) == {"a": a, "b": b}
    with pytest.raises(PolicyError) as raised:
        index_by_name([("a.yaml", a), ("c.yaml", a)])
    assert (raised.value.source, raised.value.problems) == (
        "policies",
        ("c.yaml: metadata.name: policy 'a' is already defined in a.yaml",),
    )


@pytest.mark.parametrize(
    "text",
    ["- a\n", "metadata: [a]\n", "metadata: {name: Bad_Name}\n", "metadata: {name: 5}\n"],
)
def test_a_document_without_a_usable_name_declares_none(text: str) -> None:
    assert declared_name(text) is None


def test_a_broken_document_still_declares_its_name() -> None:
    assert declared_name("metadata: {name: web}\nspec: [\n") is None  # not YAML at all
    assert declared_name("metadata: {name: web}\nspec: 3\n") == "web"

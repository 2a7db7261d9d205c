"""Which constructs Go's RE2 lacks a group-name pattern is found to use: only where one is a
construct, never inside a character class (`]` first, after `^` or escaped is a member)
or behind an escape. github.com/google/re2/wiki/Syntax; CA's priority expander compiles
its patterns with Go's regexp (expander/priority/priority.go)."""

from __future__ import annotations

import pytest
from nodescaler.domain.groups.name_patterns import matches, not_in_re2

# (case, pattern, what the refusal names)
FOUND_AFTER_A_CLASS_OR_ESCAPE = [
    ("after a class", "[a](?=x)", "a lookaround"),
    ("after a longer class", "[abc](?=x)", "a lookaround"),
    ("after a class of a closing bracket alone", "[]](?=x)", "a lookaround"),
    ("after a negated class of a closing bracket alone", "[^]](?=x)", "a lookaround"),
    ("after a class of an escaped closing bracket", r"[\]](?=x)", "a lookaround"),
    ("after a class later in the name", "ng-[ab](?=x)", "a lookaround"),
    ("after a class of an opening bracket", "[[](?=x)]", "a lookaround"),
    ("after an escape", r"\.(?=x)", "a lookaround"),
    ("a backreference followed by more", r"(ng)\1-x", "a backreference"),
    ("end of string after a class", r"ng-[ab]\Z", r"\Z"),
]


@pytest.mark.parametrize(
    ("pattern", "lacking"),
    [c[1:] for c in FOUND_AFTER_A_CLASS_OR_ESCAPE],
    ids=[c[0].replace(" ", "-") for c in FOUND_AFTER_A_CLASS_OR_ESCAPE],
)
def test_given_a_construct_re2_lacks_after_a_class_or_escape_then_it_is_named(
    pattern: str, lacking: str
) -> None:
    # Given a pattern whose construct RE2 lacks follows a character class or an escape
    # When it is checked
    found = not_in_re2(pattern)

    # Then the construct is named
    assert found is not None and found.startswith(lacking)


# Classes whose members only look like a construct: RE2 reads them as Python does.
INSIDE_A_CLASS = [
    ("a closing bracket first is a member", "[](?=]"),
    ("a closing bracket first in a class later in the name", "x[](?=]"),
    ("a closing bracket first after a caret is a member", "[^](?=]"),
    ("an escaped closing bracket is a member", r"[\](?=]"),
    ("a member before the construct", "[a(?=]"),
]


@pytest.mark.parametrize(
    "pattern", [c[1] for c in INSIDE_A_CLASS], ids=[c[0].replace(" ", "-") for c in INSIDE_A_CLASS]
)
def test_given_what_looks_like_a_construct_inside_a_class_then_nothing_is_refused(
    pattern: str,
) -> None:
    # Given a pattern whose lookalike of a lookaround is a character class's members
    # When it is checked
    # Then nothing RE2 lacks is found: the pattern means the same in Cluster Autoscaler
    assert not_in_re2(pattern) is None


def test_given_a_digit_class_then_only_ascii_digits_match_as_in_re2() -> None:
    # Given \d, which RE2 reads as [0-9] (github.com/google/re2/wiki/Syntax)
    # When a group's name has an Arabic-Indic three where a digit is looked for
    # Then it does not match, as it would not in Cluster Autoscaler; an ASCII 3 does
    assert not matches(r"ng-\d", "ng-\u0663")
    assert matches(r"ng-\d", "ng-3")

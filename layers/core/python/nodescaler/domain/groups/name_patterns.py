"""Group-name patterns, with the meaning Cluster Autoscaler gives them: Go (RE2) regular
expressions, found anywhere in the name. Python's extras that RE2 lacks are named, so that
validation refuses them rather than give a pattern a meaning CA's could not have.
"""

from __future__ import annotations

import re


def matches(pattern: str, group: str) -> bool:
    """Whether a group-name pattern matches the group as Cluster Autoscaler's priority
    expander does: a Go (RE2) regular expression found anywhere in the name, unanchored
    (`FindStringIndex` in expander/priority/priority.go). RE2's \\d, \\w, \\s and \\b
    are ASCII, hence re.ASCII."""
    return re.search(pattern, group, re.ASCII) is not None


# Python constructs Go's RE2 does not have (github.com/google/re2/wiki/Syntax): a pattern
# that uses one would mean something here that it cannot mean in Cluster Autoscaler.
_NOT_IN_RE2 = (
    (re.compile(r"\(\?<?[=!]"), "a lookaround ((?=, (?!, (?<=, (?<!)"),
    (re.compile(r"\\[1-9]|\(\?P="), "a backreference (\\1, (?P=name))"),
    (re.compile(r"\(\?>"), "an atomic group ((?>...))"),
    (re.compile(r"\(\?\("), "a conditional group ((?(1)...))"),
    (re.compile(r"(?:[*+?]|\{\d*,?\d*\})\+"), "a possessive quantifier (*+, ++, ?+)"),
    (re.compile(r"\\Z"), "\\Z (RE2's is \\z; use $)"),
    (re.compile(r"\(\?[aiLmsux-]*[aLux][aiLmsux-]*[:)]"), "a flag RE2 lacks (a, L, u, x)"),
)


def _skeleton(pattern: str) -> str:
    """The pattern with character classes as `C` and escapes as `E` (but backreferences
    and \\Z), so a construct is found only where it is one."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            pair = pattern[i : i + 2]
            out.append(pair if re.fullmatch(r"\\[1-9Z]", pair) else "E")
            i += 2
        elif char == "[":
            i = _class_end(pattern, i)
            out.append("C")
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class opened at `start` (`]` first is a member)."""
    i = start + 1
    i += pattern[i : i + 1] == "^"
    i += pattern[i : i + 1] == "]"
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def not_in_re2(pattern: str) -> str | None:
    """What in a (compilable) pattern Go's RE2 lacks, named; None if nothing."""
    skeleton = _skeleton(pattern)
    return next((name for found, name in _NOT_IN_RE2 if found.search(skeleton)), None)

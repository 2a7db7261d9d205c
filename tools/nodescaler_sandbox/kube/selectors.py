"""Kubernetes label and field selectors, as the API server reads them from a query string.

Labels: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a` (exists), `!a`.
Fields: `path=value`, `path==value`, `path!=value` on dotted paths (`spec.nodeName`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_SET = re.compile(r"^\s*(!?)([\w./-]+)\s*(?:\s(in|notin)\s*\(([^)]*)\))?\s*$")
_EQUALITY = re.compile(r"^\s*([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)\s*$")


class SelectorError(ValueError):
    """An unparsable selector; the API server answers 400."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: frozenset[str] = frozenset()

    def matches(self, value: str | None) -> bool:
        match self.operator:
            case "=" | "in":
                return value in self.values
            case "!=" | "notin":
                return value not in self.values
            case "exists":
                return value is not None
            case _:
                return value is None


def _split(selector: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _equality(part: str) -> Requirement | None:
    if match := _EQUALITY.match(part):
        key, op, value = match.groups()
        return Requirement(key, "!=" if op == "!=" else "=", frozenset([value]))
    return None


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    @classmethod
    def parse(cls, selector: str) -> LabelSelector:
        requirements = []
        for part in _split(selector):
            if (requirement := _equality(part)) is None:
                match = _SET.match(part)
                if not match:
                    raise SelectorError(f"unable to parse requirement: {part!r}")
                negated, key, op, values = match.groups()
                if op:
                    allowed = frozenset(v.strip() for v in values.split(",") if v.strip())
                    requirement = Requirement(key, op, allowed)
                else:
                    requirement = Requirement(key, "!exists" if negated else "exists")
            requirements.append(requirement)
        return cls(tuple(requirements))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels.get(r.key)) for r in self.requirements)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for key in path.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[Requirement, ...]

    @classmethod
    def parse(cls, selector: str) -> FieldSelector:
        requirements = []
        for part in _split(selector):
            if (requirement := _equality(part)) is None:
                raise SelectorError(f"invalid field selector: {part!r}")
            requirements.append(requirement)
        return cls(tuple(requirements))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(field_value(obj, r.key)) for r in self.requirements)

"""Hypothesis strategies for hostile input: JSON-ish documents mutated the ways a payload goes
wrong (a field missing, added or of the wrong type; NaN, ±inf, negative, huge numbers; empty,
odd and oversize strings), and odd readings for metric values."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

# What EventBridge, SQS and tags can carry: any character but lone surrogates and controls
# (tab and newlines aside).
TEXT = st.characters(exclude_categories=("Cs", "Cc"), include_characters="\t\n\r")

ODD_NUMBERS = st.sampled_from(
    [float("nan"), float("inf"), float("-inf"), -1, -1e308, 0, 5e-324, 2**31, 2**63, 10**30, 1e308]
)
ODD_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "true",
        "null",
        "NaN",
        "-1",
        "1e400",
        "2026-11-23T09:00:00",  # a time without its zone
        "9999-12-31T23:59:59Z",
        "Europe",  # a time zone's folder, not a zone
        "../etc/passwd",
        "i-0",
        "é中😀",
    ]
)
OVERSIZE = st.sampled_from([256, 1025, 65_536]).map(lambda length: "x" * length)

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    ODD_NUMBERS,
    ODD_STRINGS,
    OVERSIZE,
    st.text(TEXT, max_size=40),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(TEXT, max_size=8), st.integers(), max_size=2),
)

NOTHING: st.SearchStrategy[Any] = st.nothing()
NAMES = st.text(TEXT, max_size=12)

Path = tuple[str | int, ...]


def mostly(usable: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usable` two times in three, else `odd` (`a | b` would weigh every branch of each alike)."""
    return st.integers(0, 2).flatmap(lambda n: usable if n else odd)


def places(document: Any) -> list[Path]:
    """Every place in the document, the whole of it first."""
    found: list[Path] = [()]

    def walk(node: Any, at: Path) -> None:
        children: Any = ()
        if isinstance(node, dict):
            children = node.items()
        elif isinstance(node, list):
            children = enumerate(node)
        for key, child in children:
            found.append((*at, key))
            walk(child, (*at, key))

    walk(document, ())
    return found


@st.composite
def mutated(
    draw: st.DrawFn,
    document: Any,
    *,
    most: int = 3,
    also: st.SearchStrategy[Any] = NOTHING,
    keys: st.SearchStrategy[str] = NAMES,
) -> Any:
    """`document` with up to `most` changes: a field deleted, replaced by an odd value (or one
    of `also`: the valid values of other fields, say) or added under a name from `keys`."""
    document = copy.deepcopy(document)
    value = values | also
    for _ in range(draw(st.integers(0, most))):
        path = draw(st.sampled_from(places(document)))
        if not path:
            if not isinstance(document, dict) or draw(st.integers(0, 9)) == 0:
                document = draw(value)
            else:
                document[draw(keys)] = draw(value)
            continue
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        key, target = path[-1], parent[path[-1]]
        change = draw(st.sampled_from(["delete", "replace", "add"]))
        if change == "delete":
            del parent[key]
        elif change == "add" and isinstance(target, dict):
            target[draw(keys)] = draw(value)
        elif change == "add" and isinstance(target, list):
            target.append(draw(value))
        else:
            parent[key] = draw(value)
    return document

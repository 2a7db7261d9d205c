"""Turns the YAML text of a policy document into a `NodeGroupPolicy`, or errors that name the field.

Every problem reads `<source>: <field path>: <what is wrong>`, so the same line serves
synth, `nodescaler validate`, the evaluator's log and a test's assertion.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

import yaml
from pydantic import ValidationError

from nodescaler.domain.groups.optin import NAME_PATTERN
from nodescaler.domain.outside_text import MAX_MESSAGE, outside
from nodescaler.domain.policy import METRIC_TYPES, NodeGroupPolicy
from nodescaler.errors import PolicyError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice instead of silently keeping the last."""


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if not isinstance(key, str | int | float | bool):
            raise yaml.constructor.ConstructorError(
                None, None, "a key must be a plain name, not a list or mapping", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} is given twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


def _whole_number(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    """An integer, or the place of one too long to read: Python refuses to convert more
    than 4,300 digits (ValueError, which no YAML error handler expects)."""
    try:
        return int(loader.construct_yaml_int(node))
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"a number of {len(str(node.value)):,} characters, too long to read",
            node.start_mark,
        ) from None


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates
)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _whole_number)


def field_path(loc: Iterable[int | str]) -> str:
    """`('spec', 'metrics', 0, 'SQSQueue', 'target')` → `spec.metrics[0].target`.

    The metric type pydantic puts after a list index (the union's tag) is left out: the
    user wrote no such field. A key is the writer's text (an unknown field may be 3,000
    characters of terminal escapes): each is `outside`, one bounded line.
    """
    path = ""
    previous: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not (isinstance(previous, int) and part in METRIC_TYPES):
            path += f".{outside(part)}" if path else outside(part)
        previous = part
    return path or "(document)"


# A pattern's meaning in words, said instead of the regular expression it is (`worded`).
PATTERN_WORDS: dict[str, str] = {
    NAME_PATTERN: "a name of at most 63 lowercase letters, digits and '-', starting and "
    "ending with a letter or digit (a Kubernetes object's name)",
}


def worded(pattern: str, words: str) -> str:
    """`pattern`, registered with the words an error says instead of it: `should be
    <words>`. Returns the pattern, for `Field(pattern=worded(...))`."""
    PATTERN_WORDS[pattern] = words
    return pattern


@cache
def _policy_fields() -> frozenset[str]:
    """Every field name a policy document may hold, anywhere, for a did-you-mean."""
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            names.update(k for k in node.get("properties", {}) if isinstance(k, str))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(NodeGroupPolicy.model_json_schema(by_alias=True))
    return frozenset(names)


def did_you_mean(given: object, known: Iterable[str]) -> str:
    """` (did you mean x?)` for the known name nearest `given`, case aside; "" when none
    is near."""
    if not isinstance(given, str):
        return ""
    by_lower = {name.lower(): name for name in known}
    close = difflib.get_close_matches(given.lower(), list(by_lower), n=1, cutoff=0.75)
    return f" (did you mean {by_lower[close[0]]}?)" if close else ""


def _unit(loc: Iterable[int | str]) -> str | None:
    """The unit a field's name says (`stabilizationWindowSeconds`: seconds), if any."""
    last = next((part for part in reversed(tuple(loc)) if isinstance(part, str)), "")
    for unit in ("seconds", "minutes", "days"):
        if last.lower().endswith(unit):
            return unit
    return None


def _message(error: Any, fields: Callable[[], Iterable[str]] = _policy_fields) -> str:
    # a message may quote the value written, which aliases can make megabytes long
    message = outside(str(error["msg"]).removeprefix("Value error, "), MAX_MESSAGE)
    kind = error["type"]
    if kind == "extra_forbidden":
        loc = tuple(error["loc"])
        return "unknown field" + did_you_mean(loc[-1] if loc else None, fields())
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        tag = outside(error["ctx"]["tag"])
        return f"unknown metric type {tag!r} (use one of {', '.join(METRIC_TYPES)})"
    if kind == "string_pattern_mismatch" and error["ctx"]["pattern"] in PATTERN_WORDS:
        words = PATTERN_WORDS[error["ctx"]["pattern"]]
        return f"should be {words}; got {outside(repr(error['input']))}"
    if kind in ("too_short", "too_long"):  # "List should have at least 1 item after ..."
        ctx = error["ctx"]
        bound, most = (
            (ctx["min_length"], "least") if kind == "too_short" else (ctx["max_length"], "most")
        )
        items = "item" if bound == 1 else "items"
        return f"should list at {most} {bound} {items}; got {ctx['actual_length']}"
    unit = _unit(error["loc"])
    if kind in ("int_type", "int_parsing", "int_from_float") and unit:
        example = " (120 for two minutes)" if unit == "seconds" else ""
        return f"should be a whole number of {unit}{example}; got {outside(repr(error['input']))}"
    return message


def problems_of(
    error: ValidationError, source: str, under: tuple[str | int, ...] = ()
) -> list[str]:
    """One `source: field.path: message` line per error; `under` prefixes the field path."""
    return problems_at(error, lambda loc: f"{source}: {field_path((*under, *loc))}")


def problems_at(
    error: ValidationError,
    where: Callable[[tuple[int | str, ...]], str],
    fields: Callable[[], Iterable[str]] = _policy_fields,
) -> list[str]:
    """One `where: message` line per error, `where(loc)` naming the source and field of
    each; `fields` lists the names an unknown field may be a typo of."""
    return [f"{where(tuple(e['loc']))}: {_message(e, fields)}" for e in error.errors()]


# Far deeper than any policy needs, far shallower than the loader's recursion can go.
MAX_DEPTH = 32


def _too_deep(text: str) -> Any:
    """Where the document nests more than MAX_DEPTH mappings and lists, if it does: read
    as a stream of events, which takes no recursion however deep the nesting."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return event.start_mark
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def parse_policy(text: str, source: str) -> NodeGroupPolicy:
    """Parse one policy document; `source` (usually the file path) prefixes every problem."""
    try:
        if (mark := _too_deep(text)) is not None:
            raise PolicyError(
                source,
                [
                    f"{source}: line {mark.line + 1}, column {mark.column + 1}: nested more "
                    f"than {MAX_DEPTH} levels deep"
                ],
            )
        document = yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(document)"
        raise PolicyError(
            source, [f"{source}: {where}: {outside(error.problem or error, MAX_MESSAGE)}"]
        ) from None
    except yaml.YAMLError as error:
        raise PolicyError(
            source, [f"{source}: (document): {outside(error, MAX_MESSAGE)}"]
        ) from None
    if not isinstance(document, dict):
        kind = "empty" if document is None else f"a {type(document).__name__}"
        raise PolicyError(
            source, [f"{source}: (document): expected a NodeGroupPolicy mapping, got {kind}"]
        )
    try:
        return NodeGroupPolicy.model_validate(document)
    except ValidationError as error:
        raise PolicyError(source, problems_of(error, source)) from None


def split_documents(text: str) -> list[str]:
    """Each non-empty YAML document of `text` (kubectl's `---`-separated files), after as
    many blank lines as come before it, so a problem keeps the file's line number; the
    text whole when it is one document with nothing beside it, or not YAML (whose parser
    then says where). An empty document, a trailing `---`'s, is no document."""
    try:
        events = list(yaml.parse(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return [text]
    # each document from where the one before it ends: its comments and `---` with it
    ends = [e.end_mark.index for e in events if isinstance(e, yaml.DocumentEndEvent) and e.end_mark]
    pieces = [
        "\n" * text.count("\n", 0, start) + text[start:end]
        for start, end in zip([0, *ends], ends, strict=False)
    ]
    if len(pieces) < 2:
        return [text]
    filled = [piece for piece in pieces if not _empty(piece)]
    return filled or [text]


def _empty(piece: str) -> bool:
    try:
        return yaml.safe_load(piece) is None
    except yaml.YAMLError:  # a document that is there, broken: parse_policy says where
        return False


def documents(text: str, source: str) -> list[tuple[str, str]]:
    """Each document of a file's text as (its source, its text): `source` itself for a
    file of one, `source (document N)` for each of several."""
    pieces = split_documents(text)
    if len(pieces) == 1:
        return [(source, pieces[0])]
    return [(f"{source} (document {n})", piece) for n, piece in enumerate(pieces, start=1)]


def parse_policies(text: str, source: str) -> list[tuple[str, NodeGroupPolicy, str]]:
    """Every policy of a file's documents, as (source, policy, document text); every
    problem of every document reported together."""
    problems: list[str] = []
    parsed: list[tuple[str, NodeGroupPolicy, str]] = []
    for where, piece in documents(text, source):
        try:
            parsed.append((where, parse_policy(piece, where), piece.lstrip("\n")))
        except PolicyError as error:
            problems.extend(error.problems)
    if problems:
        raise PolicyError(source, problems)
    return parsed


def declared_name(text: str) -> str | None:
    """The policy name a document declares, if it can be read at all (for naming the
    groups a broken document leaves without a policy)."""
    try:
        if _too_deep(text) is not None:
            return None
        document = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError:
        return None
    metadata = document.get("metadata") if isinstance(document, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and re.match(NAME_PATTERN, name) else None


def index_by_name(policies: Iterable[tuple[str, NodeGroupPolicy]]) -> dict[str, NodeGroupPolicy]:
    """Index (source, policy) pairs by policy name; a name used twice is an error."""
    by_name: dict[str, NodeGroupPolicy] = {}
    sources: dict[str, str] = {}
    problems = []
    for source, policy in policies:
        if policy.name in by_name:
            problems.append(
                f"{source}: metadata.name: policy {policy.name!r} is already defined in "
                f"{sources[policy.name]}"
            )
        else:
            by_name[policy.name] = policy
            sources[policy.name] = source
    if problems:
        raise PolicyError("policies", problems)
    return by_name

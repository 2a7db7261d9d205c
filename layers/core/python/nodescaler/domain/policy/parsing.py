"""Turns the YAML text of a policy document into a `NodeGroupPolicy`, or errors that name the field.

Every problem reads `<source>: <field path>: <what is wrong>`, so the same line serves
synth, `nodescaler validate`, the evaluator's log and a test's assertion.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import yaml
from pydantic import ValidationError

from nodescaler.domain.optin import NAME_PATTERN
from nodescaler.domain.policy import METRIC_TYPES, NodeGroupPolicy
from nodescaler.domain.text import MAX_MESSAGE, outside
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


def _message(error: Any) -> str:
    # a message may quote the value written, which aliases can make megabytes long
    message = outside(str(error["msg"]).removeprefix("Value error, "), MAX_MESSAGE)
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "union_tag_invalid":
        tag = outside(error["ctx"]["tag"])
        return f"unknown metric type {tag!r} (use one of {', '.join(METRIC_TYPES)})"
    return message


def problems_of(
    error: ValidationError, source: str, under: tuple[str | int, ...] = ()
) -> list[str]:
    """One `source: field.path: message` line per error; `under` prefixes the field path."""
    return problems_at(error, lambda loc: f"{source}: {field_path((*under, *loc))}")


def problems_at(error: ValidationError, where: Callable[[tuple[int | str, ...]], str]) -> list[str]:
    """One `where: message` line per error, `where(loc)` naming the source and field of each."""
    return [f"{where(tuple(e['loc']))}: {_message(e)}" for e in error.errors()]


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

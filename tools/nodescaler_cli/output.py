"""How read commands print: an aligned table for people, JSON or YAML for scripts.

A read command builds rows (dicts with the same keys, in column order) and hands them to
`render`. JSON and YAML print the rows as a list under a stable top-level key, so a script
reads `.groups[].desired` whatever the table looks like; the table is for eyes only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from nodescaler.domain.outside_text import printable

FORMATS = ("table", "json", "yaml")


def render(kind: str, rows: Sequence[Mapping[str, Any]], output: str = "table") -> str:
    """`kind` names the list in JSON and YAML (`{"groups": [...]}`). Non-ASCII text is
    printed as written unless it holds a character a terminal would act on rather than
    show (a bidi override in a group's name can make `web` read as another group): then
    every non-ASCII character is escaped, the same data in a form a terminal shows inert."""
    if output == "json":
        text = json.dumps({kind: list(rows)}, indent=2, default=str, ensure_ascii=False)
        return text if _inert(text) else json.dumps({kind: list(rows)}, indent=2, default=str)
    if output == "yaml":
        import yaml

        plain = json.loads(json.dumps({kind: list(rows)}, default=str))
        text = str(yaml.safe_dump(plain, sort_keys=False, allow_unicode=True))
        if not _inert(text):
            text = str(yaml.safe_dump(plain, sort_keys=False, allow_unicode=False))
        return text.rstrip("\n")
    return table(rows)


def _inert(text: str) -> bool:
    """Whether every character of `text` shows as itself (line breaks between lines)."""
    return all(c.isprintable() or c == "\n" for c in text)


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Columns padded to their widest cell, headers in capitals as kubectl prints them."""
    if not rows:
        return ""
    columns = list(rows[0])
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    headers = [c.upper().replace("_", " ") for c in columns]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    lines = [headers, *cells]
    return "\n".join(
        "   ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _cell(value: Any) -> str:
    if value is None or value in ("", []):
        return "-"
    if isinstance(value, bool):  # before numbers: True == 1
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return "; ".join(_cell(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in value.items())
    return printable(str(value))  # what a table shows may come from outside: no escapes

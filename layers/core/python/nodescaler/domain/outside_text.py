"""Text taken from outside nodescaler (an HTTP answer, a label, a stored document's
problem, an error message), made fit to store, log and print: one line, no control
characters (a terminal escape in it would reach `nodescaler explain`), and bounded (a
600 KB label would push a group's state item past DynamoDB's 400 KB).

Every such text goes through `outside` where it enters a decision, a reason, an error,
the state item or a log line; `bounded_problems` bounds a group's list of problems.
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_OUTSIDE = 200  # characters of one outside text kept: enough to recognise it
MAX_MESSAGE = 500  # characters of a validator's message, which may quote the value written
MAX_PROBLEM = 2000  # characters of one problem or reason (quoting outside texts, each bounded)
MAX_PROBLEMS = 20  # problems kept of a group (each names a field or a tag)


def outside(text: object, limit: int = MAX_OUTSIDE) -> str:
    """`text` on one line, every control or format character (ESC, CR, a bidi override)
    a space, cut at `limit` characters with a marker saying how long it was."""
    whole = str(text)
    head = whole[: limit * 4]  # cleaning never needs more: a long text is cut anyway
    clean = printable(head)
    if len(clean) <= limit and len(head) == len(whole):
        return clean
    return f"{clean[:limit]}… (cut, {len(whole):,} characters)"


def printable(text: str) -> str:
    """`text` on one line, every control or format character a space (runs of them one)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def bounded_problems(problems: Iterable[str]) -> tuple[str, ...]:
    """A group's problems as stored: each `outside`, at most `MAX_PROBLEMS` of them."""
    listed = list(problems)
    kept = tuple(outside(p, MAX_PROBLEM) for p in listed[:MAX_PROBLEMS])
    more = len(listed) - MAX_PROBLEMS
    return kept if more <= 0 else (*kept, f"… and {more} more problems")

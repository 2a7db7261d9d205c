"""Why a cron expression is refused, in words: the field and the value given ("hour 25 out
of range (0-23)"), where croniter says only that it is "not acceptable"."""

from __future__ import annotations

FIELD_NAMES = "minute hour day-of-month month day-of-week"
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# Each field: its name, its range, and the names it takes besides numbers.
FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day-of-week", 0, 7, DAYS),  # 0 and 7 are both Sunday
)


def cron_problem(expression: str) -> str:
    """What is wrong with an expression cron refused: its field count, or the first field
    whose value is out of range or not a value."""
    given = expression.split()
    if len(given) != len(FIELDS):
        return f"has {len(given)} fields, expected {len(FIELDS)} ({FIELD_NAMES})"
    for (name, low, high, names), text in zip(FIELDS, given, strict=True):
        for part in text.split(","):
            if problem := _part_problem(part, name, low, high, names):
                return problem
    return f"is not a cron expression ({FIELD_NAMES})"


def _part_problem(part: str, name: str, low: int, high: int, names: tuple[str, ...]) -> str:
    """`*`, a value, or a range `a-b`, each with an optional step `/n`; "" when fine."""
    body, slash, step = part.partition("/")
    if slash and not (step.isdigit() and int(step) > 0):
        return f"{name} step {step!r} is not a whole number of 1 or more"
    if body == "*":
        return ""
    for value in body.split("-", 1):
        if value.lower() in names:
            continue
        if not value.isdigit():
            kind = (
                f"a number ({low}-{high}) or a name ({names[0]}-{names[-1]})"
                if names
                else (f"a number ({low}-{high})")
            )
            return f"{name} {value!r} is not {kind}"
        if not low <= int(value) <= high:
            return f"{name} {value} out of range ({low}-{high})"
    return ""

"""Which function takes an event: `nodescaler invoke` checks before it starts the sandbox, so
an event given to the wrong function is one line naming the right one, not a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nodescaler.errors import MalformedEventError
from nodescaler.events.dispatch import parse_dispatch_event
from nodescaler.events.drain import parse_drain_event
from nodescaler.events.termination_policy import parse_termination_request

INVOKED = ("dispatch", "evaluate", "drain", "terminate")  # the functions `nodescaler invoke` runs
EVENTS = Path(__file__).resolve().parents[2] / "events"  # the samples, in a checkout


def _sqs_batch(event: Any) -> None:
    """Evaluate takes an SQS batch; a bad record in it fails alone, so only the shape counts."""
    records = event.get("Records") if isinstance(event, dict) else None
    if not records or not all(
        isinstance(r, dict) and r.get("eventSource") == "aws:sqs" for r in records
    ):
        raise MalformedEventError("not an SQS batch (Records from aws:sqs)")


# Each function, what it takes (in words) and the parser its handler reads the event with.
TAKES: dict[str, tuple[str, Callable[[Any], object]]] = {
    "dispatch": (
        "a scheduled tick, a CloudWatch alarm state change or an Auto Scaling launch failure",
        parse_dispatch_event,
    ),
    "evaluate": ("an SQS batch of evaluation requests", _sqs_batch),
    "drain": (
        "a terminate lifecycle action, an EC2 Spot interruption warning or a rebalance "
        "recommendation",
        parse_drain_event,
    ),
    "terminate": (
        "a custom termination policy request from Auto Scaling",
        parse_termination_request,
    ),
}


def takes(function: str, event: Any) -> bool:
    try:
        TAKES[function][1](event)
    except MalformedEventError:
        return False
    return True


def misfit(function: str, event: Any, path: Path) -> str | None:
    """None when `function` takes the event; otherwise one line: which function takes it
    instead (or that none does), and what `function` expects, with a sample of it."""
    if takes(function, event):
        return None
    wanted, _ = TAKES[function]
    samples = _samples(function)
    expects = f"{function} takes {wanted}" + (f", e.g. {samples}" if samples else "")
    others = [name for name in TAKES if name != function and takes(name, event)]
    if not others:
        return f"{path}: no function takes this event; {expects}"
    for_whom = " or ".join(
        name if name in INVOKED else f"{name} (which nodescaler invoke does not run)"
        for name in others
    )
    return f"{path}: an event for {for_whom}, not {function}; {expects}"


def _samples(function: str) -> str:
    """The samples in events/ that `function` takes, as paths from the checkout."""
    found = [
        f"events/{path.name}"
        for path in sorted(EVENTS.glob("*.json"))
        if takes(function, json.loads(path.read_text()))
    ]
    return ", ".join(found)

"""Every event and message a function receives, as typed models: parsing is where bad input
is caught, and turned into the domain values the services take.

`dispatch`: the tick, alarm state changes and launch failures; `drain`: terminate lifecycle
actions and EC2 Spot warnings; `queue`: the evaluation queue's message, which `sqs` wraps
in the record evaluate receives. The envelopes are Powertools' parser models, the details
ours; `queue` alone is plain pydantic, as the services write it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nodescaler.domain.outside_text import MAX_OUTSIDE

if TYPE_CHECKING:
    from pydantic import ValidationError

# The detail types of the events the drain function's rules route to it (infra reads them
# here, without loading the event models).
LIFECYCLE_ACTION = "EC2 Instance-terminate Lifecycle Action"
SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"


def describe_errors(error: ValidationError) -> str:
    """`field.path: message; ...`, with the field paths policy errors use. A field path
    is the sender's text (an unknown key): each is bounded and made one line, and the
    first `MAX_PROBLEMS` errors are said, so a forged message cannot fill the log."""
    # Imported on this error path only: the policy documents' module loads YAML and the
    # policy models, which the drain function never needs.
    from nodescaler.domain.outside_text import bounded_problems, outside
    from nodescaler.domain.policy.parsing import field_path

    return "; ".join(
        bounded_problems(
            f"{outside(field_path(e['loc'])) if e['loc'] else '(event)'}: {_message(e)}"
            for e in error.errors(include_url=False)
        )
    )


def _message(error: Any) -> str:
    """pydantic's message, each value it quotes from the input (a tag) bounded on its own,
    so what the message says after it stays."""
    from nodescaler.domain.outside_text import MAX_PROBLEM, outside

    message = str(error["msg"])
    for quoted in (error.get("ctx") or {}).values():
        if isinstance(quoted, str) and len(quoted) > MAX_OUTSIDE:
            message = message.replace(quoted, outside(quoted))
    return outside(message, MAX_PROBLEM)

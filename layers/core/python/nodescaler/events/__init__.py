"""Every event and message a function receives, as typed models: parsing is where bad input
is caught, and turned into the domain values the services take.

`dispatch`: the tick, alarm state changes and launch failures; `drain`: terminate lifecycle
actions and EC2 Spot warnings; `queue`: the evaluation queue's message, which `sqs` wraps
in the record evaluate receives. The envelopes are Powertools' parser models, the details
ours; `queue` alone is plain pydantic, as the services write it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

# The detail types of the events the drain function's rules route to it (infra reads them
# here, without loading the event models).
LIFECYCLE_ACTION = "EC2 Instance-terminate Lifecycle Action"
SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"


def describe_errors(error: ValidationError) -> str:
    """`field.path: message; ...`, with the field paths policy errors use."""
    # Imported on this error path only: the policy documents' module loads YAML and the
    # policy models, which the drain function never needs.
    from nodescaler.domain.policy.parsing import field_path

    return "; ".join(
        f"{field_path(e['loc']) if e['loc'] else '(event)'}: {e['msg']}"
        for e in error.errors(include_url=False)
    )

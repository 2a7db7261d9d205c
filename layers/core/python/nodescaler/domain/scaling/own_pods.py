"""A group's own pending pods, a floor under its policy's metrics: where nodescaler reads
the cluster, a group whose policy has no PendingPods metric (a queue's workers, a
schedule's or a reservation's pods) still grows for the unschedulable pods its nodes
would take, as the pending-pods plan gives them to it.

Without it a queue policy whose target per node is more than a node holds grows for the
target, and the workers that do not fit wait Pending for good. The vote only raises: with
nothing pending, or the cluster unread, it abstains; it never sheds a node and never holds
the other metrics' scale-in. `ownPendingPods: false` in a policy turns it off.
"""

from __future__ import annotations

from nodescaler.domain.policy import PendingPodsMetric
from nodescaler.domain.scaling.decision import MetricOutcome, MetricStatus

# Read as a PendingPods metric with the defaults (its cutoff, no buffer), under a name no
# policy metric can take (names are lower case and dashes): never one of the policy's.
OWN_PENDING_PODS = PendingPodsMetric(type="PendingPods").model_copy(
    update={"name": "own pending pods"}
)
WHY = "the group's own pending pods: its policy has no PendingPods metric"


def as_floor(outcome: MetricOutcome) -> MetricOutcome:
    """The own-pending-pods outcome as the floor it is: a vote for more nodes, or none.
    Anything else (nothing pending, the cluster unread) abstains, with why: no reading of
    the cluster ever becomes a scale-in, nor holds one (the policy's metrics decide it).
    An abstention keeps the nodes it found empty of pods: when the policy's metrics shed,
    those go past the default scale-down rate, having nothing to drain."""
    if outcome.status is MetricStatus.OK and outcome.recommendation is not None:
        return outcome.model_copy(update={"detail": f"{outcome.detail} ({WHY})", "needed": None})
    return outcome.model_copy(
        update={
            "status": MetricStatus.ABSTAINED,
            "recommendation": None,
            "detail": f"{outcome.detail}: no vote ({WHY})",
            "needed": None,
        }
    )

"""What a valid policy may not mean: a warning `nodescaler validate` and `simulate` give,
naming the metric and what it will do, where a policy does something no one would write
on purpose. A warning, not an error: a stored policy that says it still loads."""

from __future__ import annotations

import math

from nodescaler.domain.policy.document import NodeGroupPolicy
from nodescaler.domain.policy.metrics import CapacityReservationMetric, TargetType


def advice(policy: NodeGroupPolicy) -> list[str]:
    """The policy's warnings, one a line."""
    return [
        _per_node_share(metric.key, metric.target.amount)
        for metric in policy.spec.metrics
        if isinstance(metric, CapacityReservationMetric)
        and metric.target.type is TargetType.AVERAGE_VALUE
    ]


def _per_node_share(key: str, target: float) -> str:
    """A reservation reads the group's share requested, in %; an AverageValue target
    divides that share as if it were a count a node: ceil(60 / 70) = 1 node for a group
    of any size."""
    example = math.ceil(60 / target)
    nodes = "node" if example == 1 else "nodes"
    return (
        f"metric {key!r}: a CapacityReservation reads the share of the group's allocatable "
        f"requested, in %; an AverageValue target of {target:g} divides it as a count a "
        f"node (60 % requested asks for {example} {nodes}, whatever the group's size): "
        f"for {target:g} % requested, write target: {{type: Utilization, "
        f"averageUtilization: {min(target, 100):g}}}"
    )

"""The expander chain the settings list: which group(s) the pending pods' nodes go to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nodescaler.adapters.aws.capacity_reservations import Ec2ReservedCapacity
from nodescaler.adapters.aws.custom_expander import LambdaExpander, budget_config
from nodescaler.domain.scale_up.balance import IGNORED_LABELS
from nodescaler.domain.scale_up.expanders import (
    BalanceSimilarGroups,
    CustomExpander,
    LeastWasteExpander,
    MostPodsExpander,
    PriorityExpander,
    RandomExpander,
    ReservedFirstExpander,
    WeightedPriorityExpander,
)
from nodescaler.expander_settings import (
    BalanceExpanderSpec,
    CustomExpanderSpec,
    PriorityExpanderSpec,
    SimpleExpanderSpec,
    WeightedPriorityExpanderSpec,
)
from nodescaler.observability.reports import report_reserved_capacity

if TYPE_CHECKING:
    from nodescaler.adapters.aws.node_groups import AsgNodeGroups
    from nodescaler.domain.scale_up.expanders import Expander
    from nodescaler.expander_settings import ExpanderSpec
    from nodescaler.ports import Clock
    from nodescaler.wiring.clients import AwsClients


def expander_chain(
    specs: Sequence[ExpanderSpec],
    clients: AwsClients,
    groups: AsgNodeGroups,
    clock: Clock,
) -> list[Expander]:
    chain: list[Expander] = []
    for spec in specs:
        match spec:
            case PriorityExpanderSpec():
                chain.append(PriorityExpander(spec.priorities))
            case WeightedPriorityExpanderSpec():
                chain.append(WeightedPriorityExpander(spec.tiers))
            case CustomExpanderSpec():
                client = clients.client("lambda", budget_config(spec.timeout_seconds))
                chain.append(CustomExpander(LambdaExpander(client, spec.function_name)))
            case BalanceExpanderSpec():
                chain.append(BalanceSimilarGroups(IGNORED_LABELS | set(spec.ignored_labels)))
            case SimpleExpanderSpec(name="least-waste"):
                chain.append(LeastWasteExpander())
            case SimpleExpanderSpec(name="most-pods"):
                chain.append(MostPodsExpander())
            case SimpleExpanderSpec(name="reserved-first"):
                chain.append(reserved_first(clients, groups, clock))
            case _:
                chain.append(RandomExpander())
    return chain


def reserved_first(clients: AwsClients, groups: AsgNodeGroups, clock: Clock) -> Expander:
    """The reserved-first expander over EC2's capacity reservations, read once a batch."""
    rooms = Ec2ReservedCapacity(clients.ec2, groups, clock=clock, on_read=report_reserved_capacity)
    return ReservedFirstExpander(rooms)

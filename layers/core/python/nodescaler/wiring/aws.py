"""The AWS adapters more than one function builds: the node groups and the scaling events."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodescaler.adapters.aws.event_bus import EventBridgeScalingEvents
from nodescaler.adapters.aws.node_groups import AsgNodeGroups
from nodescaler.wiring.clients import AwsClients

if TYPE_CHECKING:
    from nodescaler.config import CommonSettings, EventSettings
    from nodescaler.deadline import Deadline
    from nodescaler.ports import Clock


def node_groups(
    settings: CommonSettings,
    clients: AwsClients,
    clock: Clock | None = None,
    *,
    scaling_config: bool = True,
    invocation: Deadline | None = None,
) -> AsgNodeGroups:
    """The node groups; given a clock, a managed group's scalingConfig is kept a minute
    for `discover` (each evaluation's `get` reads it afresh). Without `scaling_config`
    (a role that may not DescribeNodegroup), a managed group's bounds are its ASG's. Given
    the `invocation`'s deadline, the groups read once an invocation until it writes."""
    return AsgNodeGroups(
        clients.autoscaling,
        clients.eks,
        tag_names=settings.tag_names,
        cluster_name=settings.cluster_name,
        clock=clock,
        scaling_config=scaling_config,
        invocation=invocation,
    )


def scaling_events(settings: EventSettings, clients: AwsClients) -> EventBridgeScalingEvents:
    """Scaling events for the settings' bus; its client made on the first put."""
    return EventBridgeScalingEvents(lambda: clients.events, settings.event_bus_name)

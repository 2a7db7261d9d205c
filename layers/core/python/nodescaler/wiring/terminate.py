"""The termination policy function's assembly: which instances Auto Scaling may take."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodescaler.adapters.aws.custom_expander import budget_config
from nodescaler.adapters.aws.drain_hooks import AsgDrainHooks
from nodescaler.adapters.aws.termination_waits import DynamoTerminationWaits
from nodescaler.adapters.k8s.core_api import KubernetesCluster
from nodescaler.service.termination_policy import TerminationChooser
from nodescaler.wiring.aws import node_groups
from nodescaler.wiring.clients import AwsClients, SystemClock
from nodescaler.wiring.kubernetes import kubernetes_connection

if TYPE_CHECKING:
    from nodescaler.config import TerminateSettings
    from nodescaler.ports import Clock

# The termination policy's state table reads and writes, and its look at a group's drain
# hook: each a small part of Auto Scaling's two seconds, which the cluster's read (1.2 s at
# most) takes most of. A hook unread in time keeps the node (and is asked again next time).
WAITS_TIMEOUT_SECONDS = 0.25
HOOKS_TIMEOUT_SECONDS = 0.15


def terminator(
    settings: TerminateSettings, clients: AwsClients | None = None, clock: Clock | None = None
) -> TerminationChooser:
    """The termination policy function's chooser: the opted-in groups, the cluster, how
    long a cause has waited (the state table) and whether a group drains (its hook), each
    read within Auto Scaling's two seconds."""
    clients = clients or AwsClients()
    clock = clock or SystemClock()
    connection = kubernetes_connection(settings, clients, clock)
    cluster = None
    if connection is not None:
        cluster = KubernetesCluster(
            connection,
            timeout_seconds=settings.kubernetes_timeout_seconds,
            startup=settings.startup,
            daemon_sets=False,  # which instances go needs no new node's template
        )
    dynamodb = clients.client("dynamodb", budget_config(WAITS_TIMEOUT_SECONDS))
    waits = DynamoTerminationWaits(dynamodb, settings.state_table)
    autoscaling = clients.client("autoscaling", budget_config(HOOKS_TIMEOUT_SECONDS))
    return TerminationChooser(
        node_groups(settings, clients),
        cluster,
        clock,
        waits,
        settings.drain_rules,
        drain_hooks=AsgDrainHooks(autoscaling, settings.drain_hook, clock),
    )

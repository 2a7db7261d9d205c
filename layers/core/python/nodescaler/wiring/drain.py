"""The drain function's assembly: the cluster to drain and Auto Scaling's lifecycle actions."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING

from nodescaler.adapters.aws.evaluation_queue import SqsEvaluationQueue
from nodescaler.adapters.aws.lifecycle import (
    AsgInstanceGroups,
    AsgLifecycleActions,
    Ec2InstanceMarkets,
)
from nodescaler.adapters.k8s.evictions import KubernetesDrain
from nodescaler.domain.scale_down.drain import LifecycleResult
from nodescaler.errors import SettingsError
from nodescaler.service.drainer import Drainer, Owners, Replacements
from nodescaler.wiring.aws import node_groups, scaling_events
from nodescaler.wiring.clients import AwsClients, SystemClock
from nodescaler.wiring.kubernetes import kubernetes_connection

if TYPE_CHECKING:
    from nodescaler.config import DrainSettings
    from nodescaler.ports import Clock, Sleep


def drainer(
    settings: DrainSettings,
    clients: AwsClients | None = None,
    clock: Clock | None = None,
    sleep: Sleep | None = None,
) -> Drainer:
    """The drain function's Drainer: the cluster to drain, Auto Scaling's lifecycle actions,
    and the evaluation queue a Spot warning asks for replacement capacity through."""
    clients = clients or AwsClients()
    clock = clock or SystemClock()
    connection = kubernetes_connection(settings, clients, clock)
    if connection is None:
        raise SettingsError(
            "DrainSettings: setting CLUSTER_NAME is not set, nor KUBECONFIG_PATH: "
            "the drain needs the cluster whose nodes it drains"
        )
    owners = Owners(
        instances=AsgInstanceGroups(clients.autoscaling),
        markets=Ec2InstanceMarkets(clients.ec2),
        # whose group it is: its tags alone (the role may not DescribeNodegroup)
        node_groups=node_groups(settings, clients, scaling_config=False),
        tag_names=settings.tag_names,
        cluster_name=settings.cluster_name,
        drain_groups=frozenset(settings.drain_groups),
        hook=settings.drain_hook,
    )
    return Drainer(
        cluster=KubernetesDrain(connection),
        lifecycle=AsgLifecycleActions(clients.autoscaling),
        clock=clock,
        sleep=sleep or time.sleep,
        owners=owners,
        replacements=Replacements(
            owners, SqsEvaluationQueue(clients.sqs, settings.evaluation_queue_url)
        ),
        drain_timeout=timedelta(seconds=settings.drain_timeout_seconds),
        heartbeat_interval=timedelta(seconds=settings.heartbeat_seconds),
        max_grace_seconds=settings.max_grace_seconds,
        timeout_result=LifecycleResult(settings.drain_timeout_result),
        events=scaling_events(settings, clients),
        rules=settings.drain_rules,
    )

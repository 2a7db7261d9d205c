"""The dispatch function's assembly: the groups to queue, and why they may wait."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodescaler.adapters.aws.evaluation_queue import SqsEvaluationQueue
from nodescaler.adapters.aws.state_table import DynamoStateStore
from nodescaler.service.dispatch import Dispatcher
from nodescaler.wiring.aws import node_groups, scaling_events
from nodescaler.wiring.clients import AwsClients, SystemClock
from nodescaler.wiring.policies import capacity_policies

if TYPE_CHECKING:
    from nodescaler.config import DispatchSettings
    from nodescaler.ports import Clock


def dispatcher(
    settings: DispatchSettings, clients: AwsClients | None = None, clock: Clock | None = None
) -> Dispatcher:
    """The Dispatcher: the opted-in groups, the evaluation queue, the policies, and the
    state table's backoffs."""
    clients = clients or AwsClients()
    clock = clock or SystemClock()
    return Dispatcher(
        node_groups=node_groups(settings, clients),
        queue=SqsEvaluationQueue(clients.sqs, settings.evaluation_queue_url),
        policies=capacity_policies(settings, clients, clock),
        state=DynamoStateStore(clients.dynamodb, settings.state_table),  # writes no decisions
        clock=clock,
        backoff_rules=settings.backoff_rules,
        cluster_name=settings.cluster_name,
        events=scaling_events(settings, clients),
        allowed=settings.allowed,
    )

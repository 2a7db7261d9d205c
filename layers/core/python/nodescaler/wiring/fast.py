"""The fast path function's assembly: what it looks at between ticks (named `fast`, not
`fast_path`, so that the package's `fast_path` stays the builder, not this module)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from nodescaler.adapters.aws.evaluation_queue import SqsEvaluationQueue
from nodescaler.adapters.aws.recheck_times import RecheckTimes
from nodescaler.adapters.aws.sqs_queue_length import SqsQueueLength
from nodescaler.adapters.prometheus import producer as prometheus_producer
from nodescaler.domain.scale_up.fast_path_rules import Backoff
from nodescaler.service.fast_path import FastPath
from nodescaler.wiring.aws import node_groups
from nodescaler.wiring.clients import AwsClients, SystemClock
from nodescaler.wiring.kubernetes import kubernetes_connection
from nodescaler.wiring.policies import capacity_policies
from nodescaler.wiring.producers import ProducerContext

if TYPE_CHECKING:
    from nodescaler.adapters.k8s.core_api import KubernetesCluster
    from nodescaler.config import FastPathSettings
    from nodescaler.ports import Clock, Sleep
    from nodescaler.service.fast_path import Look
    from nodescaler.service.policy_resolver import PolicyBook


def fast_path(
    settings: FastPathSettings,
    clients: AwsClients | None = None,
    clock: Clock | None = None,
    sleep: Sleep | None = None,
    report: Callable[[Look, float], None] | None = None,
) -> FastPath:
    """The fast path's looks: the cluster's unschedulable pods when a policy reads pending
    pods and a connection is set, the policies' queues and Prometheus queries (each given
    at most `query_timeout_seconds`), and the evaluation queue."""
    clients = clients or AwsClients()
    clock = clock or SystemClock()
    policies = capacity_policies(settings, clients, clock)
    return FastPath(
        # no clock: scalingConfig bounds are evaluate's (the fast path may not DescribeNodegroup)
        node_groups=node_groups(settings, clients),
        queue=SqsEvaluationQueue(clients.sqs, settings.evaluation_queue_url),
        policies=policies,
        pods=unschedulable_pods(settings, policies, clients, clock),
        backlogs=SqsQueueLength(clients.sqs),
        prometheus=prometheus_producer(
            ProducerContext(clients, settings.token_origin_pairs, None),
            max_seconds=settings.query_timeout_seconds,
        ),
        clock=clock,
        sleep=sleep or time.sleep,
        # always wired (a policy stored later may keep a buffer); read only while one does
        rechecks=RecheckTimes(clients.dynamodb, settings.state_table),
        report=report or (lambda look, wait: None),
        allowed=settings.allowed,
        interval_seconds=settings.interval_seconds,
        backoff=Backoff(maximum=settings.backoff_cap_seconds),
    )


def unschedulable_pods(
    settings: FastPathSettings, policies: PolicyBook, clients: AwsClients, clock: Clock
) -> KubernetesCluster | None:
    """The cluster, when a policy takes pending pods (its `PendingPods` metric, or its own
    pods: `domain.scaling.own_pods`) and a connection is set."""
    if not any(p.takes_pending_pods for p in policies.policies.values()):
        return None
    connection = kubernetes_connection(settings, clients, clock)
    if connection is None:
        return None
    # imported only here: a fast path that reads no cluster loads no Kubernetes adapter
    from nodescaler.adapters.k8s.core_api import KubernetesCluster

    return KubernetesCluster(
        connection, timeout_seconds=settings.kubernetes_timeout_seconds, startup=settings.startup
    )

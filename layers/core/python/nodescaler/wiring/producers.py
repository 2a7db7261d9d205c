"""Each metric type's producer, bound from its descriptor alone: no type is named here."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nodescaler.domain.policy.descriptors import METRIC_TYPES
from nodescaler.observability.reports import report_refused_source
from nodescaler.service.producers import Producers

if TYPE_CHECKING:
    from nodescaler.deadline import Deadline
    from nodescaler.domain.policy import MetricBase
    from nodescaler.domain.token_origins import TokenOrigins
    from nodescaler.ports import MakeProducer, MetricProducer
    from nodescaler.service.cluster_view import KubernetesClusterView
    from nodescaler.wiring.clients import AwsClients


@dataclass(frozen=True)
class ProducerContext:
    """What a metric type's producer may be made of (a `ports.ProducerContext`)."""

    clients: AwsClients
    token_origins: TokenOrigins  # a bearer token goes only to the origins its secret pairs
    deadline: Deadline | None  # the invocation's: no read outlasts it


def metric_producers(
    clients: AwsClients,
    kubernetes: KubernetesClusterView | None,
    token_origins: TokenOrigins = frozenset(),
    deadline: Deadline | None = None,
) -> Producers:
    """Each metric type's producer, made by the function its descriptor names; a type that
    reads the cluster is read by `kubernetes` (without a cluster, it reads as unavailable);
    a forecast has none (it is computed from the group's history)."""
    context = ProducerContext(clients, token_origins, deadline)
    registry: dict[type[MetricBase], MetricProducer] = {}
    for metric_type in METRIC_TYPES:
        if metric_type.reads_cluster:
            if kubernetes is not None:
                registry[metric_type.model] = kubernetes
        elif metric_type.producer is not None:
            registry[metric_type.model] = _factory(metric_type.producer)(context)
    return Producers(registry, on_refused=report_refused_source)


def _factory(path: str) -> MakeProducer:
    """The producer factory a descriptor names ("module:function"), imported now: the
    descriptors, in the domain, name their adapters without importing them."""
    module, _, name = path.partition(":")
    factory: MakeProducer = getattr(importlib.import_module(module), name)
    return factory

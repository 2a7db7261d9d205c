"""Kubernetes Events on pods: `NotTriggerScaleUp`, as Cluster Autoscaler writes it, for a
pending pod no node group can take (`kubectl describe pod` shows it)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodescaler.adapters.k8s.core_api import Connection, CoreApi
from nodescaler.deadline import Deadline

REASON = "NotTriggerScaleUp"
COMPONENT = "nodescaler"


class KubernetesEvents:
    """`PodEvents` over the API server (RBAC: create events, nothing more)."""

    def __init__(
        self, connection: Connection, *, timeout_seconds: float, deadline: Deadline | None = None
    ) -> None:
        self._api = CoreApi(connection, timeout_seconds=timeout_seconds, deadline=deadline)

    def not_trigger_scale_up(self, namespace: str, pod: str, message: str, at: datetime) -> None:
        from kubernetes import client

        body = event(namespace, pod, message, at)
        self._api.answer(client.CoreV1Api.create_namespaced_event, namespace, body)


def event(namespace: str, pod: str, message: str, at: datetime) -> dict[str, Any]:
    when = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"generateName": f"{pod}.", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod},
        "reason": REASON,
        "message": message,
        "type": "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
    }

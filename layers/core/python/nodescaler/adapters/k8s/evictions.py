"""The drain's Kubernetes side through the `kubernetes` client: find the instance's node,
cordon it, list its pods, evict them one by one.

Only what infra/kubernetes grants the drain: get and list nodes, patch a node's
spec.unschedulable, list pods and disruption budgets, create pods/eviction. As in
`api.py`, lists are decoded with msgspec (only the fields read) and a 401 renews the
credentials once. An eviction's refusal is an answer, not an error: the drain retries it;
only an unreachable API server raises.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from nodescaler.adapters.k8s.conversion import (
    MIRROR_ANNOTATION,
    SAFE_TO_EVICT,
    has_controller,
    has_local_storage,
    is_daemon_set_pod,
)
from nodescaler.adapters.k8s.core_api import PAGE_SIZE, TIMEOUT_SECONDS, Connection, CoreApi
from nodescaler.adapters.k8s.json_fields import EvictedPod, EvictedPodList, NodeList, NodeWire
from nodescaler.domain.cluster.snapshot import DisruptionBudget
from nodescaler.domain.outside_text import outside
from nodescaler.domain.scale_down.drain import DrainPod, Eviction, EvictionOutcome
from nodescaler.domain.scale_down.pod_rules import deletion_deadline
from nodescaler.errors import KubernetesUnavailableError

# The eviction subresource's 429 cause: "The disruption budget web needs 2 healthy pods
# and has 1 currently" (or "... is still being processed by the server").
_BUDGET = re.compile(r"^The disruption budget (?P<name>\S+) (?P<why>.+)$")


def _drain_pod(wire: EvictedPod) -> DrainPod:
    metadata, grace = wire.metadata, wire.spec.terminationGracePeriodSeconds
    return DrainPod(
        namespace=metadata.namespace,
        name=metadata.name,
        uid=metadata.uid,
        phase=wire.status.phase,
        daemon_set=is_daemon_set_pod(metadata),
        mirror=MIRROR_ANNOTATION in metadata.annotations,
        grace_seconds=grace,
        labels=metadata.labels,
        controlled=has_controller(metadata),
        local_storage=has_local_storage(wire.spec.volumes),
        safe_to_evict=metadata.annotations.get(SAFE_TO_EVICT) == "true",
        not_safe_to_evict=metadata.annotations.get(SAFE_TO_EVICT) == "false",
        gone_after=deletion_deadline(metadata.deletionTimestamp, grace),
        created=metadata.creationTimestamp,
    )


def _answer(body: str | bytes | None) -> dict[str, Any]:
    """The Status object an API error carries, or {} if it carries none."""
    try:
        answer = json.loads(body or "{}")
    except ValueError:
        return {}
    return answer if isinstance(answer, dict) else {}


def refusal(pod: DrainPod, status: int, reason: str, body: str | bytes | None) -> Eviction:
    """An eviction the API server did not carry out, with its reason in words."""
    answer = _answer(body)
    message = str(answer.get("message") or reason)
    if status == 404:
        return Eviction(EvictionOutcome.GONE)
    if status == 429:
        for cause in (answer.get("details") or {}).get("causes") or []:
            if match := _BUDGET.match(str(cause.get("message", ""))):
                budget = f"{pod.namespace}/{match['name']}"
                why = f"blocked by PodDisruptionBudget {budget} ({match['why']})"
                return Eviction(EvictionOutcome.BLOCKED, why)
        return Eviction(EvictionOutcome.BLOCKED, f"eviction refused for now: {message}")
    return Eviction(EvictionOutcome.FAILED, f"eviction failed ({status} {reason}): {message}")


class KubernetesDrain:
    """`DrainCluster` over the Kubernetes API."""

    def __init__(
        self,
        connection: Connection,
        *,
        page_size: int = PAGE_SIZE,
        timeout_seconds: float = TIMEOUT_SECONDS,
    ) -> None:
        # Within the timeout: a hung API server is given up on, so the drain still
        # completes its lifecycle action instead of being cut off at Lambda's limit.
        self._api = CoreApi(
            connection, page_size=page_size, timeout_seconds=timeout_seconds, refused=_unavailable
        )

    def find_node(self, instance_id: str) -> str | None:
        from kubernetes import client

        suffix = f"/{instance_id}"
        for page in self._api.listed(client.CoreV1Api.list_node, NodeList):
            for node in page.items:
                if node.spec.providerID.endswith(suffix):
                    return node.metadata.name
        return None

    def cordon(self, node: str) -> bool:
        from kubernetes import client

        read = msgspec.json.decode(
            self._api.answer(client.CoreV1Api.read_node, node), type=NodeWire
        )
        if read.spec.unschedulable:
            return False  # cordoned already, by someone else: theirs to undo
        self._set_unschedulable(node, True)
        return True

    def uncordon(self, node: str) -> None:
        self._set_unschedulable(node, False)

    def _set_unschedulable(self, node: str, unschedulable: bool) -> None:
        from kubernetes import client

        # A dict body goes as a strategic merge patch, as `kubectl cordon` sends it; the
        # one field the drain's rights let it change (infra/kubernetes).
        patch = {"spec": {"unschedulable": unschedulable}}
        self._api.answer(client.CoreV1Api.patch_node, node, patch)

    def pods_on(self, node: str) -> list[DrainPod]:
        from kubernetes import client

        return [
            _drain_pod(pod)
            for page in self._api.listed(
                client.CoreV1Api.list_pod_for_all_namespaces,
                EvictedPodList,
                field_selector=f"spec.nodeName={node}",
            )
            for pod in page.items
        ]

    def budgets(self) -> tuple[DisruptionBudget, ...] | None:
        """The disruption budgets, to tell a kube-system pod no budget selects."""
        return self._api.budgets()

    def evict(self, pod: DrainPod, grace_seconds: int) -> Eviction:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": {"gracePeriodSeconds": grace_seconds},
        }
        try:
            self._api.request(
                client.CoreV1Api.create_namespaced_pod_eviction, pod.name, pod.namespace, body
            )
        except ApiException as error:
            if error.status in (401, 403):  # no right to evict: waiting won't give it
                raise _unavailable(error) from None
            return refusal(pod, error.status, str(error.reason), error.body)
        return Eviction(EvictionOutcome.EVICTED)


def _unavailable(error: Any) -> KubernetesUnavailableError:
    message = _answer(error.body).get("message") or error.reason
    return KubernetesUnavailableError(f"Kubernetes API: {error.status} {outside(message)}")

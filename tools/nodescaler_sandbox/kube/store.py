"""The loopback API server's objects: each stored as written (serialized once), the
PodDisruptionBudgets' status computed live, and evictions and deletions as the API server
decides them (`apiserver` serves them over HTTP)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodescaler_sandbox.kube.resources import RESOURCES

Key = tuple[str, str]  # (namespace, name); namespace "" for nodes

KINDS = {r.plural: (r.kind, r.group_version) for r in RESOURCES}


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 300 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        status["details"] = details
    return status


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.body = status_body(code, reason, message, **details)


def is_terminating(pod: dict[str, Any]) -> bool:
    return "deletionTimestamp" in pod["metadata"]


def is_daemon(pod: dict[str, Any]) -> bool:
    """A DaemonSet's pod: it goes with its node, never rescheduled (a drain may evict it)."""
    owners = pod["metadata"].get("ownerReferences") or ()
    return any(o.get("kind") == "DaemonSet" for o in owners)


def is_ready(pod: dict[str, Any]) -> bool:
    if pod.get("status", {}).get("phase") != "Running":
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector object (matchLabels, matchExpressions) against labels."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, op, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        if (
            (op == "In" and labels.get(key) not in values)
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def _budget_count(value: int | str, expected: int, *, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    percent = int(value.rstrip("%"))
    scaled = percent * expected
    return -(-scaled // 100) if round_up else scaled // 100


@dataclass
class Cluster:
    """The objects the server holds, and their serialized bytes."""

    objects: dict[str, dict[Key, dict[str, Any]]] = field(
        default_factory=lambda: {kind: {} for kind in KINDS}
    )
    rendered: dict[str, dict[Key, bytes]] = field(
        default_factory=lambda: {kind: {} for kind in KINDS}
    )
    resource_version: int = 1
    lock: threading.RLock = field(default_factory=threading.RLock)
    # No kubelet here: by default an evicted pod goes at once, as if its containers stopped
    # instantly. With `graceful_deletion`, a bound pod stays, terminating (deletionTimestamp
    # set), until `stop_terminating` plays the kubelet's part, so a drain's wait is visible.
    graceful_deletion: bool = False
    # The replicas of the workload a budget covers (the sandbox's deployments), if known.
    scale_of: Callable[[dict[str, Any]], int | None] | None = None
    # every eviction asked of an existing pod: (namespace, name, deleteOptions.gracePeriodSeconds)
    evictions: list[tuple[str, str, int | None]] = field(default_factory=list)
    evicted: int = 0  # of those, the ones the budgets allowed
    # ... and of those, DaemonSets' pods (Cluster Autoscaler evicts them from a node it
    # drains): they go with the node, no work moved, so the figures leave them out
    daemons_evicted: int = 0
    # Resources of CRDs not installed ("capacitybuffers"): answered 404, as a real server does
    not_installed: frozenset[str] = frozenset()

    def put(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.resource_version += 1
            metadata = obj.setdefault("metadata", {})
            metadata.setdefault("uid", f"{kind}-{self.resource_version}")
            metadata.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
            metadata["resourceVersion"] = str(self.resource_version)
            if kind != "nodes":
                metadata.setdefault("namespace", "default")
            key = (metadata.get("namespace", ""), metadata["name"])
            self.objects[kind][key] = obj
            self.rendered[kind][key] = json.dumps(obj, separators=(",", ":")).encode()
            return obj

    def delete(self, kind: str, key: Key) -> dict[str, Any] | None:
        with self.lock:
            self.resource_version += 1
            self.rendered[kind].pop(key, None)
            return self.objects[kind].pop(key, None)

    def get(self, kind: str, key: Key) -> dict[str, Any]:
        found = self.objects[kind].get(key)
        if found is None:
            singular = KINDS[kind][0].lower()
            raise ApiError(
                404, "NotFound", f'{kind} "{key[1]}" not found', name=key[1], kind=singular
            )
        return found

    # --- the disruption budget controller's arithmetic, done on read ---------------------

    def budget_status(self, pdb: dict[str, Any]) -> dict[str, Any]:
        namespace = pdb["metadata"]["namespace"]
        selector = pdb["spec"].get("selector")
        pods = [
            p
            for (ns, _), p in self.objects["pods"].items()
            if ns == namespace and _matches(selector, p["metadata"].get("labels") or {})
        ]
        # The disruption controller takes expectedPods from the owning workload's scale;
        # this server serves no workloads, so it counts the pods, unless told (`scale_of`).
        scale = self.scale_of(pdb) if self.scale_of else None
        expected = len(pods) if scale is None else scale
        # as the disruption controller counts: a terminating pod is no longer healthy
        healthy = sum(is_ready(p) and not is_terminating(p) for p in pods)
        spec = pdb["spec"]
        if "minAvailable" in spec:
            desired = _budget_count(spec["minAvailable"], expected, round_up=True)
        else:
            unavailable = _budget_count(spec.get("maxUnavailable", 0), expected, round_up=True)
            desired = max(expected - unavailable, 0)
        return {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": max(healthy - desired, 0),
            "observedGeneration": 1,
        }

    def evict(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        with self.lock:
            pod = self.get("pods", (namespace, name))
            self.evictions.append((namespace, name, grace_seconds))
            phase = pod.get("status", {}).get("phase")
            # The eviction subresource's canIgnorePDB: these pods go whatever the budgets say.
            if phase not in ("Succeeded", "Failed", "Pending") and not is_terminating(pod):
                self._check_budgets(pod)
            self.evicted += 1
            self.daemons_evicted += is_daemon(pod)
            self.delete_pod(namespace, name, grace_seconds)

    def _check_budgets(self, pod: dict[str, Any]) -> None:
        namespace = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        budgets = [
            b
            for (ns, _), b in self.objects["poddisruptionbudgets"].items()
            if ns == namespace and _matches(b["spec"].get("selector"), labels)
        ]
        if len(budgets) > 1:
            raise ApiError(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support.",
            )
        if budgets and is_ready(pod):
            budget = budgets[0]
            status = self.budget_status(budget)
            if status["disruptionsAllowed"] <= 0:
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    causes=[
                        {
                            "reason": "DisruptionBudget",
                            "message": (
                                f"The disruption budget {budget['metadata']['name']} needs "
                                f"{status['desiredHealthy']} healthy pods and has "
                                f"{status['currentHealthy']} currently"
                            ),
                        }
                    ],
                )

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """A graceful delete: an unbound or finished pod goes at once, a running one after
        its grace period (the request's, else its own terminationGracePeriodSeconds)."""
        with self.lock:
            pod = self.get("pods", (namespace, name))
            if grace_seconds is None:
                grace_seconds = pod.get("spec", {}).get("terminationGracePeriodSeconds", 30)
            bound = bool(pod.get("spec", {}).get("nodeName"))
            finished = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
            if not self.graceful_deletion or not bound or finished or grace_seconds == 0:
                self.delete("pods", (namespace, name))
            elif not is_terminating(pod):
                terminating = json.loads(json.dumps(pod))
                terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                terminating["metadata"]["deletionGracePeriodSeconds"] = grace_seconds
                self.put("pods", terminating)

    def stop_terminating(self, node_name: str | None = None) -> list[str]:
        """The kubelet's part: terminating pods (on one node) are removed; their names."""
        with self.lock:
            stopped = [
                key
                for key, pod in self.objects["pods"].items()
                if is_terminating(pod)
                and (node_name is None or pod.get("spec", {}).get("nodeName") == node_name)
            ]
            for key in stopped:
                self.delete("pods", key)
            return [f"{namespace}/{name}" for namespace, name in stopped]


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """JSON merge patch (RFC 7386); also a strategic merge patch of the node fields patched
    here: scalars, and `spec.taints`, an atomic list (no merge key) replaced whole."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = value
    return target

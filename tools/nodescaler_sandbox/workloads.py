"""The workloads a scenario puts on the cluster: deployments that keep a replica count
(a piecewise-linear curve over the scenario), replacing pods evicted or lost with their
node; and queues whose workers are pods, one per waiting task up to a cap, made at KEDA's
30-s polls as a KEDA ScaledJob runs them, each Ready worker finishing a task every
`task_minutes`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from nodescaler_sandbox.cluster import HOSTNAME, NAMESPACE, READY_AFTER, READY_AT, uid_order
from nodescaler_sandbox.kube.apiserver import Cluster, is_terminating


def pod(
    name: str,
    app: str,
    cpu: str,
    memory: str,
    *,
    created: datetime | None = None,
    extended: dict[str, int] | None = None,
    priority: int = 0,
    ready_after_seconds: float = 0,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    namespace: str = NAMESPACE,
    bare: bool = False,
    local_storage: str | None = None,
    annotations: dict[str, str] | None = None,
    one_per_node: bool = False,
    job: bool = False,
) -> dict[str, Any]:
    """A pod of the workload `app`: made by its ReplicaSet (the controller), or by a Job of
    its own (`job`: a KEDA ScaledJob's worker), unless `bare` (as `kubectl run` makes one);
    `local_storage`: an emptyDir or hostPath volume; `one_per_node`: a required
    anti-affinity to its own workload on each node."""
    asked = {"cpu": cpu, "memory": memory} | {k: str(n) for k, n in (extended or {}).items()}
    spec: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": asked}}]}
    if local_storage == "emptyDir":
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    elif local_storage == "hostPath":
        spec["volumes"] = [{"name": "host", "hostPath": {"path": f"/var/lib/{app}"}}]
    if priority:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = [t | {"operator": "Equal"} for t in tolerations]
    if one_per_node:
        own = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOSTNAME}
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own]}
        }
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app": app},
        "annotations": (annotations or {}) | {READY_AFTER: str(ready_after_seconds)},
    }
    if job:
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"job-{name}"}
        metadata["ownerReferences"] = [owner | {"controller": True}]
    elif not bare:
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app, "uid": f"rs-{app}"}
        metadata["ownerReferences"] = [owner | {"controller": True}]
    if created is not None:
        metadata["creationTimestamp"] = created.isoformat().replace("+00:00", "Z")
    return {
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def replicas_at(curve: Iterable[tuple[float, int]], minute: float) -> int:
    """The curve's value at `minute`: linear between its points, flat beyond them."""
    points = sorted(curve)
    if minute <= points[0][0]:
        return points[0][1]
    for (m0, r0), (m1, r1) in pairwise(points):
        if minute <= m1:
            return round(r0 + (r1 - r0) * (minute - m0) / (m1 - m0))
    return points[-1][1]


@dataclass
class Deployment:
    """Keeps `replicas_at(curve, minute)` pods of one shape: creates the missing, removes
    the newest extra (pending ones first), as a ReplicaSet scales down."""

    name: str
    cpu: str
    memory: str
    curve: list[tuple[float, int]]
    ready_after_seconds: float = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    extended: dict[str, int] = field(default_factory=dict)
    priority: int = 0
    namespace: str = NAMESPACE
    bare: bool = False  # its pods have no controller (a script keeps their number)
    local_storage: str | None = None  # "emptyDir" or "hostPath"
    annotations: dict[str, str] = field(default_factory=dict)
    one_per_node: bool = False  # its pods spread one a node (a required anti-affinity)
    jobs: bool = False  # each pod a Job of its own (a queue's workers, as KEDA's ScaledJob)
    created: int = 0

    def reconcile(self, store: Cluster, minute: float, now: datetime) -> None:
        self.resize(store, replicas_at(self.curve, minute), now)

    def resize(self, store: Cluster, wanted: int, now: datetime) -> None:
        with store.lock:
            mine = [
                (key, p)
                for key, p in store.objects["pods"].items()
                if p["metadata"].get("labels", {}).get("app") == self.name and not is_terminating(p)
            ]
            for _ in range(wanted - len(mine)):
                store.put("pods", self._pod(now))
            extra = len(mine) - wanted
            if extra > 0:
                newest_pending_first = sorted(
                    mine, key=lambda kp: (bool(kp[1]["spec"].get("nodeName")), -uid_order(kp[1]))
                )
                for key, _ in newest_pending_first[:extra]:
                    store.delete("pods", key)

    def _pod(self, now: datetime) -> dict[str, Any]:
        self.created += 1
        return pod(
            f"{self.name}-{self.created}",
            self.name,
            self.cpu,
            self.memory,
            created=now,
            extended=self.extended,
            priority=self.priority,
            ready_after_seconds=self.ready_after_seconds,
            node_selector=self.node_selector,
            tolerations=self.tolerations,
            namespace=self.namespace,
            bare=self.bare,
            local_storage=self.local_storage,
            annotations=self.annotations,
            one_per_node=self.one_per_node,
            job=self.jobs,
        )

    def pods(self, store: Cluster) -> list[dict[str, Any]]:
        return [
            p
            for p in store.objects["pods"].values()
            if p["metadata"].get("labels", {}).get("app") == self.name
        ]


# KEDA's pollingInterval, by default (https://keda.sh/docs/2.16/reference/scaledjob-spec/:
# "pollingInterval: 30 # Optional. Default: 30 seconds"): how often a ScaledJob reads its
# queue and creates the jobs it lacks
KEDA_POLLING_SECONDS = 30


def keda_poll(second: float) -> float:
    """The first KEDA poll at or after `second` (polls every KEDA_POLLING_SECONDS from the
    scenario's start, in every run alike)."""
    return math.ceil(second / KEDA_POLLING_SECONDS) * KEDA_POLLING_SECONDS


@dataclass
class QueueWork:
    """Tasks arriving in an SQS queue, each taken by a worker pod of its own (as a KEDA
    ScaledJob runs them): at each of KEDA's polls the workers are made up to the messages
    in the queue (up to the cap), none between polls; a task is done `task_minutes` after
    its worker turned Ready, and its message deleted; a worker lost with its node is made
    anew at once (its Job's controller, not KEDA), leaving its task to the new one."""

    queue: str
    arrivals: dict[float, int]  # minute → tasks sent
    task_minutes: float
    workers: Deployment
    max_workers: int
    _polled: int = -1  # the last poll's number
    _target: int = 0  # the workers the last poll asked for
    _done: int = 0  # of those, done since
    lost_minutes: float = 0.0  # work of workers gone at their task (evicted, lost with a node)
    _at_work: dict[str, datetime] = field(default_factory=dict)  # worker → Ready since
    _looked: datetime | None = None  # the last stock-take

    @property
    def task_time(self) -> timedelta:
        return timedelta(minutes=self.task_minutes)

    def wanted(self, second: float, messages: int) -> int:
        """The workers there should be at `second`: at a poll (the first look in its
        interval), one per message up to the cap; until the next, those less the done."""
        poll = int(second // KEDA_POLLING_SECONDS)
        if poll != self._polled:
            self._polled, self._target, self._done = poll, min(messages, self.max_workers), 0
        return max(self._target - self._done, 0)

    def take_stock(self, store: Cluster, now: datetime) -> int:
        """The workers at a task now (Ready: each has received its message). A worker at
        its task at the last stock-take and gone since without finishing lost its work
        (counted up to that stock-take: the least it lost)."""
        at_work = {
            p["metadata"]["name"]: datetime.fromisoformat(p["metadata"]["annotations"][READY_AT])
            for p in self.workers.pods(store)
            if READY_AT in p["metadata"].get("annotations", {})
        }
        if self._looked is not None:
            gone = [since for name, since in self._at_work.items() if name not in at_work]
            self.lost_minutes += sum((self._looked - s).total_seconds() for s in gone) / 60
        self._at_work, self._looked = at_work, now
        return len(at_work)

    def finish(self, store: Cluster, now: datetime) -> int:
        """Removes the workers whose task is done; how many."""
        done = self._finish(store, now)
        self._done += done
        return done

    def _finish(self, store: Cluster, now: datetime) -> int:
        done = 0
        with store.lock:
            for found in self.workers.pods(store):
                ready_at = found["metadata"].get("annotations", {}).get(READY_AT)
                if ready_at and now - datetime.fromisoformat(ready_at) >= self.task_time:
                    store.delete(
                        "pods", (found["metadata"]["namespace"], found["metadata"]["name"])
                    )
                    self._at_work.pop(found["metadata"]["name"], None)  # done: nothing lost
                    done += 1
        return done

"""The baseline's scale-down rules: utilization and its thresholds, which pods block a
drain, and whether a node's pods fit elsewhere (`baseline` runs them)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from nodescaler.domain.cluster.quantity import whole_units

from nodescaler_sandbox.baseline_flags import (
    DELAY_AFTER_FAILURE,
    DELETION_CANDIDATE,
    GPU_LABEL,
    GPU_RESOURCES,
    LONG_TERMINATING_EXTRA,
    MAX_POD_EVICTION_TIME,
    TEMPLATE_TAG,
    UNNEEDED,
    UTILIZATION,
    DrainFlags,
    Flags,
)
from nodescaler_sandbox.cluster import apart_keys, quantities, requests

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
UNNEEDED_TIME_TAG = TEMPLATE_TAG + "autoscaling-options/scaledownunneededtime"
UTILIZATION_TAG = TEMPLATE_TAG + "autoscaling-options/scaledownutilizationthreshold"
GPU_UTILIZATION_TAG = TEMPLATE_TAG + "autoscaling-options/scaledowngpuutilizationthreshold"
GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def unneeded_time(tags: dict[str, str]) -> timedelta:
    """A group's scale-down unneeded time: its tag (a Go duration, "2m0s"), overriding
    --scale-down-unneeded-time for it (cloudprovider/aws/README.md, "Auto-Discovery
    Setup"; aws_manager.go, GetOptions); the flag's when the tag is absent or unreadable."""
    written = tags.get(UNNEEDED_TIME_TAG, "")
    parts = GO_DURATION.findall(written)
    if not parts or "".join(n + u for n, u in parts) != written:
        return UNNEEDED
    return timedelta(seconds=sum(float(n) * GO_UNITS[u] for n, u in parts))


def utilization_threshold(
    tags: dict[str, str], tag: str = UTILIZATION_TAG, flag: float = UTILIZATION
) -> float:
    """A group's scale-down utilization threshold: its tag (a float), overriding
    --scale-down-utilization-threshold for it (cloudprovider/aws/README.md; aws_manager.go,
    GetAsgOptions, which keeps the flag's on a value it cannot parse); for a GPU node the
    scaledowngpuutilizationthreshold tag and --scale-down-gpu-utilization-threshold."""
    try:
        return float(tags[tag])
    except (KeyError, ValueError):
        return flag


def underutilized(utilization: float, threshold: float) -> bool:
    """Whether a node is eligible for scale-down: at or below the threshold
    (core/scaledown/eligibility/eligibility.go, isNodeAtOrBelowUtilizationThreshold: only
    `Utilization > threshold` keeps it). An empty node always is, even at a threshold of 0:
    the FAQ's "How can I prevent Cluster Autoscaler from scaling down non-empty nodes?"."""
    return utilization <= threshold


def has_gpu(node: dict[str, Any]) -> bool:
    """A GPU node as the AWS provider sees one (utils/gpu/gpu.go, NodeHasGpu): the
    k8s.amazonaws.com/accelerator label, or a GPU vendor's resource allocatable."""
    allocatable = node["status"].get("allocatable") or {}
    labelled = GPU_LABEL in (node["metadata"].get("labels") or {})
    return labelled or any(whole_units(allocatable.get(r, "0")) > 0 for r in GPU_RESOURCES)


def utilization(
    node: dict[str, Any], pods: list[dict[str, Any]], now: datetime, flags: Flags | None = None
) -> float:
    """A node's utilization as simulator/utilization/info.go's Calculate gives it: on a GPU
    node its GPUs' alone, else the larger of CPU and memory; each the requests summed over
    allocatable. With --ignore-daemonsets-utilization (or -mirror-pods-) those pods' requests
    leave both the sum and the allocatable (CalculateUtilizationOfResource); pods
    terminating past their grace period and 30 s are not counted (IsPodLongTerminating).
    A GPU node with no GPU allocatable yet counts as 0 (its GPUs unready)."""
    flags = flags or Flags()
    allocatable = node["status"]["allocatable"]
    cpu, memory = quantities(allocatable)
    if has_gpu(node):
        name = next((r for r in GPU_RESOURCES if r in allocatable), GPU_RESOURCES[0])
        totals = {name: whole_units(allocatable.get(name, "0"))}
    else:
        totals = {"cpu": cpu, "memory": memory}
    asked = dict.fromkeys(totals, 0)
    skipped = dict.fromkeys(totals, 0)
    for found in pods:
        wants = asks(found)
        if (flags.ignore_daemonsets_utilization and _daemonset(found)) or (
            flags.ignore_mirror_pods_utilization and _mirror(found)
        ):
            for resource in totals:
                skipped[resource] += wants.get(resource, 0)
        elif not _long_terminating(found, now):
            for resource in totals:
                asked[resource] += wants.get(resource, 0)
    shares = [
        asked[r] / (totals[r] - skipped[r]) if totals[r] - skipped[r] > 0 else 0.0 for r in totals
    ]
    return max(shares)


def _daemonset(pod: dict[str, Any]) -> bool:
    owners = pod["metadata"].get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners)


def _mirror(pod: dict[str, Any]) -> bool:
    return "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {})


def _long_terminating(pod: dict[str, Any], now: datetime) -> bool:
    deleted = pod["metadata"].get("deletionTimestamp")
    if not deleted:
        return False
    grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
    since = datetime.fromisoformat(deleted.replace("Z", "+00:00"))
    return since + timedelta(seconds=grace) + LONG_TERMINATING_EXTRA < now


def to_move(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods a node's removal reschedules: not its DaemonSet's nor its mirror pods, nor
    finished ones (simulator/drain.go, GetPodsToMove)."""
    return [
        p
        for p in pods
        if not _daemonset(p)
        and not _mirror(p)
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]


def soft_tainted(node: dict[str, Any]) -> bool:
    return any(t["key"] == DELETION_CANDIDATE for t in node["spec"].get("taints") or [])


@dataclass
class Budgets:
    """The PodDisruptionBudgets' disruptions left, as the planner spends them while it
    finds nodes removable (core/scaledown/pdb/basic.go, basicRemainingPdbTracker): read
    from each budget's status (disruptionsAllowed), one taken for each pod of a node
    found removable."""

    budgets: list[tuple[str, dict[str, str], list[int]]]  # namespace, matchLabels, [left]

    @classmethod
    def of(cls, store: Any) -> Budgets:
        return cls(
            [
                (
                    b["metadata"].get("namespace", "default"),
                    (b["spec"].get("selector") or {}).get("matchLabels") or {},
                    [store.budget_status(b)["disruptionsAllowed"]],
                )
                for b in store.objects["poddisruptionbudgets"].values()
            ]
        )

    def matching(self, pod: dict[str, Any]) -> list[list[int]]:
        namespace, labels = pod["metadata"].get("namespace"), pod["metadata"].get("labels") or {}
        return [
            left
            for ns, selector, left in self.budgets
            if ns == namespace and all(labels.get(k) == v for k, v in selector.items())
        ]

    def short(self, pod: dict[str, Any]) -> bool:
        """simulator/drainability/rules/pdb/rule.go: a budget of the pod's allows none."""
        return any(left[0] < 1 for left in self.matching(pod))

    def remove(self, pods: list[dict[str, Any]]) -> None:
        for found in pods:
            for left in self.matching(found):
                left[0] -= 1


# the controllers a pod counts as replicated by, with --skip-nodes-with-custom-controller-pods
# at its default, true (simulator/drainability/rules/replicated/rule.go, replicatedKind)
REPLICATED_KINDS = frozenset({"ReplicationController", "Job", "ReplicaSet", "StatefulSet"})


def blocks_drain(pod: dict[str, Any], budgets: Budgets, flags: DrainFlags, now: datetime) -> bool:
    """Whether the pod keeps its node, as the drainability rules decide, in their order
    (simulator/drainability/rules/rules.go, Default): mirror, long-terminating, DaemonSet,
    safe-to-evict "true" and finished pods never do; else a pod with no controller, a
    kube-system pod no budget selects until it is --blocking-system-pod-distruption-timeout
    old (rules/system/rule.go; past it, drainable whatever the later rules say), one
    annotated safe-to-evict "false", one with an emptyDir or hostPath volume, or one a
    budget with no disruption left covers (rules/pdb/rule.go)."""
    metadata, spec = pod["metadata"], pod["spec"]
    annotations = metadata.get("annotations") or {}
    owners = metadata.get("ownerReferences") or []
    if _mirror(pod) or _long_terminating(pod, now) or _daemonset(pod):
        return False
    phase = pod["status"].get("phase")
    will_not_restart = phase == "Succeeded" and spec.get("restartPolicy") in ("Never", "OnFailure")
    if annotations.get(SAFE_TO_EVICT) == "true" or phase == "Failed" or will_not_restart:
        return False
    if not any(o.get("controller") and o.get("kind") in REPLICATED_KINDS for o in owners):
        return True  # rules/replicated/rule.go, --skip-nodes-with-custom-controller-pods
    if (
        flags.system_pods
        and metadata.get("namespace") == "kube-system"
        and not budgets.matching(pod)
    ):
        # past the timeout the system rule answers "drainable", and rules.go's Drainable
        # asks no later rule (notsafetoevict, localstorage) of the pod
        return not _older_than(pod, flags.system_pod_timeout, now)
    if annotations.get(SAFE_TO_EVICT) == "false":
        return True
    volumes = spec.get("volumes") or []
    if flags.local_storage and any("emptyDir" in v or "hostPath" in v for v in volumes):
        return True
    return budgets.short(pod)


def _older_than(pod: dict[str, Any], age: timedelta, now: datetime) -> bool:
    """Created more than `age` before `now` (a pod with no creation time never is)."""
    created = pod["metadata"].get("creationTimestamp")
    if not created:
        return False
    return now > datetime.fromisoformat(created.replace("Z", "+00:00")) + age


def in_cooldown(
    now: datetime, last_scale_up: datetime | None, last_failed: datetime | None, delay: timedelta
) -> bool:
    """Within --scale-down-delay-after-add (`delay`) of a scale-up, or 3 minutes of a failed
    scale-down (static_autoscaler.go, isScaleDownInCooldown)."""
    added = last_scale_up is not None and now - last_scale_up < delay
    return added or (last_failed is not None and now - last_failed < DELAY_AFTER_FAILURE)


def gives_up(started: datetime, now: datetime) -> bool:
    """Whether a drain that began evicting at `started` has run out of time: Cluster
    Autoscaler retries a refused eviction every 10 s for MaxPodEvictionTime (2 minutes),
    then fails the node's deletion (core/scaledown/actuation/drain.go)."""
    return now - started >= MAX_POD_EVICTION_TIME


@dataclass
class Place:
    """What a node has left for pods that would move to it, as the scheduler's filters
    that matter here judge it (NodeResourcesFit with pod slots and extended resources,
    NodeAffinity with nodeSelector, TaintToleration): the baseline's own reading, so the
    yardstick does not lean on nodescaler's."""

    free: dict[str, int]  # cpu (millicores), memory (bytes), pods, extended resources
    labels: dict[str, str]
    taints: list[dict[str, str]]  # NoSchedule and NoExecute: the ones that filter
    held: Counter[str] = field(default_factory=Counter)  # its pods' `apart_keys`
    # whether the node's labels and taints admit a pod, by the pod's id: a plan asks it of
    # every node for every pod it moves; the pod is kept with its answer, so no id is reused
    _admitted: dict[int, tuple[dict[str, Any], bool]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @classmethod
    def of(cls, node: dict[str, Any], pods: list[dict[str, Any]]) -> Place:
        allocatable = node["status"]["allocatable"]
        cpu, memory = quantities(allocatable)
        free = {k: whole_units(v) for k, v in allocatable.items() if k not in ("cpu", "memory")}
        place = cls(
            free | {"cpu": cpu, "memory": memory},
            node["metadata"].get("labels") or {},
            [
                t
                for t in node["spec"].get("taints") or []
                if t.get("effect", "NoSchedule") in ("NoSchedule", "NoExecute")
            ],
        )
        for found in pods:
            place.take(found)
        return place

    def fits(self, pod: dict[str, Any]) -> bool:
        return (
            all(self.free.get(k, 0) >= n for k, n in asks(pod).items())
            and self.admits(pod)
            and not (self.held and any(self.held[k] > 0 for k in apart_keys(pod["spec"])))
        )

    def admits(self, pod: dict[str, Any]) -> bool:
        """The pod's nodeSelector, required node affinity and tolerations let it here."""
        known = self._admitted.get(id(pod))
        if known is None:
            spec = pod["spec"]
            admitted = (
                all(self.labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items())
                and _affinity_allows(spec, self.labels)
                and all(_tolerated(t, spec.get("tolerations") or []) for t in self.taints)
            )
            known = self._admitted[id(pod)] = (pod, admitted)
        return known[1]

    def take(self, *pods: dict[str, Any]) -> None:
        for pod in pods:
            for name, amount in asks(pod).items():
                self.free[name] = self.free.get(name, 0) - amount
            if keys := apart_keys(pod["spec"]):
                self.held.update(keys)


def asks(pod: dict[str, Any]) -> dict[str, int]:
    """What a pod takes of a node: a pod slot, its CPU, memory and other requests."""
    cpu, memory = requests(pod)
    asked = {"pods": 1, "cpu": cpu, "memory": memory}
    for container in pod["spec"].get("containers", []):
        for name, amount in (container.get("resources") or {}).get("requests", {}).items():
            if name not in ("cpu", "memory"):
                asked[name] = asked.get(name, 0) + whole_units(amount)
    return asked


def _tolerated(taint: dict[str, str], tolerations: list[dict[str, str]]) -> bool:
    """A toleration matches a taint's effect (or all), its key (or all, with Exists and
    no key) and, with Equal, its value (core/v1 Toleration.ToleratesTaint)."""
    return any(
        t.get("effect", "") in ("", taint.get("effect", "NoSchedule"))
        and t.get("key", "") in ("", taint["key"])
        and (t.get("key") or t.get("operator") == "Exists")
        and (t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""))
        for t in tolerations
    )


def _affinity_allows(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """The pod's required node affinity: one of its terms with every expression met."""
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms")
    if not required:
        return True
    return any(
        all(_meets(e, labels.get(e["key"])) for e in term.get("matchExpressions") or [])
        for term in required
    )


def _meets(expression: dict[str, Any], value: str | None) -> bool:
    """A node selector requirement (In, NotIn, Exists, DoesNotExist) on a label's value."""
    operator: str = expression["operator"]
    values: list[str] = expression.get("values") or []
    if operator in ("In", "NotIn"):
        return (value in values) == (operator == "In")
    if operator in ("Exists", "DoesNotExist"):
        return (value is not None) == (operator == "Exists")
    return False  # Gt, Lt: no pod here asks for them


def in_planner_order(
    pods_on: dict[str, list[dict[str, Any]]], unneeded: Collection[str]
) -> list[str]:
    """The nodes, empty first, then those unneeded at the last loop (scaledowncandidates'
    sorting processor with CA's two comparers, EmptySorting and PreviousCandidates), then
    by name, a stand-in for the lister's order: with each removal's moves kept, the order
    decides which go."""
    return sorted(pods_on, key=lambda n: (bool(to_move(pods_on[n])), n not in unneeded, n))


def moves_elsewhere(
    pods: list[dict[str, Any]], name: str, free: dict[str, Place]
) -> dict[str, list[dict[str, Any]]] | None:
    """Where `pods` go, first-fit, on the other schedulable nodes (node → the pods it takes),
    or None when one fits nowhere. The rooms are left as they are: what the pods would take
    is kept beside them (`taken`, a node's room copied when a pod first goes to it) until
    the caller keeps the moves (`Place.take`). A pod's requests are read once, not once a
    node; CPU and memory, then the rest, are compared before the node's filters
    (`Place.admits`)."""
    taken: dict[str, dict[str, int]] = {}
    went: dict[str, set[str]] = {}  # the `apart_keys` of the pods moved to each node
    moves: dict[str, list[dict[str, Any]]] = {}
    for found in pods:
        asked, keys = asks(found), apart_keys(found["spec"])
        cpu, memory = asked["cpu"], asked["memory"]
        for other, place in free.items():
            room = taken.get(other, place.free)
            if room.get("cpu", 0) < cpu or room.get("memory", 0) < memory or other == name:
                continue
            if any(place.held[k] > 0 or k in went.get(other, ()) for k in keys):
                continue  # InterPodAffinity, NodePorts
            if all(room.get(k, 0) >= n for k, n in asked.items()) and place.admits(found):
                room = taken[other] = dict(room)
                for resource, amount in asked.items():
                    room[resource] = room.get(resource, 0) - amount
                went.setdefault(other, set()).update(keys)
                moves.setdefault(other, []).append(found)
                break
        else:
            return None
    return moves

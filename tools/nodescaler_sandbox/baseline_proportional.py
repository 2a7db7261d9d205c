""" "CA tuned"'s proportional placeholders: a policy's reservation target as the dynamic
overprovisioning of Cluster Autoscaler's FAQ ("How can I configure overprovisioning with
Cluster Autoscaler?": for "dynamic size (i.e. 20% of resources in the cluster) ... use
Horizontal Cluster Proportional Autoscaler which will change number of pause pods
depending on the size of the cluster"), one cluster-proportional-autoscaler (CPA,
kubernetes-sigs/cluster-proportional-autoscaler) for each group with such a target.

CPA, read in its source:
- every `--poll-period-seconds` (10 by default: cmd/cluster-proportional-autoscaler/
  options/options.go, `NewAutoScalerConfig`), the first poll at its start
  (pkg/autoscaler/autoscaler_server.go, `AutoScaler.Run`), it counts the nodes its
  informer lists, only those matching `--nodelabels` (pkg/autoscaler/k8sclient/
  k8sclient.go, `NewK8sClient`: the label selector on the node informer), and of them the
  schedulable ones (not cordoned, condition Ready) and their cores: the sum of their
  allocatable CPU, rounded up to a whole core (`k8sClient.GetClusterStatus`,
  resource.Quantity's `Value`);
- in linear mode (pkg/autoscaler/controller/linearcontroller/linear_controller.go,
  `getExpectedReplicasFromParams` and `getExpectedReplicasFromParam`): replicas =
  max(ceil(cores / coresPerReplica), ceil(nodes / nodesPerReplica)), each term clamped
  to [min, max] (max 0: none), a term whose per-replica figure is 0 (not given) counting 1,
  at least 2 by nodes with `preventSinglePointFailure` and more than one node; `min`
  below 1 is read as 1 (`parseParams`): linear mode never reaches zero;
- in ladder mode (pkg/autoscaler/controller/laddercontroller/ladder_controller.go,
  `getExpectedReplicasFromEntries`): the replicas of the last `coresToReplicas` entry
  whose cores are at most the count (the larger of the cores' and the nodes' ladders);
  an entry may give 0 (its README: "Replicas can be set to 0 (unlike in linear mode)");
- it writes the count to its target's scale (`k8sClient.UpdateReplicas`).

The rule, the same for every group and scenario: for a `CapacityReservation` metric with
a `Utilization` target of T % on cpu or memory (any `headroom`: `fromArrivals` sizes the
room at most the target's, and CPA's count is fixed by the target, so an operator keeps
the most), placeholders take (100 - T) % of the group's allocatable:
- one shape: an eighth (`SLICE`) of one node's allocatable CPU and memory, the same
  fraction in every group. A fraction of a node, not a fixed size, so the rule holds for
  a node of 4 cores as of 64; an eighth so the held room overshoots the target by at most
  an eighth of a node per group (CPA rounds up), a placeholder fits in the room a node's
  pods leave, and a 50-node group's placeholders stay a few hundred pods. Extended
  resources (GPUs) are not held: a reservation is of CPU or memory;
- at priority -1, kept on the group's nodes by the nodeSelector the buffers' placeholders
  have (`baseline_tuning.GROUP_LABEL`), tolerating the group's taints (they must land on
  its nodes), a Deployment of pause pods as the FAQ's;
- CPA with `--nodelabels=<GROUP_LABEL>=<group>` (the group's schedulable nodes alone),
  `--target=deployment/<the placeholders>`, polling every 10 s, in linear mode with
  coresPerReplica = a slice's cores x 100 / (100 - T), so the slices take (100 - T) % of
  the group's cores; min = the replicas for the group's minimum (the tuned MinSize's nodes'
  cores, so the room is held while its first nodes boot), max = those for its MaxSize; no
  nodesPerReplica, no preventSinglePointFailure (placeholders are no service);
- memory: CPA counts cores and nodes, never memory. A group's nodes are of one shape, so
  a slice of a node's CPU and memory is the same share of both: holding (100 - T) % of the
  cores holds (100 - T) % of the memory. A memory target maps through the cores so, and a
  policy with both maps the larger need: (100 - T) for the lower of its two targets;
- a group whose minimum is 0: linear mode keeps one placeholder at zero nodes, whose
  pending pod would make CA start a node the policy lets go. An operator who scales the
  group to zero runs CPA in ladder mode instead, with one `coresToReplicas` entry per node
  count from 0 to MaxSize, the same count as linear mode's at each from two nodes, and 0
  at none and at one: placeholders on the group's last node would keep it for ever (CA
  removes a node only if its pods, the placeholders among them at priority -1 above the
  expendable cutoff, fit on other nodes: none is left), so the first node holds no room
  and each next node the target's;
- not mapped: a reservation of `pods`, or a target of `Value` or `AverageValue` (a room
  not a share of the group's allocatable; no policy here has one), and T = 100 (no room).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nodescaler.domain.cluster.quantity import millicores
from nodescaler.domain.policy import CapacityReservationMetric, NodeGroupPolicy
from nodescaler.domain.policy.metrics import TargetType

from nodescaler_sandbox.cadence import Cadence

if TYPE_CHECKING:
    from nodescaler_sandbox.cluster import Room
    from nodescaler_sandbox.kube.apiserver import Cluster
    from nodescaler_sandbox.workloads import Deployment

SLICE = 8  # a placeholder: an eighth of one node's allocatable CPU and memory
POLL_PERIOD_SECONDS = 10  # CPA's --poll-period-seconds, its default
POLL = Cadence(POLL_PERIOD_SECONDS)
MEBIBYTE = 2**20
MAPPED = ("cpu", "memory")  # the reservations CPA's core count can hold room for


@dataclass(frozen=True)
class Proportional:
    """One CPA for a group's placeholders: their shape (`requests`, where they go), the
    nodes it counts (`node_labels`, its --nodelabels) and its parameters (`params`, its
    ConfigMap: {"linear": {...}} or {"ladder": {...}})."""

    group: str
    requests: dict[str, str]
    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]
    node_labels: dict[str, str]
    params: dict[str, Any]

    def flags(self, target: str) -> dict[str, Any]:
        """CPA's command line, as an operator would deploy it for `target`."""
        return {
            "--target": f"deployment/{target}",
            "--nodelabels": ",".join(f"{k}={v}" for k, v in self.node_labels.items()),
            "--poll-period-seconds": POLL_PERIOD_SECONDS,
            "--default-params": self.params,
        }


def free_share(policy: NodeGroupPolicy) -> float | None:
    """The percentage of the group's allocatable the placeholders take: 100 - T for the
    lowest `Utilization` target of a cpu or memory reservation; None if none is mapped."""
    targets = [
        metric.target.amount
        for metric in policy.spec.metrics
        if isinstance(metric, CapacityReservationMetric)
        and metric.capacity_reservation.resource in MAPPED
        and metric.target.type is TargetType.UTILIZATION
    ]
    if not targets or min(targets) >= 100:
        return None
    return 100 - min(targets)


def proportional(
    policy: NodeGroupPolicy,
    group: str,
    node: Room,
    bounds: tuple[int, int],
    selector: Mapping[str, str],
) -> Proportional | None:
    """The CPA an operator runs for `policy`'s reservation on `group` (a node of it offers
    `node`; the tuned MinSize and MaxSize are `bounds`; its nodes carry `selector`), or
    None when the policy has no target it maps (see the module's docstring)."""
    share = free_share(policy)
    if share is None:
        return None
    slice_millis = node.cpu // SLICE
    per_replica = round(slice_millis / 1000 * 100 / share, 3)  # coresPerReplica
    low, high = bounds
    node_cores = node.cpu / 1000

    def replicas(nodes: int) -> int:  # a count of whole nodes' worth, as CPA rounds it
        return math.ceil(math.ceil(nodes * node_cores) / per_replica)

    params: dict[str, Any]
    if low >= 1:
        params = {
            "linear": {"coresPerReplica": per_replica, "min": replicas(low), "max": replicas(high)}
        }
    else:  # linear mode keeps one, a last node's placeholders keep it: a ladder
        ladder = [[math.ceil(n * node_cores), replicas(n) if n > 1 else 0] for n in range(high + 1)]
        params = {"ladder": {"coresToReplicas": ladder}}
    return Proportional(
        group,
        {"cpu": f"{slice_millis}m", "memory": f"{node.memory // SLICE // MEBIBYTE}Mi"},
        dict(selector),
        [
            {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect}
            for t in node.taints
        ],
        dict(selector),
        params,
    )


# --- CPA's count ------------------------------------------------------------------------


def cluster_status(
    nodes: Iterable[dict[str, Any]], node_labels: Mapping[str, str]
) -> tuple[int, int]:
    """The schedulable nodes matching `node_labels` and their cores, as CPA counts them
    (`GetClusterStatus`): not cordoned, Ready; the allocatable CPU summed, then rounded up."""
    count, millis = 0, 0
    for node in nodes:
        labels = node["metadata"].get("labels", {})
        if any(labels.get(k) != v for k, v in node_labels.items()):
            continue  # not listed: the informer's label selector
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in node["status"].get("conditions", [])
        )
        if ready and not node["spec"].get("unschedulable"):
            count += 1
            millis += millicores(node["status"]["allocatable"].get("cpu", "0"))
    return count, math.ceil(millis / 1000)


def expected_replicas(params: Mapping[str, Any], nodes: int, cores: int) -> int:
    """CPA's replicas for the schedulable `nodes` and `cores`, in its ConfigMap's mode."""
    if "linear" in params:
        return linear_replicas(params["linear"], nodes, cores)
    ladder = params["ladder"]
    return max(
        _ladder_step(cores, ladder.get("coresToReplicas", [])),
        _ladder_step(nodes, ladder.get("nodesToReplicas", [])),
    )


def linear_replicas(linear: Mapping[str, Any], nodes: int, cores: int) -> int:
    """Linear mode (`getExpectedReplicasFromParams`): see the module's docstring."""
    low = max(int(linear.get("min", 0)), 1)  # parseParams: a min of 0 is read as 1
    high = int(linear.get("max", 0))

    def term(amount: int, per_replica: float) -> int:
        if not per_replica:
            return 1  # not given: counts one, unclamped
        wanted = math.ceil(amount / per_replica)
        return max(low, min(high, wanted) if high else wanted)

    by_cores = term(cores, float(linear.get("coresPerReplica", 0)))
    by_nodes = term(nodes, float(linear.get("nodesPerReplica", 0)))
    if linear.get("preventSinglePointFailure") and nodes > 1 and by_nodes < 2:
        by_nodes = 2
    return max(by_cores, by_nodes)


def _ladder_step(amount: int, entries: Sequence[Sequence[int]]) -> int:
    """The replicas of the last entry whose threshold is at most `amount` (the first
    entry's below all of them); 0 without entries (`getExpectedReplicasFromEntries`)."""
    ordered = sorted(entries, key=lambda e: e[0])
    if not ordered:
        return 0
    below = [e for e in ordered if e[0] <= amount]
    return int((below[-1] if below else ordered[0])[1])


# --- in the sandbox ---------------------------------------------------------------------


@dataclass
class ProportionalAutoscaler:
    """CPA running in the cluster: at each poll, the group's count read from the API
    server's nodes and written to its Deployment's replicas (the world's ReplicaSet then
    makes or removes the pods, `World.react`)."""

    proportional: Proportional
    deployment: Deployment
    cadence: Cadence = POLL
    replicas: int | None = None  # the last count written

    def poll(self, at: int, step: int, store: Cluster) -> None:
        """A poll, if one falls in the step of `step` seconds ending at `at`."""
        if not self.cadence.due(at, step):
            return
        with store.lock:
            nodes, cores = cluster_status(
                store.objects["nodes"].values(), self.proportional.node_labels
            )
        self.replicas = expected_replicas(self.proportional.params, nodes, cores)
        self.deployment.curve = [(0, self.replicas)]  # its scale's spec.replicas

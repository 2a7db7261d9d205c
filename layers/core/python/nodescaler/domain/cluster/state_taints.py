"""Taints that tell a node's state, not what its group's nodes are: a new node has none of
them. A template made from a live node leaves them out, as Cluster Autoscaler's
SanitizeTaints does (node conditions, its own taints, status and startup taints), or one
node under memory pressure would say its group can take no pod at all.
"""

from __future__ import annotations

from nodescaler.domain.cluster.snapshot import Taint
from nodescaler.domain.cluster.startup_taints import BLOCKING, KNOWN

NODE_STATE_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/network-unavailable",
        "node.cloudprovider.kubernetes.io/uninitialized",  # until the cloud controller runs
        "node.cloudprovider.kubernetes.io/shutdown",
        "NodeWithImpairedVolumes",  # AWS: volumes stuck attaching
        "ToBeDeletedByClusterAutoscaler",
        "DeletionCandidateOfClusterAutoscaler",
    }
)
STATUS_TAINT_PREFIX = "status-taint.cluster-autoscaler.kubernetes.io/"


def of_state(taint: Taint) -> bool:
    """A taint of the node's state (a condition, an autoscaler's, an agent not yet running)."""
    key = taint.key
    return key in NODE_STATE_TAINTS or key.startswith(STATUS_TAINT_PREFIX) or KNOWN.names(key)


def keeps_pods_off(taint: Taint) -> bool:
    """A taint that keeps pods off a node and is the node's own, not its state's."""
    return taint.effect in BLOCKING and not of_state(taint)

"""Startup taints: taints a node registers with and loses once an agent runs on it (a
CNI's, a CSI driver's). While it carries one, the node is still starting: it counts as a
node on its way, whose pods wait for it, never as a Ready node they cannot use, which
would buy another for them, for at most 15 minutes from its creation. Cluster Autoscaler
counts such a node as upcoming the same way ("How does Cluster Autoscaler treat nodes
with status/startup/ignore taints?" in its FAQ; it reads a taint's key alone, where this
also asks that it keep pods off: NoSchedule or NoExecute), and Karpenter a NodePool's
`startupTaints`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the settings read it: the drain's cold start loads no policy module
    from nodescaler.domain.cluster.snapshot import Node, Taint

# Cluster Autoscaler's: every taint whose key starts so is a startup taint.
PREFIXES = (
    "startup-taint.cluster-autoscaler.kubernetes.io/",
    "ignore-taint.cluster-autoscaler.kubernetes.io/",  # its deprecated name
)
# The agents' own, which their installation guides have nodes register with; any other
# is the operator's to name (STARTUP_TAINTS), as Cluster Autoscaler's --startup-taint.
WELL_KNOWN = frozenset(
    {
        "node.cilium.io/agent-not-ready",  # Cilium
        "ebs.csi.aws.com/agent-not-ready",  # the Amazon EBS CSI driver
        "efs.csi.aws.com/agent-not-ready",  # the Amazon EFS CSI driver
    }
)
BLOCKING = frozenset({"NoSchedule", "NoExecute"})  # PreferNoSchedule keeps no pod off


@dataclass(frozen=True, slots=True)
class StartupTaints:
    keys: frozenset[str] = WELL_KNOWN

    @classmethod
    def also(cls, keys: Iterable[str]) -> StartupTaints:
        """The well-known keys and the operator's."""
        return cls(WELL_KNOWN | frozenset(keys))

    def names(self, key: str) -> bool:
        """Whether a taint so keyed is a startup taint, whatever its effect."""
        return key in self.keys or key.startswith(PREFIXES)

    def holds(self, taint: Taint) -> bool:
        return taint.effect in BLOCKING and self.names(taint.key)

    def as_counted(self, node: Node) -> Node:
        """The node as the autoscaler counts it: still starting, while Ready with a startup
        taint that keeps its pods off (no longer once older than `MAX_NODE_STARTUP`:
        `Snapshot.at`). Its readiness stays the kubelet's: what a scale-in may do with it
        and its pods is decided as for any Ready node."""
        if node.ready and any(self.holds(t) for t in node.taints):
            return replace(node, starting=True)
        return node


KNOWN = StartupTaints()  # the well-known keys and Cluster Autoscaler's prefixes alone

"""Startup taints: taints a node registers with and loses once an agent runs on it (a
CNI's, a CSI driver's). While it carries one, the node is still starting: it counts as a
node on its way, whose pods wait for it, never as a Ready node they cannot use, which
would buy another for them. Cluster Autoscaler does the same ("How does Cluster
Autoscaler treat nodes with status/startup/ignore taints?" in its FAQ), and Karpenter
with a NodePool's `startupTaints`.
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
_BLOCKING = frozenset({"NoSchedule", "NoExecute"})  # PreferNoSchedule keeps no pod off


@dataclass(frozen=True, slots=True)
class StartupTaints:
    keys: frozenset[str] = WELL_KNOWN

    @classmethod
    def also(cls, keys: Iterable[str]) -> StartupTaints:
        """The well-known keys and the operator's."""
        return cls(WELL_KNOWN | frozenset(keys))

    def holds(self, taint: Taint) -> bool:
        return taint.effect in _BLOCKING and (
            taint.key in self.keys or taint.key.startswith(PREFIXES)
        )

    def as_counted(self, node: Node) -> Node:
        """The node as the autoscaler counts it: not yet Ready while a startup taint keeps
        its pods off."""
        if node.ready and any(self.holds(t) for t in node.taints):
            return replace(node, ready=False, ready_since=None)
        return node


KNOWN = StartupTaints()  # the well-known keys and Cluster Autoscaler's prefixes alone

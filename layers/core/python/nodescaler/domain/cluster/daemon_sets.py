"""What the cluster's DaemonSets take of a new node of a group at zero.

A live node's template takes its DaemonSet pods off what the node allocates
(`predicates.live_template`). A group at zero has no such node: its template comes from
the instance type, whole, and pods planned onto it would not all fit once the node
registers and its DaemonSets' pods start there (kube-proxy, the CNI, log and metrics
agents: a few hundred millicores and MiB a node): some would wait a boot for another
scale-up. Cluster Autoscaler puts the DaemonSets' pods on its template node for the same
reason (`daemonset.GetDaemonSetPodsForNode`, which asks the DaemonSet controller's own
rule, `NodeShouldRunDaemonPod`): so does this, from a pod of each DaemonSet as its template
asks (`Snapshot.daemon_sets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nodescaler.domain.cluster.predicates import ENFORCED_EFFECTS, NodeTemplate
from nodescaler.domain.cluster.snapshot import Placement, Pod, Resources
from nodescaler.domain.cluster.state_taints import of_state


def runs_on(pod: Pod, template: NodeTemplate) -> bool:
    """Whether the DaemonSet controller puts its pod on a node like `template`: its
    nodeSelector and required node affinity match the node's labels (an empty term matches
    nothing), and it tolerates the node's taints that keep pods off (NoSchedule,
    NoExecute), but those of a node's state (`state_taints`: the controller tolerates the
    conditions' taints itself, and Cluster Autoscaler's template has none of them). Its
    requests are not asked: a DaemonSet's pod is made for every such node, room or not."""
    placement = pod.placement or Placement()
    labels = template.labels
    if any(labels.get(key) != value for key, value in placement.node_selector.items()):
        return False
    terms = placement.required_terms
    if terms and not any(term and all(r.matches(labels) for r in term) for term in terms):
        return False
    return all(
        any(toleration.tolerates(taint) for toleration in placement.tolerations)
        for taint in template.taints
        if taint.effect in ENFORCED_EFFECTS and not of_state(taint)
    )


def less_daemon_sets(template: NodeTemplate, daemon_sets: Sequence[Pod] | None) -> NodeTemplate:
    """`template` (a node of a group at zero) less what the DaemonSets that run on it ask,
    and holding their host ports, said in its source; as it was when none does, or they
    could not be read (None)."""
    running = [pod for pod in daemon_sets or () if runs_on(pod, template)]
    if not running:
        return template
    taken = sum((pod.requests for pod in running), Resources())
    # their host ports are taken on the new node too (`live_template` holds them alike)
    holding = frozenset().union(*(p.placement.apart for p in running if p.placement))
    said = f"{taken.cpu_millis}m cpu, {taken.memory_bytes // 2**20}Mi"
    count = f"{len(running)} DaemonSets ask" if len(running) > 1 else "1 DaemonSet asks"
    return replace(
        template,
        allocatable=template.allocatable - taken,
        daemon_sets=template.daemon_sets + taken,
        holding=template.holding | holding,
        source=f"{template.source}, less what {count} ({said})",
    )

"""A new node of a group at zero holds the cluster's DaemonSet pods besides the pods planned
onto it: its template is less what those that would run there ask, as Cluster
Autoscaler's template node holds them (`domain.cluster.daemon_sets`)."""

from __future__ import annotations

from nodescaler.domain.cluster.daemon_sets import less_daemon_sets, runs_on
from nodescaler.domain.cluster.predicates import NodeTemplate, why_not
from nodescaler.domain.cluster.snapshot import (
    Placement,
    Pod,
    Requirement,
    Resources,
    Snapshot,
    Taint,
    Toleration,
)
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.domain.scaling.readings import MetricReading
from nodescaler.service.cluster_view import KubernetesClusterView
from nodescaler.service.pending_pods import PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy
from tests.unit.test_balance import CHAIN, ENABLED, NOW, PENDING, Cluster, Groups, M5Xlarge, pods

MIB = 2**20
GPU_TAINT = Taint("nvidia.com/gpu", "true", "NoSchedule")
NODE = NodeTemplate(
    "web-a", Resources(3920, 15_000 * MIB, 110), {"kubernetes.io/os": "linux", "tier": "web"}
)


def daemon(name: str, cpu: int, memory_mib: int, **placement: object) -> Pod:
    where = Placement(**placement)  # type: ignore[arg-type]
    requests = Resources(cpu, memory_mib * MIB, 1)
    return Pod("kube-system", name, None, requests, daemon_set=True, placement=where)


AGENTS = (
    daemon("kube-proxy", 100, 0),
    daemon("aws-node", 25, 0),
    daemon("fluent-bit", 100, 200, node_selector={"kubernetes.io/os": "linux"}),
    daemon("dcgm-exporter", 500, 500, node_selector={"nvidia.com/gpu.present": "true"}),
)


def test_a_daemon_set_runs_where_its_selector_and_affinity_match_and_it_tolerates() -> None:
    assert runs_on(AGENTS[0], NODE)
    assert runs_on(AGENTS[2], NODE)
    assert not runs_on(AGENTS[3], NODE)  # its nodeSelector names a label the node lacks
    windows = Requirement("kubernetes.io/os", "In", ("windows",))
    assert not runs_on(daemon("win", 100, 0, required_terms=((windows,),)), NODE)
    linux = Requirement("kubernetes.io/os", "In", ("linux",))
    assert runs_on(daemon("lin", 100, 0, required_terms=((windows,), (linux,))), NODE)
    # a taint that keeps pods off keeps the DaemonSet off unless it tolerates it ...
    tainted = NodeTemplate("gpu", NODE.allocatable, NODE.labels, (GPU_TAINT,))
    assert not runs_on(AGENTS[0], tainted)
    everything = (Toleration(operator="Exists"),)
    assert runs_on(daemon("kube-proxy", 100, 0, tolerations=everything), tainted)
    gpu = (Toleration("nvidia.com/gpu", "Equal", "true", "NoSchedule"),)
    assert runs_on(daemon("dcgm", 100, 0, tolerations=gpu), tainted)
    other = (Toleration("dedicated", "Equal", "true", "NoSchedule"),)
    assert not runs_on(daemon("dcgm", 100, 0, tolerations=other), tainted)
    # ... but a soft one does not, nor one of a node's state (the controller tolerates
    # the conditions' taints itself; a startup taint is lifted by the DaemonSets' agents)
    state = Taint("node.kubernetes.io/not-ready", "", "NoExecute")
    assert runs_on(AGENTS[0], NodeTemplate("new", NODE.allocatable, NODE.labels, (state,)))
    # and an empty required term matches no node
    assert not runs_on(daemon("none", 100, 0, required_terms=((),)), NODE)
    soft = NodeTemplate(
        "soft", NODE.allocatable, NODE.labels, (Taint("a", "", "PreferNoSchedule"),)
    )
    assert runs_on(AGENTS[0], soft)


def test_a_template_is_less_the_daemon_sets_that_run_on_it_and_says_so() -> None:
    less = less_daemon_sets(NODE, AGENTS)
    assert less.allocatable == Resources(3920 - 225, 14_800 * MIB, 107)
    assert less.daemon_sets == Resources(225, 200 * MIB, 3)
    assert less.source.endswith("less what 3 DaemonSets ask (225m cpu, 200Mi)")
    # a DaemonSet's host port is taken on the new node too
    exporter = daemon("node-exporter", 100, 64, apart=frozenset({"port 9100"}))
    one = less_daemon_sets(NODE, (exporter,))
    assert one.holding == frozenset({"port 9100"})
    assert one.source.endswith("less what 1 DaemonSet asks (100m cpu, 64Mi)")
    two = less_daemon_sets(NODE, AGENTS[:2])
    assert two.source.endswith("less what 2 DaemonSets ask (125m cpu, 0Mi)")
    # none to run there, or none read: the template as it was
    assert less_daemon_sets(NODE, AGENTS[3:]) == NODE
    assert less_daemon_sets(NODE, None) == NODE
    assert less_daemon_sets(NODE, ()) == NODE


def test_a_pod_their_daemon_sets_leave_no_room_for_is_told_so_with_the_numbers() -> None:
    less = less_daemon_sets(NODE, AGENTS)  # 225m cpu, 200Mi and 3 pods go to DaemonSets
    said = "needs more cpu than a node of the group has once its DaemonSets take 225m"
    assert why_not(daemon_free("web", 3800, 1024), less) == f"{said} (3695m left, 3800m asked)"
    assert why_not(daemon_free("web", 3695, 1024), less) is None
    assert why_not(daemon_free("big", 1000, 14_900), less) == (
        "needs more memory than a node of the group has once its DaemonSets take 200Mi"
        " (14800Mi left, 14900Mi asked)"
    )
    # a byte more than is left never reads as no more
    byte_more = Pod("default", "web", None, Resources(1000, 14_800 * MIB + 1, 1))
    assert str(why_not(byte_more, less)).endswith("(14800Mi left, 14801Mi asked)")
    # more than a node holds even without them: no word of the DaemonSets
    assert why_not(daemon_free("web", 3921, 1024), less) == (
        "needs more cpu than a node of the group has"
    )
    assert why_not(daemon_free("web", 3800, 1024), NODE) is None


def daemon_free(name: str, cpu: int, memory_mib: int) -> Pod:
    return Pod("default", name, None, Resources(cpu, memory_mib * MIB, 1))


def _nodes_asked(daemon_sets: tuple[Pod, ...] | None) -> float:
    group = NodeGroup("web-a", 0, 0, 10, 0, tags=ENABLED, instance_type="m5.xlarge")
    book = PolicyBook({"web": policy(PENDING, name="web")}, TagNames())
    planner = PendingPodsPlanner(Groups([group]), book, M5Xlarge(), CHAIN)
    snapshot = Snapshot((), tuple(pods(8, cpu=1800)), daemon_sets=daemon_sets)
    reading = KubernetesClusterView(Cluster(snapshot), pending=planner).read(PENDING, group, NOW)
    assert isinstance(reading, MetricReading)
    return reading.value


def test_a_group_at_zero_buys_for_its_pods_and_the_daemon_sets_beside_them() -> None:
    # Given a group at zero of m5.xlarge (3,920m allocatable) and 8 pending pods of 1,800m:
    # two fit a node taken whole, one a node its DaemonSets take 400m of
    agents = (daemon("kube-proxy", 100, 0), daemon("log-agent", 300, 256))
    # When the pending pods are read, Then the nodes asked are those the pods fit once the
    # DaemonSets' pods run beside them; the DaemonSets unread, as before
    assert _nodes_asked(None) == 4
    assert _nodes_asked(agents) == 8

"""A group with no Ready node is judged by a template of its instance type; in one
Availability Zone, that template carries the zone's labels, as Cluster Autoscaler's AWS
template does, so a pod pinned to the zone can grow the group from zero."""

from __future__ import annotations

from nodescaler.domain.cluster.instance_templates import zone_labels
from nodescaler.domain.cluster.predicates import NodeTemplate, why_not
from nodescaler.domain.cluster.snapshot import Placement, Pod, Resources, Snapshot
from nodescaler.domain.groups.node_group import NodeGroup
from nodescaler.domain.groups.optin import TagNames
from nodescaler.service.pending_pods import PendingPodsPlanner
from nodescaler.service.policy_resolver import PolicyBook

from tests.builders import policy
from tests.unit.test_balance import CHAIN, ENABLED, PENDING, Groups, M5Xlarge

GIB = 2**30
ZONE = "topology.kubernetes.io/zone"


def at_zero(*zones: str) -> NodeGroup:
    return NodeGroup("cache-b", 0, 0, 10, 0, tags=ENABLED, zones=zones)


def pinned(zone: str) -> Pod:
    return Pod(
        "default", "cache-0", None, Resources(1000, GIB, 1), placement=Placement({ZONE: zone})
    )


def template_of(group: NodeGroup) -> NodeTemplate:
    book = PolicyBook({"web": policy(PENDING, name="web")}, TagNames())
    planner = PendingPodsPlanner(Groups([group]), book, M5Xlarge(), CHAIN)
    return planner.template(group, Snapshot((), ()))


def test_a_pod_pinned_to_the_zone_of_a_one_zone_group_at_zero_fits_its_template() -> None:
    template = template_of(at_zero("eu-west-1b"))
    assert why_not(pinned("eu-west-1b"), template) is None
    assert why_not(pinned("eu-west-1c"), template) is not None


def test_the_zone_labels_are_the_kubelets_and_the_ebs_drivers_with_the_region() -> None:
    assert zone_labels(("eu-west-1b",)) == {
        ZONE: "eu-west-1b",
        "topology.kubernetes.io/region": "eu-west-1",
        "topology.ebs.csi.aws.com/zone": "eu-west-1b",
    }


def test_a_group_of_several_zones_or_none_known_gets_no_zone_label() -> None:
    # Auto Scaling picks the zone of each launch: a pinned pod is no reason to grow it
    assert zone_labels(("eu-west-1a", "eu-west-1b")) == {}
    assert zone_labels(()) == {}
    template = template_of(at_zero("eu-west-1a", "eu-west-1b"))
    assert why_not(pinned("eu-west-1b"), template) is not None


def test_a_local_zones_region_is_its_parent_region() -> None:
    region = "topology.kubernetes.io/region"
    assert zone_labels(("us-west-2-lax-1a",))[region] == "us-west-2"
    assert zone_labels(("us-east-1-wl1-bos-wlz-1",))[region] == "us-east-1"
    assert zone_labels(("us-gov-west-1a",))[region] == "us-gov-west-1"

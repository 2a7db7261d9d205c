"""EKS managed node groups' scaling, which moto stores but never carries out, supplied as
EKS documents it on a moto-backed EKS client:

- UpdateNodegroupConfig's scalingConfig is refused, as EKS's InvalidParameterException,
  when its desiredSize (given, or kept) falls outside its minSize and maxSize (given, or
  kept) (moto takes any);
- once taken, EKS sets the node group's Auto Scaling group to it: its MinSize, MaxSize and
  desired capacity (moto changes only what DescribeNodegroup answers).

https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html
https://docs.aws.amazon.com/eks/latest/APIReference/API_NodegroupScalingConfig.html
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError
from nodescaler.domain.cluster.instance_templates import EKS_TAINT_EFFECTS

SIZES = ("minSize", "maxSize", "desiredSize")
SIZES_TAKEN = "nodescaler-sandbox-scaling"  # in the call's context, from check to apply


class EksNodegroupScaling:
    def __init__(
        self, eks: Any, autoscaling: Any, resized: Callable[[str], None] = lambda group: None
    ) -> None:
        self._eks = eks  # the sandbox's own: what the node group holds now
        self._autoscaling = autoscaling  # the sandbox's own: where EKS applies the sizes
        self._resized = resized  # told each Auto Scaling group resized (its launches' second)

    def watch(self, eks: Any) -> Any:
        unique = f"eks-nodegroup-scaling-{id(self)}"
        events = eks.meta.events
        events.register(
            "before-parameter-build.eks.UpdateNodegroupConfig", self._check, f"{unique}-in"
        )
        events.register("after-call.eks.UpdateNodegroupConfig", self._apply, f"{unique}-out")
        return eks

    def _check(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        asked = params.get("scalingConfig")
        if not asked:
            return
        low, high, desired = self._merged(params, asked)
        if not low <= desired <= high:
            message = (
                f"desiredSize {desired} must be between minSize {low} and maxSize {high} "
                f"of node group {params['nodegroupName']}"
            )
            error = {"Error": {"Code": "InvalidParameterException", "Message": message}}
            raise ClientError(error, model.name)
        context[SIZES_TAKEN] = (params, dict(zip(SIZES, (low, high, desired), strict=True)))

    def _merged(self, params: dict[str, Any], asked: dict[str, int]) -> tuple[int, int, int]:
        kept = self._nodegroup(params)["scalingConfig"]
        low, high, desired = (int(asked.get(size, kept.get(size, 0))) for size in SIZES)
        return low, high, desired

    def _apply(self, context: dict[str, Any], **_: Any) -> None:
        if SIZES_TAKEN not in context:
            return
        params, sizes = context[SIZES_TAKEN]
        resources = self._nodegroup(params).get("resources") or {}
        for group in resources.get("autoScalingGroups") or []:
            self._autoscaling.update_auto_scaling_group(
                AutoScalingGroupName=group["name"],
                MinSize=sizes["minSize"],
                MaxSize=sizes["maxSize"],
                DesiredCapacity=sizes["desiredSize"],
            )
            self._resized(group["name"])

    def _nodegroup(self, params: dict[str, Any]) -> dict[str, Any]:
        described = self._eks.describe_nodegroup(
            clusterName=params["clusterName"], nodegroupName=params["nodegroupName"]
        )
        found: dict[str, Any] = described["nodegroup"]
        return found


SANDBOX_CLUSTER = "sandbox"  # the EKS cluster a scenario's managed node groups are in
EKS_EFFECTS = {kubernetes: eks for eks, kubernetes in EKS_TAINT_EFFECTS.items()}


def create_managed_node_group(
    eks: Any,
    asg: str,
    *,
    region: str,
    instance_type: str,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    sizes: tuple[int, int],
) -> dict[str, str]:
    """An EKS managed node group named as its Auto Scaling group `asg`, with the labels and
    taints (Kubernetes' effect names) its nodes register with, at its minimum; returns the
    tags EKS puts on that ASG. moto names an ASG of its own that does not exist: the
    sandbox's group is made the node group's, as EKS would have created it."""
    if SANDBOX_CLUSTER not in eks.list_clusters()["clusters"]:
        eks.create_cluster(
            name=SANDBOX_CLUSTER,
            roleArn="arn:aws:iam::123456789012:role/eks",
            resourcesVpcConfig={"subnetIds": ["subnet-1"]},
        )
    low, high = sizes
    eks.create_nodegroup(
        clusterName=SANDBOX_CLUSTER,
        nodegroupName=asg,
        nodeRole="arn:aws:iam::123456789012:role/node",
        subnets=["subnet-1"],
        instanceTypes=[instance_type],
        labels=labels,
        taints=[t | {"effect": EKS_EFFECTS[t["effect"]]} for t in taints],
        scalingConfig={"minSize": low, "maxSize": high, "desiredSize": low},
    )
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.eks.models import eks_backends

    cluster = eks_backends[DEFAULT_ACCOUNT_ID][region].clusters[SANDBOX_CLUSTER]
    cluster.nodegroups[asg].resources["autoScalingGroups"] = [{"name": asg}]
    return {"eks:cluster-name": SANDBOX_CLUSTER, "eks:nodegroup-name": asg}

"""EKS managed node groups' warm pools (UpdateNodegroupConfig's `warmPoolConfig`), which
moto accepts and ignores, supplied as EKS documents them on a moto-backed EKS client:

- UpdateNodegroupConfig with a warmPoolConfig keeps it for the node group and configures
  the warm pool of the node group's Auto Scaling group from it (EKS owns that pool: it
  creates and updates it), refusing a minSize above maxGroupPreparedCapacity or an unknown
  poolState as EKS's InvalidParameterException would;
- DescribeNodegroup answers the warmPoolConfig last set.

https://docs.aws.amazon.com/eks/latest/APIReference/API_UpdateNodegroupConfig.html
https://docs.aws.amazon.com/eks/latest/APIReference/API_WarmPoolConfig.html
"""

from __future__ import annotations

from typing import Any

POOL_STATES = ("Stopped", "Running", "Hibernated")


class EksWarmPools:
    def __init__(self, autoscaling: Any) -> None:
        self._autoscaling = autoscaling  # moto-backed: where EKS puts the pool
        self.configs: dict[tuple[str, str], dict[str, Any]] = {}
        self._eks: Any = None

    def watch(self, eks: Any) -> Any:
        self._eks = eks
        unique = f"eks-warm-pools-{id(self)}"
        events = eks.meta.events
        events.register(
            "before-parameter-build.eks.UpdateNodegroupConfig", self._configured, f"{unique}-in"
        )
        events.register("after-call.eks.DescribeNodegroup", self._described, f"{unique}-out")
        return eks

    def _configured(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        config = params.get("warmPoolConfig")
        if config is None:
            return
        from botocore.exceptions import ClientError

        problem = _invalid(config)
        if problem is not None:
            error = {"Error": {"Code": "InvalidParameterException", "Message": problem}}
            raise ClientError(error, model.name)
        key = (params["clusterName"], params["nodegroupName"])
        self.configs[key] = dict(config)
        for group in self._asgs(params["clusterName"], params["nodegroupName"]):
            if config.get("enabled", True):
                reuse = config.get("reuseOnScaleIn")
                self._autoscaling.put_warm_pool(
                    AutoScalingGroupName=group,
                    MinSize=config.get("minSize", 0),
                    PoolState=config.get("poolState", "Stopped"),
                    **(
                        {"MaxGroupPreparedCapacity": config["maxGroupPreparedCapacity"]}
                        if "maxGroupPreparedCapacity" in config
                        else {}
                    ),
                    **(
                        {"InstanceReusePolicy": {"ReuseOnScaleIn": reuse}}
                        if reuse is not None
                        else {}
                    ),
                )
            else:
                self._autoscaling.delete_warm_pool(AutoScalingGroupName=group, ForceDelete=True)

    def _asgs(self, cluster: str, nodegroup: str) -> list[str]:
        described = self._eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)
        resources = described["nodegroup"].get("resources") or {}
        return [a["name"] for a in resources.get("autoScalingGroups") or []]

    def _described(self, parsed: dict[str, Any], **_: Any) -> None:
        nodegroup = parsed.get("nodegroup")
        if not isinstance(nodegroup, dict):
            return
        key = (nodegroup.get("clusterName"), nodegroup.get("nodegroupName"))
        if key in self.configs:
            nodegroup["warmPoolConfig"] = self.configs[key]


def _invalid(config: dict[str, Any]) -> str | None:
    state = config.get("poolState", "Stopped")
    if state not in POOL_STATES:
        return f"poolState {state} is not one of {', '.join(POOL_STATES)}"
    prepared = config.get("maxGroupPreparedCapacity")
    if prepared is not None and config.get("minSize", 0) > prepared:
        return (
            f"minSize {config.get('minSize')} is greater than maxGroupPreparedCapacity {prepared}"
        )
    return None

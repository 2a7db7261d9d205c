"""Auto Scaling's warm pools, which moto stores (PutWarmPool, DescribeWarmPool) but never
fills: the sandbox keeps each pool's instances as Auto Scaling does.

- Size: max(MaxGroupPreparedCapacity − desired, MinSize); with no
  MaxGroupPreparedCapacity, the group's MaxSize stands in for it. A pool below its size
  launches instances, which boot once (a cold boot, billed as running) and then wait in
  the pool's state; one above it loses its newest instances first (those still
  initialising before those ready).
- A scale-out takes from the pool first: an instance that was ready is a Ready node a
  warm boot after the request (EC2 starts it and the kubelet registers again), one still
  initialising when its initialisation ends and then a warm boot; with the pool empty,
  a cold boot. Instances leaving the group on a scale-in terminate (no
  InstanceReusePolicy).
- Billing: a Stopped instance pays for its root volume, not its compute; a Hibernated one
  for its root volume and the image of its memory on it (`waiting_share`: about 0.3 % of
  an m5.4xlarge's hourly price stopped, 1.2 % hibernated). A Running pool pays in full.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodescaler_sandbox.provision import moto_groups

# A waiting instance's volume: gp3 at $0.088 a GB-month in eu-west-1, the sandbox's region
# (https://aws.amazon.com/ebs/pricing/), a month being 730 hours; 20 GiB, the root volume
# EKS gives a node by default (diskSize, https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html).
GP3_PER_GIB_HOUR = 0.088 / 730
ROOT_VOLUME_GIB = 20
# Linux on-demand $ an hour in eu-west-1 and memory (GiB) of the instance types the
# scenarios use (https://aws.amazon.com/ec2/pricing/on-demand/); the 2xlarge and 8xlarge
# sizes of the same families at their sizes' multiple, as EC2 prices a family's sizes
ON_DEMAND = {
    "m5.large": (0.107, 8),
    "m5.xlarge": (0.214, 16),
    "m5.2xlarge": (0.428, 32),
    "m5.4xlarge": (0.856, 64),
    "m5.8xlarge": (1.712, 128),
    "c5.xlarge": (0.192, 8),
    "c5.2xlarge": (0.384, 16),
    "c5.4xlarge": (0.768, 32),
    "g5.xlarge": (1.123, 16),
}


def waiting_share(state: str, instance_type: str, prices: Mapping[str, float]) -> float:
    """What a warm instance in `state` costs, as a share of the same instance running at
    its on-demand price in `prices` (the scenario's: loading it asks one of a warm pool)."""
    if state == "Running":
        return 1.0
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    memory_gib = INSTANCE_TYPES[instance_type]["MemoryInfo"]["SizeInMiB"] / 1024
    volume = ROOT_VOLUME_GIB + (memory_gib if state == "Hibernated" else 0)
    return volume * GP3_PER_GIB_HOUR / prices[instance_type]


@dataclass
class WarmPools:
    """Every group's warm instances, each known by when its initialisation ends."""

    region: str
    boot: timedelta  # a cold boot: what initialising a warm instance takes
    warm_boot: timedelta  # from the pool to a Ready node
    pools: dict[str, list[datetime]] = field(default_factory=dict)  # group → ready times
    shares: dict[str, float] = field(default_factory=dict)  # group → `waiting_share`
    # on-demand $ an hour: the sandbox's, or the scenario's (`world_setup`)
    prices: dict[str, float] = field(
        default_factory=lambda: {t: p for t, (p, _) in ON_DEMAND.items()}
    )

    def refill(self, now: datetime) -> None:
        """Each pool to its size, as Auto Scaling keeps it."""
        for name, group in moto_groups(self.region).items():
            configured = group.warm_pool
            if configured is None:
                self.pools.pop(name, None)
                continue
            state = configured.pool_state
            self.shares[name] = waiting_share(state, group.instance_type, self.prices)
            pool = self.pools.setdefault(name, [])
            size = pool_size(
                configured.min_size,
                configured.max_group_prepared_capacity,
                group.desired_capacity or 0,
                group.max_size,
            )
            pool.sort()  # ready first
            del pool[size:]
            pool.extend([now + self.boot] * (size - len(pool)))

    def boot_of(self, group: str, now: datetime) -> timedelta | None:
        """How long a new instance of the group takes to become a Ready node: a warm
        boot from the pool (after what is left of its initialisation), or None when the
        pool has none (a cold boot)."""
        pool = self.pools.get(group)
        if not pool:
            return None
        pool.sort()
        ready_at = pool.pop(0)
        return max(ready_at - now, timedelta(0)) + self.warm_boot

    def waiting(self, group: str, now: datetime) -> int:
        return sum(1 for ready_at in self.pools.get(group, ()) if ready_at <= now)

    def billed(self, group: str, now: datetime) -> float:
        """The pool's cost now, in running instances: those initialising in full, those
        waiting at their state's share."""
        pool = self.pools.get(group, ())
        waiting = self.waiting(group, now)
        share = self.shares.get(group, 1.0)
        return (len(pool) - waiting) + waiting * share


def pool_size(min_size: int, max_prepared: int | None, desired: int, max_size: int) -> int:
    """Auto Scaling's warm pool size for a group at `desired`."""
    ceiling = max_size if max_prepared is None or max_prepared < 0 else max_prepared
    return max(ceiling - desired, min_size, 0)

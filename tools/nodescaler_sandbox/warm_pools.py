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
- Billing: a Stopped or Hibernated instance pays for its volumes, not its compute:
  `WAITING_COST` of a running one (a 100 GiB gp3 volume is about 1.5 % of an m5.4xlarge's
  hourly price; 5 % covers larger volumes and a hibernated one's memory image). A Running
  pool pays in full.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from nodescaler_sandbox.provision import moto_groups

WAITING_COST = {"Stopped": 0.05, "Hibernated": 0.05, "Running": 1.0}


@dataclass
class WarmPools:
    """Every group's warm instances, each known by when its initialisation ends."""

    region: str
    boot: timedelta  # a cold boot: what initialising a warm instance takes
    warm_boot: timedelta  # from the pool to a Ready node
    pools: dict[str, list[datetime]] = field(default_factory=dict)  # group → ready times
    states: dict[str, str] = field(default_factory=dict)  # group → the pool's state

    def refill(self, now: datetime) -> None:
        """Each pool to its size, as Auto Scaling keeps it."""
        for name, group in moto_groups(self.region).items():
            configured = group.warm_pool
            if configured is None:
                self.pools.pop(name, None)
                continue
            self.states[name] = configured.pool_state
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
        share = WAITING_COST.get(self.states.get(group, "Stopped"), 1.0)
        return (len(pool) - waiting) + waiting * share


def pool_size(min_size: int, max_prepared: int | None, desired: int, max_size: int) -> int:
    """Auto Scaling's warm pool size for a group at `desired`."""
    ceiling = max_size if max_prepared is None or max_prepared < 0 else max_prepared
    return max(ceiling - desired, min_size, 0)

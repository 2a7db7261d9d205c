"""The deployment's terminate hook on a group, over EC2 Auto Scaling: read for the
termination policy (may a node with pods go?), and put by evaluate on an opted-in group
before its scale-in."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from nodescaler.deployment import (
    DRAIN_HOOK_DEFAULT_RESULT,
    DRAIN_HOOK_HEARTBEAT_SECONDS,
    DRAIN_HOOK_TRANSITION,
)
from nodescaler.domain.outside_text import outside
from nodescaler.errors import DrainHookUnreadError

if TYPE_CHECKING:
    from nodescaler.domain.groups.node_group import NodeGroup
    from nodescaler.ports import Clock


def carries_drain_hook(autoscaling: Any, group: str, hook: str) -> bool:
    """Whether the group carries `hook` as a terminate hook (DescribeLifecycleHooks); an
    answer Auto Scaling could not give raised as `DrainHookUnreadError`."""
    try:
        found = autoscaling.describe_lifecycle_hooks(
            AutoScalingGroupName=group, LifecycleHookNames=[hook]
        )
    except (BotoCoreError, ClientError) as error:
        raise DrainHookUnreadError(
            f"node group {group}: DescribeLifecycleHooks for hook {hook} failed: "
            f"{outside(f'{type(error).__name__}: {error}')}"
        ) from None
    return any(
        described.get("LifecycleHookName") == hook
        and described.get("LifecycleTransition") == DRAIN_HOOK_TRANSITION
        for described in found.get("LifecycleHooks", [])
    )


class AsgDrainHooks:
    """`DrainHooks` over EC2 Auto Scaling: DescribeLifecycleHooks for the deployment's hook,
    each group's answer kept `KEPT` (Auto Scaling asks again every short while a
    scale-in waits; a hook added is seen within that), an unread one raised, never kept. The client
    given here should carry a budget of its own: the termination policy answers within
    Auto Scaling's two seconds (`wiring.terminator`)."""

    KEPT = timedelta(minutes=1)

    def __init__(self, autoscaling: Any, hook: str, clock: Clock) -> None:
        self._autoscaling = autoscaling
        self._hook = hook
        self._clock = clock
        self._known: dict[str, tuple[datetime, bool]] = {}  # group → (read at, drains)

    def drains(self, group: str) -> bool:
        now = self._clock.now()
        known = self._known.get(group)
        if known is not None and known[0] <= now < known[0] + self.KEPT:
            return known[1]
        drains = carries_drain_hook(self._autoscaling, group, self._hook)
        self._known[group] = (now, drains)
        return drains


class AsgDrainHookKeeper:
    """`DrainHookKeeper` over EC2 Auto Scaling: the deployment's hook put on a group that
    lacks it (PutLifecycleHook, as the stack puts it on `drainGroups`). A group found
    carrying it is not asked again for `KEPT`: a scale-in costs no call, and a hook
    deleted by hand is back within that, at the group's next scale-in."""

    KEPT = timedelta(hours=1)

    def __init__(self, autoscaling: Any, hook: str, clock: Clock) -> None:
        self._autoscaling = autoscaling
        self._hook = hook
        self._clock = clock
        self._seen: dict[str, datetime] = {}  # group → when it was seen carrying the hook

    def keep(self, group: NodeGroup) -> bool:
        now = self._clock.now()
        seen = self._seen.get(group.name)
        if seen is not None and seen <= now < seen + self.KEPT:
            return False
        put = not carries_drain_hook(self._autoscaling, group.name, self._hook)
        if put:
            self._autoscaling.put_lifecycle_hook(
                AutoScalingGroupName=group.name,
                LifecycleHookName=self._hook,
                LifecycleTransition=DRAIN_HOOK_TRANSITION,
                HeartbeatTimeout=DRAIN_HOOK_HEARTBEAT_SECONDS,
                DefaultResult=DRAIN_HOOK_DEFAULT_RESULT,
            )
        self._seen[group.name] = now
        return put

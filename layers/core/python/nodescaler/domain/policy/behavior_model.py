"""How fast a group may change (`behavior`), and the hours scale-in is capped or forbidden:
the models a policy document declares, which `domain.scaling.behavior` applies."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import (
    Field,
    field_validator,
)

from nodescaler.domain.policy.spec import Spec, check_cron, check_zone

# --- behavior ----------------------------------------------------------------------------


class ScalingPolicyType(StrEnum):
    REPLICAS = "Replicas"
    PERCENT = "Percent"


class ScalingPolicy(Spec):
    """At most `value` replicas (or percent) of change within any `periodSeconds`."""

    type: ScalingPolicyType
    value: Annotated[int, Field(strict=True, gt=0)]
    period_seconds: Annotated[int, Field(strict=True, ge=1, le=1800)]


class SelectPolicy(StrEnum):
    MAX = "Max"
    MIN = "Min"
    DISABLED = "Disabled"


class ScalingRules(Spec):
    """One direction of `behavior`, as written; unset fields take nodescaler's defaults."""

    stabilization_window_seconds: Annotated[int, Field(strict=True, ge=0, le=3600)] | None = None
    select_policy: SelectPolicy | None = None
    policies: Annotated[list[ScalingPolicy], Field(min_length=1, max_length=10)] | None = None
    tolerance: Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)] | None = None


class Rules(Spec):
    """One direction of `behavior` with every field resolved."""

    stabilization_window_seconds: int
    select_policy: SelectPolicy
    policies: tuple[ScalingPolicy, ...]
    tolerance: float

    def overlay(self, written: ScalingRules | None) -> Rules:
        if written is None:
            return self
        given = {
            name: tuple(value) if isinstance(value, list) else value
            for name in type(written).model_fields
            if (value := getattr(written, name)) is not None
        }
        return self.model_copy(update=given)


DEFAULT_TOLERANCE = 0.1

# No group may have more nodes than this (maxReplicas' bound).
MOST_NODES = 100_000

# Up at once, as Cluster Autoscaler does (it asks in one scan for every node the pending
# pods need): a node takes minutes to boot, so any per-minute rate adds straight to the
# time pods stay pending, and a surplus is undone by the slow scale-down below. Only
# maxReplicas (the group's cost ceiling) and the cluster's limits bind: the one policy
# allows more nodes than any group may have. (A rate such as the HPA's +100 % per 15 s
# doubles a group once a one-minute tick: 100 → 1,500 nodes would take four minutes.)
DEFAULT_SCALE_UP = Rules(
    stabilization_window_seconds=0,
    select_policy=SelectPolicy.MAX,
    policies=(ScalingPolicy(type=ScalingPolicyType.REPLICAS, value=MOST_NODES, period_seconds=60),),
    tolerance=DEFAULT_TOLERANCE,
)

# Down slowly: removing a node evicts its pods and bringing it back costs a boot, so the
# lower recommendation must hold for 10 minutes (Cluster Autoscaler's scale-down-unneeded
# time) and then at most 20% or 5 nodes go per minute, whichever is more. The HPA's pod
# default (any amount after 5 minutes) would drain a fleet at once on one bad reading.
DEFAULT_SCALE_DOWN = Rules(
    stabilization_window_seconds=600,
    select_policy=SelectPolicy.MAX,
    policies=(
        ScalingPolicy(type=ScalingPolicyType.PERCENT, value=20, period_seconds=60),
        ScalingPolicy(type=ScalingPolicyType.REPLICAS, value=5, period_seconds=60),
    ),
    tolerance=DEFAULT_TOLERANCE,
)


class Behavior(Spec):
    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None

    @property
    def up(self) -> Rules:
        return DEFAULT_SCALE_UP.overlay(self.scale_up)

    @property
    def down(self) -> Rules:
        return DEFAULT_SCALE_DOWN.overlay(self.scale_down)


class ScaleInWindow(Spec):
    """While open (from each `schedule` firing, for `durationMinutes`, in `timeZone`), at
    most `maxNodesPerHour` nodes may go in any hour: a count, or a share of the group's
    current size ("10%", rounded down); 0 forbids scale-in. Karpenter's disruption budgets."""

    name: str | None = None
    schedule: str
    duration_minutes: Annotated[int, Field(strict=True, ge=1, le=7 * 24 * 60)]
    time_zone: str = "UTC"
    max_nodes_per_hour: int | str

    _cron = field_validator("schedule")(check_cron)
    _zone = field_validator("time_zone")(check_zone)

    @field_validator("max_nodes_per_hour", mode="before")
    @classmethod
    def _count_or_share(cls, value: object) -> int | str:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and re.fullmatch(r"(100|[1-9]?[0-9])%", value):
            return value
        raise ValueError(
            f'a count of nodes (0 or more) or a share of the group such as "10%", not {value!r}'
        )

    def allowed(self, current: int) -> int:
        budget = self.max_nodes_per_hour
        if isinstance(budget, str):
            return current * int(budget.rstrip("%")) // 100
        return budget

    def describe(self) -> str:
        label = self.name or f"{self.schedule} for {self.duration_minutes} min"
        return f"scale-in window {label} ({self.max_nodes_per_hour} nodes an hour)"

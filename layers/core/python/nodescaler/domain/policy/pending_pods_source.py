"""The PendingPods metric's source, with the capacity buffers it keeps room for (fixed, or
sized by arrivals) and which unneeded nodes it votes to shed; every other type's source is
in `sources`."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import (
    Field,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from nodescaler.domain.cluster.quantity import parse_quantity
from nodescaler.domain.policy.spec import Spec


class BufferToleration(Spec):
    """A taint the buffer's pods tolerate, as a pod's toleration says it."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""


class ArrivalsSizing(Spec):
    """A buffer sized by the demand: room for the pods that arrive in the group during one
    of its boot times (its arrival rate, learnt, times its measured boot time), within
    `minPods` and `maxPods`; quiet, it shrinks to `minPods`."""

    min_pods: Annotated[int, Field(strict=True, ge=0, le=10_000)] = 0
    max_pods: Annotated[int, Field(strict=True, ge=1, le=10_000)]

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        if self.min_pods > self.max_pods:
            raise ValueError(f"minPods {self.min_pods} is above maxPods {self.max_pods}")
        return self


class CapacityBuffer(Spec):
    """Room for `pods` pods of one shape, kept free in the group at all times (the capacity
    buffers of Cluster Autoscaler and Karpenter): new pods of that shape start at once
    instead of waiting for a node to boot. Planned as pending pods are, so the room is
    right under bin-packing where a percentage is not. `fromArrivals` instead of `pods`:
    as many as the group's pods arrive in a boot time (`domain.arrivals`)."""

    pods: Annotated[int | None, Field(strict=True, ge=1, le=10_000)] = None
    from_arrivals: ArrivalsSizing | None = None
    # cpu, memory and extended resources (nvidia.com/gpu), as a pod's requests say them
    requests: Annotated[
        dict[str, Annotated[str, Field(strict=True)] | StrictInt | StrictFloat],
        Field(min_length=1, max_length=16),
    ]
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: Annotated[list[BufferToleration], Field(max_length=32)] = Field(
        default_factory=list
    )

    @field_validator("requests")
    @classmethod
    def _quantities(cls, requests: dict[str, str | int | float]) -> dict[str, str | int | float]:
        amounts = []
        for name, amount in requests.items():
            if name not in ("cpu", "memory") and "/" not in name:
                raise ValueError(
                    f"{name!r}: a buffer's pods request cpu, memory or an extended resource "
                    "such as nvidia.com/gpu"
                )
            try:
                amounts.append(parse_quantity(amount))
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None
        if all(amount == 0 for amount in amounts):
            raise ValueError("requests nothing: a pod that takes no room needs no buffer")
        return requests

    @model_validator(mode="after")
    def _one_size(self) -> Self:
        if (self.pods is None) == (self.from_arrivals is None):
            raise ValueError(
                "a buffer needs either pods (a fixed size) or fromArrivals (sized by how "
                "fast pods arrive), not both and not neither"
            )
        return self

    @property
    def least(self) -> int:
        """Its pods as sized (`domain.arrivals.sized_buffers`), else the least it holds."""
        if self.pods is not None:
            return self.pods
        return self.from_arrivals.min_pods if self.from_arrivals is not None else 0

    def describe(self) -> str:
        """As `explain` shows it: "room for 20 × 1 cpu/2Gi"."""
        shape = "/".join(
            f"{amount} cpu" if name == "cpu" else f"{amount} {name}" if "/" in name else str(amount)
            for name, amount in self.requests.items()
        )
        sizing = self.from_arrivals
        if sizing is None:
            return f"room for {self.pods} × {shape}"
        bounds = f"{sizing.min_pods}..{sizing.max_pods}"
        if self.pods is None:  # not sized yet: only its bounds are known
            return f"room for {bounds} × {shape} (from arrivals)"
        return f"room for {self.pods} × {shape} (from arrivals, {bounds})"


class Consolidation(StrEnum):
    """Which of the group's nodes pending pods may shed (Karpenter's consolidation policy)."""

    WHEN_EMPTY = "WhenEmpty"  # only nodes nothing but DaemonSets run on: no pod is evicted
    WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"  # also those whose pods fit elsewhere


class PendingPodsSource(Spec):
    """Unschedulable pods that would fit this group; pods below the cutoff priority are ignored.
    `buffer`: room for pods not yet created, kept free in the group. `consolidation`: which
    unneeded nodes it votes to shed (WhenEmpty suits jobs an eviction would restart)."""

    expendable_priority_cutoff: Annotated[int, Field(strict=True)] = -10
    consolidation: Consolidation = Consolidation.WHEN_EMPTY_OR_UNDERUTILIZED
    buffer: Annotated[list[CapacityBuffer], Field(max_length=8)] = Field(default_factory=list)

"""The evaluate function's expander chain (its EXPANDERS setting, JSON): one model per
expander, checked as Cluster Autoscaler would read it (patterns as RE2), `balance` last."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from nodescaler.domain.groups.name_patterns import not_in_re2


class _ExpanderSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _valid_patterns(patterns: list[str]) -> list[str]:
    """Each a regular expression Cluster Autoscaler's priority expander could take."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"{pattern!r} is not a regular expression: {error}") from None
        if lacking := not_in_re2(pattern):
            raise ValueError(
                f"{pattern!r} uses {lacking}, which Go's regular expressions (RE2, as Cluster "
                "Autoscaler's priority expander reads them) do not have"
            )
    return patterns


class PriorityExpanderSpec(_ExpanderSpec):
    name: Literal["priority"]
    priorities: dict[int, list[str]]  # priority → node group name patterns

    @field_validator("priorities")
    @classmethod
    def _patterns(cls, priorities: dict[int, list[str]]) -> dict[int, list[str]]:
        for patterns in priorities.values():
            _valid_patterns(patterns)
        return priorities


class WeightedPriorityExpanderSpec(_ExpanderSpec):
    name: Literal["weighted-priority"]
    tiers: dict[int, dict[str, Annotated[float, Field(gt=0)]]]  # priority → pattern → weight

    @field_validator("tiers")
    @classmethod
    def _patterns(cls, tiers: dict[int, dict[str, float]]) -> dict[int, dict[str, float]]:
        for weights in tiers.values():
            _valid_patterns(list(weights))
        return tiers


class SimpleExpanderSpec(_ExpanderSpec):
    # reserved-first: the groups whose capacity reservations have room, before the rest
    name: Literal["least-waste", "most-pods", "random", "reserved-first"]


class CustomExpanderSpec(_ExpanderSpec):
    name: Literal["custom"]
    function_name: Annotated[str, Field(alias="functionName", min_length=1, max_length=170)]
    timeout_seconds: Annotated[float, Field(alias="timeoutSeconds", gt=0, le=10)] = 2


class BalanceExpanderSpec(_ExpanderSpec):
    """Cluster Autoscaler's --balance-similar-node-groups: the chosen group's new nodes are
    spread over the groups that launch the same node (zones aside)."""

    name: Literal["balance"]
    # More labels that say nothing of the node (--balancing-ignore-label), e.g. a team's own.
    ignored_labels: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=317)]], Field(alias="ignoredLabels")
    ] = []


ExpanderSpec = Annotated[
    PriorityExpanderSpec
    | WeightedPriorityExpanderSpec
    | SimpleExpanderSpec
    | CustomExpanderSpec
    | BalanceExpanderSpec,
    Field(discriminator="name"),
]


def _balance_comes_last(chain: list[ExpanderSpec]) -> list[ExpanderSpec]:
    """balance spreads the choice the others made, so it follows them all, once."""
    for index, spec in enumerate(chain[:-1]):
        if isinstance(spec, BalanceExpanderSpec):
            raise ValueError(
                f"expanders[{index}] is balance: it spreads the chain's choice over similar "
                f"groups, so it comes last, once (the chain has {len(chain)})"
            )
    return chain


ExpanderChain = Annotated[
    list[ExpanderSpec], Field(min_length=1), AfterValidator(_balance_comes_last)
]
DEFAULT_EXPANDERS: list[ExpanderSpec] = [
    SimpleExpanderSpec(name="least-waste"),
    SimpleExpanderSpec(name="random"),
]

"""What a replay reports (`traces`): each trace's figures at the end of a run, the waits a
user feels (arrival to Ready, spread by workload), and what the nodes cost at a price
table's prices (the sandbox's on-demand ones, a table file's, the scenario's own)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from nodescaler_sandbox.figures import PodRecord
from nodescaler_sandbox.traces import Spec, TraceError
from nodescaler_sandbox.warm_pools import ON_DEMAND


def wait_spread(seconds: list[float]) -> dict[str, Any]:
    """p50 and p99 (nearest rank) of waits in seconds."""
    if not seconds:
        return {"count": 0, "p50": None, "p99": None}
    ordered = sorted(seconds)

    def rank(share: float) -> float:
        return round(ordered[max(math.ceil(share * len(ordered)) - 1, 0)], 1)

    return {"count": len(ordered), "p50": rank(0.5), "p99": rank(0.99)}


# --- what a replay reports ---------------------------------------------------------------


def replayed(world: Any) -> dict[str, Any]:
    """What the world's traces did, at the end of a run: each named with its window; jobs
    restarted and their work lost; requests served and their waits."""
    figures: dict[str, Any] = {}
    specs = {t.name: t for t in [*world.scenario.pod_traces, *world.scenario.request_traces]}
    for trace in world.pod_traces:
        figures[trace.name] = specs[trace.name].described() | {
            "pods_created": trace.created,
            "jobs_restarted": trace.jobs_restarted,
            "lost_job_minutes": round(trace.lost_job_minutes, 1),
        }
    for requests in world.request_queues:
        figures[requests.queue] = specs[requests.queue].described() | {
            "requests_served": requests.served,
            "request_wait_s": wait_spread(requests.waits),
        }
    return figures


def pod_wait_seconds(pods: Iterable[PodRecord], end_minute: float) -> list[float]:
    """Each pod's time from arrival to Ready, in seconds: to its going, or the end of the
    run, for one that never turned Ready (its wait is at least that)."""
    return [
        60 * max(next(t for t in (p.ready, p.gone, end_minute) if t is not None) - p.created, 0)
        for p in pods
    ]


# --- what a replay costs -----------------------------------------------------------------

# A price table's bounds, against typos: $1,000 is above any EC2 instance's hourly price
# (https://aws.amazon.com/ec2/pricing/on-demand/), and a cluster uses tens of instance
# types, not thousands: past either, the entry or the table is refused by name.
MAX_PRICE = 1000.0
MAX_PRICED_TYPES = 500
INSTANCE_TYPE = r"^[a-z][a-z0-9-]*\.[a-z0-9-]+$"
Dollars = Annotated[float, Field(ge=0, le=MAX_PRICE, allow_inf_nan=False)]


class Price(Spec):
    """An instance type's $ an hour: on demand, and on Spot (what your region's Spot price
    history says, `aws ec2 describe-spot-price-history`; the sandbox knows none)."""

    on_demand: Dollars | None = None
    spot: Dollars | None = None

    @model_validator(mode="before")
    @classmethod
    def _a_number_is_on_demand(cls, given: Any) -> Any:
        """A table's entry written as a number is its on-demand price."""
        if isinstance(given, int | float) and not isinstance(given, bool):
            return {"on_demand": given}
        return given


def price_table(path: Path) -> dict[str, Price]:
    """A price table file (YAML: `m5.xlarge: 0.214` or `m5.xlarge: {onDemand: 0.214,
    spot: 0.08}`), checked: a bad entry is named by file and type."""
    import yaml
    from pydantic import TypeAdapter, ValidationError

    try:
        document = yaml.safe_load(path.read_text())
    except OSError as error:
        raise TraceError(f"{path}: cannot read it ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise TraceError(f"{path}: not YAML: {error}") from None
    try:
        table = TypeAdapter(PriceTable).validate_python(document)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(top)"
        raise TraceError(f"{path}: {where}: {first['msg']}") from None
    return dict(table)


PriceTable = Annotated[
    dict[Annotated[str, Field(pattern=INSTANCE_TYPE, max_length=64)], Price],
    Field(max_length=MAX_PRICED_TYPES),
]


def prices_for(table: Path | None, inline: dict[str, Price]) -> dict[str, Price]:
    """The sandbox's on-demand prices, then the table file's, then the scenario's own, each
    entry's prices over the one before."""
    merged = {t: Price(on_demand=price) for t, (price, _) in ON_DEMAND.items()}
    for given in ([] if table is None else [price_table(table)]) + [inline]:
        for instance_type, price in given.items():
            before = merged.get(instance_type, Price())
            merged[instance_type] = Price(
                on_demand=before.on_demand if price.on_demand is None else price.on_demand,
                spot=before.spot if price.spot is None else price.spot,
            )
    return merged


def cost_usd(
    groups: Iterable[tuple[str, str, str]],
    node_hours: dict[str, float],
    prices: dict[str, Price],
) -> dict[str, Any]:
    """Each group's node-hours at its instance type's hourly price for its capacity type
    (`prices_for`), and the total; a type with no such price is named, its cost None, and
    so is the total (a sum of the priced groups alone would read as the run's cost)."""
    by_group: dict[str, float | None] = {}
    unpriced = set()
    for group, instance_type, capacity in groups:
        known = prices.get(instance_type, Price())
        price = known.spot if capacity == "spot" else known.on_demand
        if price is None and node_hours[group] > 0:  # a group never used costs nothing
            unpriced.add(instance_type if capacity != "spot" else f"{instance_type} (spot)")
        by_group[group] = None if price is None else round(node_hours[group] * price, 2)
    counted = [c for c in by_group.values() if c is not None]
    total = None if unpriced else round(sum(counted), 2)
    return {"total": total, "by_group": by_group} | (
        {"unpriced_instance_types": sorted(unpriced)} if unpriced else {}
    )


# --- the waits a user feels, by workload ---------------------------------------------------

MAX_WORKLOADS = 30  # the summary lists the workloads with most pods; the rest as one
_COUNTED = re.compile(r"-\d+$")


def workload_of(name: str, named: dict[str, str]) -> str:
    """A pod's workload: the trace row's `workload` (or `app`) label, else its controller's
    name (a deployment's pod `web-12`, a trace's `trace-7-2`: the name without its counts)."""
    key = name
    while key not in named:
        shorter = _COUNTED.sub("", key)
        if shorter == key:
            return key
        key = shorter
    return named[key]


def waits_by_workload(
    pods: Iterable[PodRecord], end_minute: float, named: dict[str, str]
) -> dict[str, Any]:
    """p50 and p99 of each workload's pod waits (`pod_wait_seconds`), the workloads with
    most pods first; past MAX_WORKLOADS, the others together under `(others)`."""
    waits: dict[str, list[float]] = {}
    for record in pods:
        (wait,) = pod_wait_seconds([record], end_minute)
        waits.setdefault(workload_of(record.name, named), []).append(wait)
    ranked = sorted(waits.items(), key=lambda item: (-len(item[1]), item[0]))
    spreads = {name: wait_spread(seconds) for name, seconds in ranked[:MAX_WORKLOADS]}
    rest = [w for _, seconds in ranked[MAX_WORKLOADS:] for w in seconds]
    return spreads | ({"(others)": wait_spread(rest)} if rest else {})

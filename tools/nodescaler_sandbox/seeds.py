"""A scenario run with several seeds (`nodescaler simulate --seeds N`, `make demo SEEDS=N`),
its summaries made one: each run's figures as their mean over the seeds, with their spread.

A seed moves what the scenario leaves to chance: the step of its minute at which each pod
or task arrives (`world.within_the_minute`) and which of equally allocated nodes a pod is
bound to (`cluster.tie_order`; the nodes' names are moto's random instance ids, so a tie
is not replayed node for node). Seed 0 is the sandbox's one run as it always was.

In the summary made one (`aggregate`), `seeds` lists the seeds; in each run every figure
that is a number (`idle_node_hours`, `node_hours`, `unschedulable_pod_minutes`, ...)
becomes its mean over the seeds, rounded as the figures are, and beside it
`<figure>_seeds` holds `{mean, min, max}` and `<figure>_spread` the spread, `max - min`
(the range, not a standard deviation: five seeds are too few for one). A figure nested
deeper (pod waits' percentiles, per group) is the first seed's, but for `reaction_s`'s
overall p50 and p99, whose means and spreads are `reaction_s_seeds` and
`reaction_s_spread`, and `reaction_s_p99_seeds` and `reaction_s_p99_spread`.
Everything else (timelines, pods, charts, the bound) is the first seed's.

A ratio is better, worse or within the spread (`mark`): within when nodescaler's and the
reference's figures are no further apart than the wider of their spreads (or a floor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

RUNS = ("nodescaler", "cluster-autoscaler-baseline", "cluster-autoscaler-tuned")
SEEDS_SUFFIX, SPREAD_SUFFIX = "_seeds", "_spread"
DIGITS = 3


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def reaction(run: Mapping[str, Any], percentile: str) -> float | None:
    """A run's overall reaction at `percentile` ("p50", "p99"), None when it has none."""
    reactions = run.get("reaction_s")
    overall = reactions.get("overall") if isinstance(reactions, Mapping) else None
    return _number(overall.get(percentile)) if isinstance(overall, Mapping) else None


# the reaction's overall percentiles over the seeds, under these keys (p50's as it was)
REACTIONS = {"p50": "reaction_s", "p99": "reaction_s_p99"}


def _plain(value: float) -> float:
    """A whole figure as a whole number (a count of pods stays a count), else rounded."""
    rounded = round(float(value), DIGITS)
    return int(rounded) if rounded.is_integer() else rounded


def spread(values: Sequence[float]) -> dict[str, float]:
    """`{mean, min, max}` of a figure's values over the seeds."""
    return {"mean": _plain(fmean(values)), "min": _plain(min(values)), "max": _plain(max(values))}


def _aggregate_run(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One run's summaries (one a seed) made one: see the module's docstring."""
    merged = dict(runs[0])
    for key, first in runs[0].items():
        values = [_number(run.get(key)) for run in runs]
        if _number(first) is None or any(v is None for v in values):
            continue  # not a figure, or one a seed lacks: the first seed's, left alone
        figure = spread([v for v in values if v is not None])
        merged[key] = figure["mean"]
        merged[key + SEEDS_SUFFIX] = figure
        merged[key + SPREAD_SUFFIX] = _plain(figure["max"] - figure["min"])
    for percentile, key in REACTIONS.items():
        reactions = [reaction(run, percentile) for run in runs]
        if all(r is not None for r in reactions):
            figure = spread([r for r in reactions if r is not None])
            merged[key + SEEDS_SUFFIX] = figure
            merged[key + SPREAD_SUFFIX] = _plain(figure["max"] - figure["min"])
    return merged


def aggregate(summaries: Sequence[Mapping[str, Any]], seeds: Sequence[int]) -> dict[str, Any]:
    """A scenario's summaries, one a seed in `seeds`' order, made one. One seed: its
    summary as it is, with `seeds`."""
    if len(summaries) != len(seeds) or not summaries:
        raise ValueError(f"seeds: {list(seeds)}: one summary each, not {len(summaries)}")
    if len(summaries) == 1:
        return {**summaries[0], "seeds": list(seeds)}
    merged = {**summaries[0], "seeds": list(seeds)}
    for name in RUNS:
        if all(isinstance(s.get(name), Mapping) for s in summaries):
            merged[name] = _aggregate_run([s[name] for s in summaries])
    return merged


def spread_of(run: Mapping[str, Any], key: str) -> float:
    """A run's spread over the seeds of the figure `key`; 0 for one seed."""
    return _number(run.get(key + SPREAD_SUFFIX)) or 0.0


def mark(ours: float, theirs: float, spreads: Sequence[float], floor: float = 0.0) -> str:
    """better (ours lower), worse, or within the spread: no further apart than the widest
    of `spreads` (each run's, over the seeds) or `floor` (what else counts as noise)."""
    if abs(ours - theirs) <= max(floor, *spreads):
        return "within"
    return "better" if ours < theirs else "worse"

"""The demo's closing verdict: per scenario, nodescaler against Cluster Autoscaler tuned, in
lines a person reads in five seconds, from the scenarios' summaries alone.

Each figure is a ratio, nodescaler's over CA tuned's (below 1: nodescaler spent or waited
less), marked better, worse or within noise: idle node-hours, pod-minutes waiting, the
reaction's p50 and p99, and the harm a saving may cost (pods killed with their instance,
Jobs' lost work) where either run has some. The scenarios nodescaler loses come first,
and in each line its losses come first. Then where the table and the charts are.

A difference is noise when it is within `RELATIVE_NOISE` of CA's figure, or smaller than
what the sandbox resolves: one node for one step (node-hours), one pod for one step
(pod-minutes), one step (reaction). A summary of several seeds (`seeds`) carries each
figure's mean over them (`<figure>_seeds`'s `mean`) and its spread (`<figure>_spread`,
`max - min`): the band widens to the wider of the two runs' spreads (`seeds.mark`). Keys
are read defensively: a figure a summary lacks is left out, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nodescaler_sandbox import seeds
from nodescaler_sandbox.run_summary import why_notes

NODESCALER = "nodescaler"
TUNED = "cluster-autoscaler-tuned"
BASELINE = "cluster-autoscaler-baseline"
REFERENCE_NAME = "Cluster Autoscaler (tuned)"
RELATIVE_NOISE = 0.05  # 5 % of CA's figure: below what a change of seed moves it
DEFAULT_STEP_SECONDS = 10.0


@dataclass(frozen=True)
class Figure:
    """One figure the verdict compares: its words, how to read it from a run's summary,
    and the smallest difference the sandbox resolves, from the scenario's step (seconds)."""

    label: str
    key: str  # the summary's key; `<key>_spread`, when there, is its spread over seeds
    read: Callable[[Mapping[str, Any]], float | None]
    resolution: Callable[[float], float]
    unit: str = ""  # after each figure, where the label does not say it


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _key(key: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda run: _number(run.get(key))


def _reaction(percentile: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda run: seeds.reaction(run, percentile)


FIGURES = (
    Figure("idle node-hours", "idle_node_hours", _key("idle_node_hours"), lambda s: s / 3600),
    Figure(
        "pod-minutes waiting",
        "unschedulable_pod_minutes",
        _key("unschedulable_pod_minutes"),
        lambda s: s / 60,
    ),
    Figure("reaction (p50)", "reaction_s", _reaction("p50"), lambda s: s, " s"),
    Figure("reaction (p99)", "reaction_s_p99", _reaction("p99"), lambda s: s, " s"),
)
# Harm a workload pays for the savings, said only where either run has some: a worker or
# pod that went with its instance, and the work of Jobs evicted and restarted.
HARMS = (
    Figure(
        "pods killed with their instance",
        "pods_killed_with_their_instance",
        _key("pods_killed_with_their_instance"),
        lambda s: 1.0,
    ),
    Figure("lost job-minutes", "lost_job_minutes", _key("lost_job_minutes"), lambda s: s / 60),
)


def _read(figure: Figure, run: Mapping[str, Any]) -> float | None:
    """The figure's mean over the seeds when the run has several, else its one value."""
    over_seeds = run.get(figure.key + seeds.SEEDS_SUFFIX)
    if isinstance(over_seeds, Mapping) and _number(over_seeds.get("mean")) is not None:
        return _number(over_seeds["mean"])
    return figure.read(run)


@dataclass(frozen=True)
class Comparison:
    label: str
    ours: float
    theirs: float
    mark: str  # better, worse or within noise
    unit: str = ""

    @property
    def ratio(self) -> float:
        if self.theirs == 0:
            return 1.0 if self.ours == 0 else math.inf
        return self.ours / self.theirs

    def text(self) -> str:
        ratio = "∞" if math.isinf(self.ratio) else f"{self.ratio:.2f}×"
        ours, theirs = f"{self.ours:g}{self.unit}", f"{self.theirs:g}{self.unit}"
        return f"{self.label} {ratio} ({ours} vs {theirs})"


def compare(summary: Mapping[str, Any]) -> list[Comparison]:
    """Each figure both runs have, marked; the losses first, then the wins, then the rest."""
    ours, theirs = summary.get(NODESCALER), summary.get(TUNED)
    if not isinstance(ours, Mapping) or not isinstance(theirs, Mapping):
        return []
    step = _number(summary.get("step_seconds")) or DEFAULT_STEP_SECONDS
    compared = []
    for figure in (*FIGURES, *HARMS):
        mine, other = _read(figure, ours), _read(figure, theirs)
        if mine is None or other is None or (figure in HARMS and mine == other == 0):
            continue
        spreads = [seeds.spread_of(run, figure.key) for run in (ours, theirs)]
        floor = max(RELATIVE_NOISE * abs(other), figure.resolution(step))
        mark = seeds.mark(mine, other, spreads, floor)
        compared.append(
            Comparison(
                figure.label, mine, other, mark.replace("within", "within noise"), figure.unit
            )
        )
    order = {"worse": 0, "better": 1, "within noise": 2}
    return sorted(compared, key=lambda c: order[c.mark])


def _line(name: str, comparisons: Sequence[Comparison], width: int) -> str:
    if not comparisons:
        return f"  {name:<{width}}  no {REFERENCE_NAME} run to compare with"
    parts = []
    for mark in ("worse", "better", "within noise"):
        same = [c.text() for c in comparisons if c.mark == mark]
        if same:
            parts.append(f"{mark.upper() if mark == 'worse' else mark}: {', '.join(same)}")
    return f"  {name:<{width}}  " + " · ".join(parts)


def _lines(
    name: str, comparisons: Sequence[Comparison], notes: Sequence[str], width: int
) -> list[str]:
    """The scenario's line, then what its run says beside it (`run_summary.why_notes`)."""
    return [_line(name, comparisons, width), *(f"  {'':<{width}}  ↳ {n}" for n in notes)]


def verdict(
    summaries: Sequence[Mapping[str, Any]], table: Path | None, charts: Sequence[Path] = ()
) -> list[str]:
    """The verdict's lines: a heading, a line a scenario (those nodescaler loses on
    something first), a count, and where the table and the charts are."""
    judged = [(str(s.get("scenario", "?")), compare(s), why_notes(s)) for s in summaries]
    judged.sort(key=lambda item: not any(c.mark == "worse" for c in item[1]))
    width = max((len(name) for name, _, _ in judged), default=0)
    losing = sum(any(c.mark == "worse" for c in compared) for _, compared, _ in judged)
    lines = [
        f"Verdict: nodescaler against {REFERENCE_NAME}, ratios nodescaler / CA "
        f"(below 1 is better; within {RELATIVE_NOISE:.0%} or one step is noise)",
        *(line for item in judged for line in _lines(*item, width)),
        f"nodescaler is worse on something in {losing} of {len(judged)} "
        f"scenario{'s' if len(judged) != 1 else ''}.",
    ]
    if table is not None:
        lines.append(f"Summary: {table}")
    if charts:
        lines.append(f"Charts: {', '.join(str(c) for c in charts)}")
    return lines

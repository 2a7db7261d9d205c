"""Runs a scenario file in the sandbox, three times: once scaled by nodescaler (the real
handlers, on the events AWS would send), once by the reactive baseline in the manner of
Cluster Autoscaler with its defaults, and once by that baseline tuned as an operator
would to match the group's policy (`controllers`, `baseline_tuning`); then writes what
happened under `out/demo/<scenario>/`:
- `timeline.txt` (also printed; `timeline`): time, group, metrics against targets,
  current → desired, why;
- `summary.json`: the bound (`oracle_bounds`: node-hours no run holding the demand can
  beat, and a first-fit decreasing packing beside it, a heuristic), and
  both runs' figures side by side (`run_summary`: node-hours and idle node-hours, pod
  waits and Ready times, each group's demand-to-scale-request time, evictions and pods
  killed, budget-short minutes, Auto Scaling writes, sizes; see scenarios/README.md);
- `chart.png` (`chart_series`, `chart`): a panel for each group's nodes, each of its
  metrics, and the cluster's nodes, vCPUs and memory against its limits, and pods waiting;
- `timeline.json` (every step, both runs), `pods.json` (each pod: created, found no node,
  bound, Ready, gone, in minutes, and its group) and `logs-<run>.jsonl` (the functions' logs).
One run, step by step, is `simulation`'s; given more than one core, `run` makes a
scenario's runs in processes of their own, a core each, with the same results
(`_simulated`); `run_all`, a core a scenario already, makes each one's in sequence. A
test runs only the controllers it checks (`run`'s `controllers`), without the chart, and
may learn the days before `judgedFrom` at coarser steps (`learn_step`); `make demo` runs
all three and draws. `seed` moves arrivals within a minute and placement ties (0: as the
sandbox always had them); `run_seeds` runs a scenario with several and writes their
summaries made one (`seeds`), the other seeds' runs under `seeds/<seed>/`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import sys
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nodescaler_sandbox import (
    chart_series,
    figures,
    oracle_bounds,
    run_summary,
    seeds,
    simulation,
    timeline,
)
from nodescaler_sandbox.cadence import MINUTE
from nodescaler_sandbox.controllers import BASELINE, CONTROLLERS, NODESCALER, TUNED
from nodescaler_sandbox.observation import Run
from nodescaler_sandbox.sandbox import ROOT, sandbox
from nodescaler_sandbox.scenario_file import Scenario, load_scenario
from nodescaler_sandbox.world import World

if TYPE_CHECKING:
    pass

__all__ = [  # the controllers' names too: a caller picks its runs by them
    "BASELINE",
    "CONTROLLERS",
    "NODESCALER",
    "OUT",
    "SCENARIOS",
    "TUNED",
    "invoke",
    "progress_to_terminal",
    "run",
    "run_all",
    "run_file",
    "run_one",
    "run_seeds",
    "scenario_files",
]

OUT = Path("out/demo")
SCENARIOS = ROOT / "scenarios"


def scenario_files() -> list[Path]:
    """The scenarios in the repository, in the order `make demo` runs them: by their
    number (10 after 9), then name."""

    def order(path: Path) -> tuple[int, str]:
        number, _, _ = path.name.partition("-")
        return (int(number) if number.isdigit() else 10**6, path.name)

    return sorted(SCENARIOS.glob("*.yaml"), key=order)


def run(
    scenario: Scenario,
    *,
    out: Path | None = None,
    write: Callable[[str], None] = print,
    progress: Callable[[str], None] | None = None,
    controllers: Sequence[str] = CONTROLLERS,
    chart: bool = True,
    learn_step: int | None = None,
    seed: int = 0,
    parallel: bool = True,
    peaks: dict[int, float] | None = None,
) -> dict[str, Any]:
    """The scenario under each of `controllers` (by default nodescaler, the baseline and
    the baseline tuned); returns the summary, a key a controller run (its `oracle_node_hours`
    the least of the runs made). `chart`: draw chart.png (of nodescaler and the baseline).
    `learn_step`: the steps before the judged minutes, in seconds (`simulation.step_times`).
    `seed`: arrivals within a minute and placement ties (`seeds`); 0 as ever.
    `parallel`: the runs in processes of their own, a core each, when this process may use
    more than one (`_simulated`); False: one after another, here. `peaks`: filled with each
    such process's peak resident memory in MiB, by its pid."""
    runs_asked = _runs_asked(controllers, chart)
    times = simulation.step_times(scenario, learn_step)
    folder = out or OUT / scenario.name
    folder.mkdir(parents=True, exist_ok=True)
    write(f"\n== {scenario.name}: {scenario.description.strip()}")
    runs = _simulated(
        scenario, runs_asked, folder, progress, times, seed=seed, parallel=parallel, peaks=peaks
    )
    if progress:
        progress("")  # the live line gives way to the timeline
    told = timeline.lines(scenario, runs.get(NODESCALER) or runs[runs_asked[0]])
    (folder / "timeline.txt").write_text("\n".join(told) + "\n")
    for line in told:
        write(line)
    bound = oracle_bounds.bound(scenario, runs.values(), times)
    summary: dict[str, Any] = {
        "scenario": scenario.name,
        "start": scenario.start.isoformat(),
        "minutes": scenario.minutes,
        "step_seconds": scenario.step_seconds,
        "seeds": [seed],
        **bound,
        **{
            controller: run_summary.summarize(scenario, result)
            for controller, result in runs.items()
        },
    }
    for controller, result in runs.items():
        summary[controller]["oracle_node_hours_given_waits"] = oracle_bounds.bound_given_waits(
            scenario, result, float(bound["oracle_node_hours"])
        )
    _write_runs(folder, summary, runs)
    if chart:
        chart_series.draw(scenario, runs, folder / "chart.png")
    write(run_summary.side_by_side(summary) + run_summary.notes(summary))
    write(f"   → {folder}/ (timeline.txt, summary.json{', chart.png' if chart else ''}, logs)")
    return summary


def _runs_asked(controllers: Sequence[str], chart: bool) -> list[str]:
    """The controllers asked, in `CONTROLLERS`' order; ValueError for one unknown, none,
    or a chart without the two runs it draws."""
    runs_asked = [c for c in CONTROLLERS if c in controllers]
    if not runs_asked or len(runs_asked) != len(controllers):
        raise ValueError(f"controllers: {list(controllers)}: each one of {list(CONTROLLERS)}")
    if chart and not {NODESCALER, BASELINE} <= set(runs_asked):
        raise ValueError(f"chart: draws {NODESCALER} beside {BASELINE}: run both, or no chart")
    return runs_asked


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _simulated(
    scenario: Scenario,
    controllers: Sequence[str],
    folder: Path,
    progress: Callable[[str], None] | None,
    times: Sequence[int],
    *,
    seed: int,
    parallel: bool,
    peaks: dict[int, float] | None,
) -> dict[str, Run]:
    """Each controller's run: one after another here, or, given more than one core and
    `parallel`, a process each (spawned: no thread or socket inherited), up to one a core,
    the runs in the order asked (nodescaler's, the longest, first). A run owes nothing to
    another (each starts its own sandbox, on ports of its own, from its own seeds), so
    what they return is the same either way. No live line from the processes."""
    workers = min(len(controllers), _cores()) if parallel else 1
    if workers <= 1:
        return {
            controller: simulation.simulate(
                scenario, controller, folder, progress, times, seed=seed
            )
            for controller in controllers
        }
    if progress:
        progress(f"{scenario.name}: {len(controllers)} runs, {workers} at a time")
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {
            c: pool.submit(_simulate_apart, scenario, c, folder, times, seed) for c in controllers
        }
        runs = {}
        for controller, future in futures.items():
            runs[controller], pid, peak = future.result()
            if peaks is not None:  # a process's peak only grows: its last run's is its own
                peaks[pid] = max(peaks.get(pid, 0.0), peak)
    return runs


def _simulate_apart(
    scenario: Scenario, controller: str, folder: Path, times: Sequence[int], seed: int
) -> tuple[Run, int, float]:
    """One run in a process of its own: the run, the process's pid and its peak resident
    memory so far, in MiB (measured here: the parent's RUSAGE_CHILDREN gives only the
    largest child's, not what they hold together)."""
    result = simulation.simulate(scenario, controller, folder, None, times, seed=seed)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return result, os.getpid(), peak_kib / 1024


def _write_runs(folder: Path, summary: dict[str, Any], runs: dict[str, Run]) -> None:
    """The runs' summary, every step of each (`timeline.json`) and each one's pods."""
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    timelines = {name: r.minutes for name, r in runs.items()}
    (folder / "timeline.json").write_text(json.dumps(timelines) + "\n")
    pods = {name: [figures.as_row(p) for p in r.pods] for name, r in runs.items()}
    (folder / "pods.json").write_text(json.dumps(pods) + "\n")


def run_seeds(
    scenario: Scenario,
    seeds_run: Sequence[int],
    *,
    out: Path | None = None,
    write: Callable[[str], None] = print,
    **options: Any,
) -> dict[str, Any]:
    """The scenario run (`run`) with each of `seeds_run`: the first as one run is, in
    `out`; the others quietly, without a chart, in `out`/seeds/<seed>/. Returns their
    summaries made one (`seeds.aggregate`), also written to `out`/summary.json."""
    if not seeds_run or len(set(seeds_run)) != len(seeds_run):
        raise ValueError(f"seeds: {list(seeds_run)}: one or more, each once")
    folder = out or OUT / scenario.name
    first, *others = seeds_run
    summaries = [run(scenario, out=folder, write=write, seed=first, **options)]
    options.pop("progress", None)
    for seed in others:
        write(f"   seed {seed} of {list(seeds_run)} …")
        summaries.append(
            run(
                scenario,
                out=folder / "seeds" / str(seed),
                write=lambda line: None,
                seed=seed,
                **{**options, "chart": False},
            )
        )
    summary = seeds.aggregate(summaries, seeds_run)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def run_one(scenario: Scenario, controller: str, out: Path) -> dict[str, Any]:
    """The scenario under one controller alone: its summary (as `run` gives it); its
    timeline in `out`/timeline.txt."""
    out.mkdir(parents=True, exist_ok=True)
    result = simulation.simulate(
        scenario, controller, out, None, simulation.step_times(scenario, None)
    )
    (out / "timeline.txt").write_text("\n".join(timeline.lines(scenario, result)) + "\n")
    return run_summary.summarize(scenario, result)


def run_file(path: Path, **options: Any) -> dict[str, Any]:
    return run(load_scenario(path), **options)


def _run_quietly(
    path: Path, out: Path | None, seeds_run: Sequence[int] = (0,)
) -> tuple[dict[str, Any] | None, list[str]]:
    """One scenario in a worker process: its summary (None if it failed), and what it
    printed, a failure's traceback last."""
    printed: list[str] = []
    try:
        scenario = load_scenario(path)
        folder = None if out is None else out / scenario.name
        # a core each already: its runs one after another, no pool within the pool
        summary = run_seeds(scenario, seeds_run, out=folder, write=printed.append, parallel=False)
        return summary, printed
    except Exception:  # told in order with the others, not lost behind them
        return None, [*printed, f"{path}: the run failed\n{traceback.format_exc()}"]


def run_all(
    files: Sequence[Path],
    scenarios: Sequence[Scenario],
    write: Callable[[str], None] = print,
    out: Path | None = None,
    seeds_run: Sequence[int] = (0,),
) -> list[dict[str, Any]]:
    """Every scenario, one a core at a time (each starts its own sandbox: moto's server and
    an API server on ports of its own), the longest first; each one's output printed in
    the scenarios' order as soon as those before it are done. The summaries in order."""
    workers = max(1, min(os.cpu_count() or 1, len(files)))
    write(
        f"Running {len(files)} scenarios, {workers} at a time "
        "(each three times: nodescaler, CA defaults, CA tuned"
        + (f"; with seeds {list(seeds_run)})" if len(seeds_run) > 1 else ")")
    )
    longest_first = sorted(range(len(files)), key=lambda i: -scenarios[i].minutes)
    done: dict[int, tuple[dict[str, Any] | None, list[str]]] = {}
    shown = 0
    context = multiprocessing.get_context("spawn")  # no thread or socket inherited
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(_run_quietly, files[i], out, seeds_run): i for i in longest_first}
        for future in as_completed(futures):
            done[futures[future]] = future.result()
            while shown in done:
                for line in done[shown][1]:
                    write(line)
                shown += 1
    failed = [str(files[i]) for i in range(len(files)) if done[i][0] is None]
    if failed:
        raise RuntimeError(f"scenarios that failed: {', '.join(failed)} (tracebacks above)")
    return [summary for summary, _ in (done[i] for i in range(len(files))) if summary]


def progress_to_terminal() -> Callable[[str], None] | None:
    """A live line on a terminal (rewritten in place); nothing when output is a file."""
    if not sys.stderr.isatty():
        return None

    def show(line: str) -> None:
        sys.stderr.write("\r\033[K" + line[:120])
        sys.stderr.flush()

    return show


# --- one function, one event -----------------------------------------------------------


def invoke(
    function: str,
    incoming: dict[str, Any],
    scenario: Scenario,
    *,
    out: Path | None = None,
    write: Callable[[str], None] = print,
) -> Any:
    """`function`'s handler on `incoming`, in a sandbox holding the scenario's world at
    its first minute, every pod and task of that minute arrived (at the event's time,
    when it has one); prints what it returned and its log lines. Dispatch's queued
    evaluations run too, as Lambda would run them."""
    from nodescaler_sandbox.lambda_local import LocalContext

    out = out or OUT / "invoke"
    out.mkdir(parents=True, exist_ok=True)
    boot = timedelta(minutes=scenario.boot_minutes)
    log_path = out / f"logs-{function}.jsonl"
    with (
        sandbox(
            scenario.policies_path,
            out,
            boot=boot,
            environment=dict(scenario.environment),
            start=scenario.start,
        ) as box,
        log_path.open("w") as log,
    ):
        with box.logging_to(log):
            world = World(scenario, box, hooks=True)
            for at in range(0, MINUTE, scenario.step_seconds):  # the minute's arrivals
                world.step(at)
            if isinstance(incoming.get("time"), str):
                box.clock.at = datetime.fromisoformat(incoming["time"].replace("Z", "+00:00"))
            context = LocalContext(f"nodescaler-{function}")
            if function == "dispatch":
                result = box.dispatch(incoming)
            elif function == "evaluate":
                result = box.handlers["evaluate"].handler(
                    incoming, context, evaluator=box.evaluator
                )
            elif function == "terminate":  # as Auto Scaling asks it which instances go
                result = box.handlers["terminate"].handler(
                    incoming, context, chooser=box.terminator
                )
            else:
                result = box.handlers["drain"].handler(incoming, context, drainer=box.drainer)
        write(json.dumps(result, indent=2, default=str))
        for group in scenario.groups:
            decision = box.state.load(group.name).last_decision
            if decision is not None:
                write(f"{group.name}: {decision.current} → {decision.desired}: {decision.reason}")
    write(f"   → logs: {log_path}")
    return result

"""Replaying a production-sized pod trace: two days, about 1,100 pods of 58 shapes (jobs
and services) on two groups, under nodescaler, Cluster Autoscaler's defaults and tuned
(the three runs `make demo` makes), in a fresh interpreter that reports its wall time and
its peak resident memory (issue 43: within 5 minutes and 2 GiB on two cores).

Given more than one core, the runner makes the three runs in processes of their own, a
core each (`runner.run`'s `parallel`). The peak then reported is an upper bound of what
they held together: the interpreter's own peak plus each run process's own peak, measured
in that process (`RUSAGE_CHILDREN` would give only the largest child's), added up as if all
had peaked at once.

The trace is generated, seeded, the same every time: a weekday's swell of arrivals over
each day, shapes from 250m/512Mi to 8 CPUs/32Gi (some asking for a GPU on the second
group), jobs of 5 minutes to 3 hours and services that stay hours.
"""

from __future__ import annotations

import json
import math
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nodescaler_sandbox.sandbox import ROOT

DAYS = 2
PODS = 1100
SHAPES = 58
GPU_SHAPES = 6  # of the 58, asking for a GPU (the second group's)
SCENARIO = """\
name: trace-replay-bench
description: A generated two-day pod trace of {pods} pods in {shapes} shapes.
minutes: {minutes}
policies: {policies}
groups:
  - {{name: general, policy: batch, min: 0, max: 40, instanceType: m5.4xlarge}}
  - name: gpu
    policy: gpu-inference
    min: 0
    max: 8
    instanceType: g5.xlarge
    node: {{cpu: "4", memory: 15Gi, nvidia.com/gpu: 1}}
    labels: {{accelerator: nvidia}}
    taints: [{{key: nvidia.com/gpu, value: "true", effect: NoSchedule}}]
podTraces:
  - {{file: pods.csv, name: trace}}
"""
HEADER = "arrival_s,cpu,memory,nvidia.com/gpu,node_selector,tolerations,run_s,delete_s"


def shapes(draw: random.Random) -> list[tuple[str, str, int]]:
    """The trace's shapes: (cpu, memory, GPUs), GPU ones last."""
    cpus = ["100m", "250m", "500m", "1", "2", "3", "4", "8"]  # 8 x 8 combinations: 52 fit
    made: set[tuple[str, str, int]] = set()
    while len(made) < SHAPES - GPU_SHAPES:
        cpu = draw.choice(cpus)
        made.add((cpu, f"{draw.choice([256, 512, 1024, 2048, 4096, 8192, 16384, 32768])}Mi", 0))
    gpu = {(c, f"{m}Gi", 1) for c in ("1", "2", "3") for m in (4, 8)}
    return sorted(made) + sorted(gpu)[:GPU_SHAPES]


def rows(seed: int = 43) -> list[str]:
    """The trace's rows, sorted by arrival: more arrive in each day's working hours."""
    draw = random.Random(seed)
    kinds = shapes(draw)
    seconds = DAYS * 24 * 3600
    arrivals: list[float] = []
    while len(arrivals) < PODS:
        at = draw.uniform(0, seconds)
        hour = (at / 3600) % 24
        if draw.random() < 0.25 + 0.75 * max(0.0, math.sin(math.pi * (hour - 6) / 14)):
            arrivals.append(at)
    made = []
    for at in sorted(arrivals):
        cpu, memory, gpu = draw.choice(kinds)
        selector, toleration = (
            ("accelerator=nvidia", "nvidia.com/gpu=true:NoSchedule") if gpu else ("", "")
        )
        if draw.random() < 0.7:  # a job
            run, delete = f"{draw.uniform(300, 3 * 3600):.0f}", ""
        else:  # a service, gone after hours (or never)
            run, delete = "", f"{min(at + draw.uniform(3600, 12 * 3600), seconds - 1):.0f}"
        made.append(f"{at:.1f},{cpu},{memory},{gpu or ''},{selector},{toleration},{run},{delete}")
    return made


def write(folder: Path) -> Path:
    """The trace and its scenario in `folder`; the scenario's path."""
    (folder / "pods.csv").write_text("\n".join([HEADER, *rows()]) + "\n")
    path = folder / "trace-replay.yaml"
    path.write_text(
        SCENARIO.format(
            pods=PODS,
            shapes=SHAPES,
            minutes=DAYS * 24 * 60,
            policies=ROOT / "scenarios" / "policies",
        )
    )
    return path


def _replay(path: str, out: str) -> None:
    """In the fresh interpreter: the three runs; prints seconds and peak MiB as JSON."""
    from nodescaler_sandbox.runner import run_file

    started = time.perf_counter()
    peaks: dict[int, float] = {}  # each run process's own peak, MiB (module docstring)
    run_file(Path(path), out=Path(out), write=lambda _: None, peaks=peaks)
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    peak_mib = peak_kib / 1024 + sum(peaks.values())
    print(json.dumps({"seconds": seconds, "peak_mib": peak_mib, "processes": 1 + len(peaks)}))


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder))
        done = subprocess.run(
            [sys.executable, "-m", "nodescaler_bench.trace_replay", str(path), folder],
            check=True,
            capture_output=True,
            text=True,
        )
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "trace_replay_2day_seconds": round(measured["seconds"], 1),
        "trace_replay_2day_peak_mib": round(measured["peak_mib"]),
    }


if __name__ == "__main__":
    _replay(sys.argv[1], sys.argv[2])

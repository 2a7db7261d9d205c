"""Seconds from demand to the scale request, in the sandbox's 10-s world: a scenario of
pending pods and one of a queue, each run under nodescaler as deployed (the fast path on)
and once with the fast path off (the tick and the alarms alone). The figure is the p99 of
the summary's `reaction_s` (`figures.reaction_seconds`): from a pod's arrival second, or
a queue's messages passing its target, to the second the scale request that answers it
takes effect, charged nodescaler's latencies (`nodescaler_sandbox.latency`).
Run alone: `python -m nodescaler_bench.reaction`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nodescaler_sandbox.runner import NODESCALER, SCENARIOS, run_one
from nodescaler_sandbox.sandbox import FAST_PATH
from nodescaler_sandbox.scenario_file import Scenario, load_scenario

OUT = Path("out/bench/reaction")
BENCHES = {  # figure → (scenario, which of its reactions)
    "reaction_pending_pods_s_p99": ("6-gpu-from-zero.yaml", "pending_pods"),
    "reaction_queue_s_p99": ("1-queue-burst.yaml", "queue"),
}


def reaction_p99(scenario: Scenario, kind: str, *, fast_path: bool, out: Path) -> float | None:
    """The p99 of nodescaler's reactions of `kind` in `scenario`, in seconds."""
    environment = scenario.environment | {FAST_PATH: "true" if fast_path else "false"}
    changed = scenario.model_copy(update={"environment": environment})
    summary = run_one(changed, NODESCALER, out)
    p99: float | None = summary["reaction_s"][kind]["p99"]
    return p99


def run(
    benches: dict[str, tuple[str, str]] = BENCHES, scenarios: Path = SCENARIOS
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, (file, kind) in benches.items():
        scenario = load_scenario(scenarios / file)
        figures[name] = reaction_p99(scenario, kind, fast_path=True, out=OUT / name)
        figures[f"{name}_fast_path_off"] = reaction_p99(
            scenario, kind, fast_path=False, out=OUT / f"{name}-off"
        )
    return figures


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))

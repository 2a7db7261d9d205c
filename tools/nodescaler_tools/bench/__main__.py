"""`make bench`: measure, print a table, and write out/bench/results.json.

Each figure is measured in this run, on this machine. Figures from the other benches land
in the same file under the names the issues give; a bench not built yet is simply absent.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

from nodescaler_tools.bench import kubernetes

RESULTS = Path("out/bench/results.json")


def main() -> None:
    started = time.time()
    results: dict[str, object] = {}
    print("Kubernetes: 5,000 nodes, 150,300 pods from the loopback API server ...", flush=True)
    results.update(kubernetes.run())
    python = f"{platform.python_implementation()} {platform.python_version()}"
    results["machine"] = f"{platform.machine()}, {python}"
    results["bench_seconds"] = round(time.time() - started, 1)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    width = max(len(k) for k in results)
    for name, value in results.items():
        print(f"  {name:<{width}}  {value}")
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()

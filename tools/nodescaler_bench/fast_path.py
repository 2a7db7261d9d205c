"""The fast path's cost to the API server and in Lambda: one invocation (a minute of looks,
every 5 s) against the loopback API server holding 5,000 nodes and 150,000 bound pods,
nothing pending, 20 groups whose policy reads pending pods.

`fast_path_apiserver_requests_per_minute` counts the requests that minute makes and
`fast_path_apiserver_bytes_per_minute` the bytes their answers carried; the invocation's
billed duration is measured (the looks' real time, the sleeps between them taken as slept)
and `fast_path_gb_s_per_month` is the function's memory × that duration × one invocation a
minute for a 30-day month. Run alone: `python -m nodescaler_bench.fast_path`.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from nodescaler_bench.kubernetes import (
    StaticGroups,
    api_server,
    bound,
    in_fresh_interpreter,
)

GROUPS = 20
MEMORY_MB = 256  # infra/fast_path.py's FAST_PATH_MEMORY_MB (the bench imports no CDK)
INVOCATIONS_PER_MONTH = 60 * 24 * 30  # started each minute, a 30-day month
RUN_FOR = timedelta(minutes=1) - timedelta(seconds=3)  # functions/fast_path's window
RESULTS = Path("out/bench/results.json")


def nothing_pending(cluster: Any) -> None:
    """5,000 nodes, 30 pods bound to each: the fast path's look finds nothing."""
    bound(cluster)


class SleptClock:
    """Real time, plus the sleeps taken as slept: what Lambda would bill, without waiting."""

    def __init__(self) -> None:
        self._start, self._real, self.slept = datetime.now(UTC), time.perf_counter(), 0.0

    def now(self) -> datetime:
        return self._start + timedelta(seconds=time.perf_counter() - self._real + self.slept)

    def sleep(self, seconds: float) -> None:
        self.slept += seconds


class Unsent:
    def send(self, requests: Any) -> None:
        raise AssertionError(f"nothing is pending, yet the fast path asked: {requests}")


def _invocation(url: str) -> dict[str, Any]:
    from kubernetes import client as k8s
    from nodescaler.adapters.k8s.core_api import KubernetesCluster
    from nodescaler.domain.groups.node_group import NodeGroup
    from nodescaler.domain.groups.optin import TagNames
    from nodescaler.domain.policy import NodeGroupPolicy
    from nodescaler.service.fast_path import FastPath
    from nodescaler.service.policy_resolver import PolicyBook

    api = k8s.ApiClient(k8s.Configuration(host=url))

    class Connection:
        def api(self) -> Any:
            return api

        def renew(self) -> None:
            pass

    tags = {"nodescaler/enabled": "true", "nodescaler/policy": "batch"}
    groups = [NodeGroup(f"asg-{g}", 250, 0, 1000, 250, tags=tags) for g in range(GROUPS)]
    policy = NodeGroupPolicy.model_validate(
        {
            "metadata": {"name": "batch"},
            "spec": {"minReplicas": 0, "maxReplicas": 1000, "metrics": [{"type": "PendingPods"}]},
        }
    )
    cluster = KubernetesCluster(Connection())
    requests = 0
    answer = cluster._api.answer

    def counted(*args: Any, **query: Any) -> bytes:
        nonlocal requests
        requests += 1
        return answer(*args, **query)

    cluster._api.answer = counted  # type: ignore[method-assign]
    clock = SleptClock()
    fast = FastPath(
        StaticGroups(groups),
        Unsent(),
        PolicyBook({"batch": policy}, TagNames()),
        cluster,
        backlogs=None,  # type: ignore[arg-type]  # no queue policy here
        prometheus=None,  # type: ignore[arg-type]  # nor Prometheus policy
        clock=clock,
        sleep=clock.sleep,
    )
    started = clock.now()
    looks = fast.run(until=started + RUN_FOR)
    billed = (clock.now() - started).total_seconds()
    if failed := [look.kubernetes_error for look in looks if look.kubernetes_error]:
        raise AssertionError(f"the looks failed, nothing was measured: {failed[0]}")
    return {
        "looks": len(looks),
        "requests": requests,
        "bytes": cluster.bytes_read,
        "billed_seconds": billed,
        "busy_seconds": billed - clock.slept,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run() -> dict[str, float]:
    with api_server(nothing_pending) as url:
        in_fresh_interpreter("nodescaler_bench.fast_path", url)  # a cold container's minute
        warm = in_fresh_interpreter("nodescaler_bench.fast_path", url)
    gb_s = MEMORY_MB / 1024 * warm["billed_seconds"] * INVOCATIONS_PER_MONTH
    return {
        "fast_path_apiserver_requests_per_minute": warm["requests"],
        "fast_path_apiserver_bytes_per_minute": warm["bytes"],
        "fast_path_look_ms": round(warm["busy_seconds"] / warm["looks"] * 1000, 2),
        "fast_path_invocation_s": round(warm["billed_seconds"], 2),
        "fast_path_peak_mb": round(warm["peak_mb"], 1),
        "fast_path_gb_s_per_month": round(gb_s),
    }


if __name__ == "__main__":
    if len(sys.argv) > 1:  # the measured side, in a fresh interpreter
        print(json.dumps(_invocation(sys.argv[1])))
    else:  # this bench alone, its figures merged into the results file
        figures = run()
        results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results | figures, indent=2) + "\n")
        for name, value in figures.items():
            print(f"  {name:<42} {value}")

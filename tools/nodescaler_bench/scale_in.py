"""Choosing the instances a scale-in takes, at scale: one group of 1,000 nodes and 30,000
pods (and their disruption budgets) on the loopback API server, the terminate function's
chooser asked for 10 of them, listing the cluster through the real `kubernetes` client.

The server runs in its own process; the chooser in a fresh interpreter, which reports its
time and its peak resident memory. Most nodes are full; nine are empty and fifty carry two
pods, so there is something to choose (the empty ones and, one at a time, a light one)
and somewhere for those pods to go.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any

from nodescaler_bench import reference
from nodescaler_bench.kubernetes import _node, _pod, api_server, in_fresh_interpreter

NODES = 1000
PODS = 30_000
LIGHT = 50  # nodes with two pods only
EMPTY = 9  # nodes with none
WANTED = 10
APPS = 97  # _pod's services: service-0 … service-96
GROUP = "group-0"


class Drained:
    """The group carries the drain hook, so a light node may go too (`DrainHooks`)."""

    def drains(self, group: str) -> bool:
        return True


def fill(cluster: Any) -> None:
    full = NODES - LIGHT - EMPTY
    per_node = (PODS - 2 * LIGHT) // full
    index = 0
    for n in range(NODES):
        node = _node(n)
        node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] = GROUP
        cluster.put("nodes", node)
        for _ in range(per_node if n < full else 2 if n < full + LIGHT else 0):
            cluster.put("pods", _pod(index, node["metadata"]["name"]))
            index += 1
    for app in range(APPS):
        for team in range(20):
            cluster.put(
                "poddisruptionbudgets",
                {
                    "metadata": {"name": f"service-{app}", "namespace": f"team-{team}"},
                    "spec": {
                        "maxUnavailable": 1,
                        "selector": {"matchLabels": {"app": f"service-{app}"}},
                    },
                },
            )


def _compute(url: str) -> dict[str, Any]:
    from kubernetes import client as k8s
    from nodescaler.adapters.k8s.core_api import KubernetesCluster
    from nodescaler.domain.groups.node_group import NodeGroup
    from nodescaler.events.termination_policy import parse_termination_request
    from nodescaler.service.termination_policy import TerminationChooser
    from nodescaler.wiring import SystemClock

    from nodescaler_bench.kubernetes import StaticGroups

    api = k8s.ApiClient(k8s.Configuration(host=url))

    class Connection:
        def api(self) -> Any:
            return api

        def renew(self) -> None:
            pass

    group = NodeGroup("asg-web", NODES, 0, 2000, NODES, eks_nodegroup=GROUP)
    request = parse_termination_request(
        {
            "AutoScalingGroupName": "asg-web",
            "CapacityToTerminate": [
                {
                    "AvailabilityZone": "eu-west-1a",
                    "Capacity": WANTED,
                    "InstanceMarketOption": "on-demand",
                }
            ],
            "Instances": [
                {
                    "AvailabilityZone": "eu-west-1a",
                    "InstanceId": f"i-{n:017x}",
                    "InstanceType": "m5.4xlarge",
                }
                for n in range(NODES)
            ],
            "Cause": "SCALE_IN",
        }
    )
    chooser = TerminationChooser(
        StaticGroups([group]), KubernetesCluster(Connection()), SystemClock(), drain_hooks=Drained()
    )
    started = time.perf_counter()
    choice = chooser.choose(request)
    elapsed = time.perf_counter() - started
    return {
        "seconds": elapsed,
        "reference_seconds": reference.seconds(),  # in the same interpreter, just after
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "chosen": len(choice.instance_ids),
        "reason": choice.reason,
    }


def _measure(url: str) -> dict[str, Any]:
    return in_fresh_interpreter("nodescaler_bench.scale_in", url)


def run() -> dict[str, float]:
    with api_server(fill) as url:
        _measure(url)  # renders and caches every page
        measured = _measure(url)
    if measured["chosen"] != WANTED:
        raise AssertionError(f"the chooser should let {WANTED} nodes go: {measured}")
    return {
        "scale_in_choice_s": round(measured["seconds"], 3),
        "scale_in_reference_s": round(measured["reference_seconds"], 4),
        "scale_in_choice_peak_mb": round(measured["peak_mb"], 1),
    }


if __name__ == "__main__":
    print(json.dumps(_compute(sys.argv[1])))

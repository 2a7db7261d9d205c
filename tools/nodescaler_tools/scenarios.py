"""Scenarios run in the sandbox: workloads over virtual time, the real handlers deciding.

Each writes a timeline (printed, and `timeline.txt`), `summary.json` and `logs.jsonl`
(the functions' log lines and EMF records) under `out/demo/<scenario>/`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from nodescaler_tools.provision import asg_tags, fill_queue
from nodescaler_tools.sandbox import REGION, START, Sandbox, sandbox

OUT = Path("out/demo")


def _asg(
    running: Sandbox,
    name: str,
    policy: str,
    *,
    max_size: int,
    min_size: int = 0,
    launch_template: str | None = None,
) -> None:
    """An opted-in group launching g5.xlarge from its own launch configuration, or from
    `launch_template`."""
    autoscaling = running.client("autoscaling")
    launch: dict[str, Any] = {"LaunchConfigurationName": f"{name}-lc"}
    if launch_template:
        launch = {"LaunchTemplate": {"LaunchTemplateName": launch_template, "Version": "$Latest"}}
    else:
        autoscaling.create_launch_configuration(
            LaunchConfigurationName=f"{name}-lc", ImageId="ami-12c6146b", InstanceType="g5.xlarge"
        )
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        **launch,
        MinSize=min_size,
        MaxSize=max_size,
        DesiredCapacity=min_size,
        AvailabilityZones=["eu-west-1a"],
        Tags=asg_tags(name, {"nodescaler/enabled": "true", "nodescaler/policy": policy}),
    )


def _write_outputs(
    out: Path, summary: dict[str, Any], rows: list[dict[str, Any]], write: Callable[[str], None]
) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "timeline.json").write_text(json.dumps(rows) + "\n")
    write(f"summary: {json.dumps(summary)}")


def _enqueue(running: Sandbox, queue: str, count: int) -> str:
    """`count` tasks in a new queue, before the clock starts (moto's server runs in this
    process, so `fill_queue` can skip its slow per-message path)."""
    sqs = running.client("sqs")
    url: str = sqs.create_queue(QueueName=queue)["QueueUrl"]
    fill_queue(sqs, queue, count, region=REGION, body="train")
    return url


def _consume(queue: str, tasks: int) -> int:
    """Workers finish `tasks` messages. They are the simulated workload, not the product, so
    they take them straight from moto's store: through its server, each receive rescans
    the queue, and 600 nodes' worth of receives made the demo take minutes."""
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    store = sqs_backends[DEFAULT_ACCOUNT_ID][REGION].get_queue(queue)
    done = min(tasks, len(store._messages))
    del store._messages[:done]
    return done


def _waiting(running: Sandbox, url: str) -> int:
    attributes = running.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def _desired(running: Sandbox, group: str) -> int:
    described = running.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[group]
    )
    return int(described["AutoScalingGroups"][0]["DesiredCapacity"])


def queue_burst(
    policies: Path, tasks: int = 2400, minutes: int = 45, write: Callable[[str], None] = print
) -> dict[str, Any]:
    """The reference design's example: GPU training tasks, 4 per node; a node boots in 3
    minutes, then finishes a task every 2.5 minutes; when the queue is empty the group
    waits out its 10-minute scale-down window and returns to zero."""
    out = OUT / "queue-burst"
    group = "gpu-training-ng"
    with sandbox(policies, out, boot=timedelta(minutes=3)) as running:
        _asg(running, group, "gpu-training", max_size=600)
        url = _enqueue(running, "ml-training-queue", tasks)
        write(f"\n== queue-burst: {tasks} tasks, policy gpu-training, through the real handlers")
        write("t | queue | ready nodes | desired | why")
        rows: list[dict[str, Any]] = []
        backlog = 0.0
        with (out / "logs.jsonl").open("w") as log:
            for minute in range(minutes + 1):
                ready = running.cluster.ready_nodes(group)
                backlog += ready * 0.4  # tasks finished this minute
                if (whole := math.floor(backlog)) > 0:
                    backlog -= _consume("ml-training-queue", whole)
                running.tick(log)
                decision = running.state.load(group).last_decision
                row = {
                    "minute": minute,
                    "queue": _waiting(running, url),
                    "ready": running.cluster.ready_nodes(group),
                    "desired": _desired(running, group),
                    "why": decision.reason.split(" | ")[-1] if decision else "",
                }
                previous = rows[-1] if rows else {}
                changed = (row["desired"], row["ready"]) != (
                    previous.get("desired"),
                    previous.get("ready"),
                )
                if changed or minute % 10 == 0:
                    cells = [f"+{minute:02d}m", row["queue"], row["ready"], row["desired"]]
                    write(" | ".join(map(str, [*cells, row["why"]])))
                rows.append(row)
                running.advance()
        summary = {
            "scenario": "queue-burst",
            "start": START.isoformat(),
            "node_hours": round(sum(r["ready"] for r in rows) / 60, 2),
            "peak_desired": max(r["desired"] for r in rows),
            "minutes_to_empty_queue": next((r["minute"] for r in rows if r["queue"] == 0), None),
            "aws_write_calls": running.writes,
            "final_desired": rows[-1]["desired"],
        }
    _write_outputs(out, summary, rows, write)
    return summary


BATCH_POLICY = """\
apiVersion: nodescaler.io/v1alpha1
kind: NodeGroupPolicy
metadata: {name: batch}
spec:
  minReplicas: 0
  maxReplicas: 20
  metrics:
    - type: PendingPods
"""
PREFER_SPOT = '[{"name": "priority", "priorities": {"10": ["spot-.*"], "1": [".*"]}}]'


def launch_failure(minutes: int = 30, write: Callable[[str], None] = print) -> dict[str, Any]:
    """Airbnb's case: the preferred (Spot) group has no capacity. Its launch fails, the
    group is backed off, and the next group by priority takes the pods in the same minute,
    not after a 15-minute provision timeout. New work at +8m finds the backoff over: Spot
    is tried again, fails again, and is backed off for twice as long."""
    out = OUT / "launch-failure"
    policies = out / "policies"
    policies.mkdir(parents=True, exist_ok=True)
    (policies / "batch.yaml").write_text(BATCH_POLICY)
    groups = ("spot-ng", "on-demand-ng")
    arrivals = {0: 6, 8: 4}  # minute → new 1-CPU pods
    with sandbox(
        policies, out, boot=timedelta(minutes=2), environment={"EXPANDERS": PREFER_SPOT}
    ) as running:
        running.cluster.allocatable = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        ec2 = running.client("ec2")
        ec2.create_launch_template(
            LaunchTemplateName="general",
            LaunchTemplateData={"InstanceType": "m5.xlarge", "ImageId": "ami-12c6146b"},
        )
        for group in groups:
            _asg(running, group, "batch", max_size=20, launch_template="general")
        running.no_capacity.add("spot-ng")
        write("\n== launch-failure: Spot preferred but out of capacity; on-demand next")
        write("t | pending pods | spot-ng | on-demand-ng | why (spot-ng)")
        rows: list[dict[str, Any]] = []
        created = 0
        with (out / "logs.jsonl").open("w") as log:
            for minute in range(minutes + 1):
                for _ in range(arrivals.get(minute, 0)):
                    running.cluster.store.put("pods", _pending_pod(f"job-{created}", "1"))
                    created += 1
                running.tick(log)
                pending = running.cluster.schedule()  # pods on the nodes that just came up
                spot = running.state.load("spot-ng")
                row: dict[str, Any] = {
                    "minute": minute,
                    "pending": pending,
                    "desired": {g: _desired(running, g) for g in groups},
                    "ready": {g: running.cluster.ready_nodes(g) for g in groups},
                    "backed_off": bool(spot.backoff and spot.backoff.active(running.clock.now())),
                    "why": spot.last_decision.reason if spot.last_decision else "",
                }
                previous = rows[-1] if rows else {}
                if (row["desired"], row["pending"], row["backed_off"]) != (
                    previous.get("desired"),
                    previous.get("pending"),
                    previous.get("backed_off"),
                ):
                    write(
                        f"+{minute:02d}m | {row['pending']} | {row['desired']['spot-ng']} | "
                        f"{row['desired']['on-demand-ng']} | {row['why']}"
                    )
                rows.append(row)
                running.advance()
        failures = [(at - START).total_seconds() / 60 for at, _ in running.launch_failures]
        summary = {
            "scenario": "launch-failure",
            "start": START.isoformat(),
            "launch_failures_at_minute": failures,
            "backoff_seconds": [
                b.seconds for b in [running.state.load("spot-ng").backoff] if b is not None
            ],
            "pending_pod_minutes": sum(r["pending"] for r in rows),
            "node_hours": round(sum(sum(r["ready"].values()) for r in rows) / 60, 2),
            "aws_write_calls": running.writes,
            "final_desired": rows[-1]["desired"],
        }
    _write_outputs(out, summary, rows, write)
    return summary


def _pending_pod(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }

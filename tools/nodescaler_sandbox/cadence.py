"""When things happen in the sandbox's world: the step, and each actor's own cadence.

The world moves in steps of the scenario's `stepSeconds` (10 s by default): at each step
pods and tasks arrive, nodes follow their instances, the scheduler binds, the pods are
counted. Each actor keeps its real cadence whatever the step, and comes in the step that
holds its time (`Cadence.due`):
- nodescaler's tick: the EventBridge Scheduler rate of the deployed stack (the scenario's
  `tickMinutes`, the stack's `tickMinutes`);
- Cluster Autoscaler's scan: every 10 s (`baseline.SCAN`, its --scan-interval);
- SQS's metrics: published to CloudWatch once a minute, on the minute ("pushed to
  CloudWatch at one-minute intervals",
  https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html);
  a policy or an alarm reading between two sees the datapoint of the last minute;
- Prometheus' scrape: once a minute (its default scrape_interval);
- alarms: on their own period (`Sandbox.evaluate_alarms`).
Times are whole seconds from the scenario's start.
"""

from __future__ import annotations

from dataclasses import dataclass

MINUTE = 60


@dataclass(frozen=True)
class Cadence:
    """Something that happens every `every` seconds from the start (the first at 0)."""

    every: int

    def due(self, at: int, step: int) -> bool:
        """Whether it happens in the step of `step` seconds ending at `at`: one of its times
        falls in (at - step, at]. At the first step (0) it always does."""
        return at // self.every != (at - step) // self.every


EVERY_MINUTE = Cadence(MINUTE)  # SQS's metrics, Prometheus' scrape


def steps(minutes: int, step: int) -> range:
    """The steps of a run of `minutes`: their times, 0 to the end, `step` seconds apart."""
    return range(0, minutes * MINUTE + 1, step)

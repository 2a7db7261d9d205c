"""The sandbox's world in seconds: the step, and each actor on its own cadence whatever
the step (Cluster Autoscaler's scan, nodescaler's tick, SQS's metrics), and the pods and
tasks of a minute arriving within it, on hand-made timelines."""

from __future__ import annotations

from nodescaler_sandbox.baseline import SCAN
from nodescaler_sandbox.cadence import EVERY_MINUTE, Cadence, steps
from nodescaler_sandbox.world import within_the_minute


def times(cadence: Cadence, minutes: int, step: int) -> list[int]:
    """When (seconds from the start) the steps come at which `cadence` is due."""
    return [at for at in steps(minutes, step) if cadence.due(at, step)]


def test_the_world_steps_from_the_start_to_the_end_in_steps_of_its_step() -> None:
    assert list(steps(1, 10)) == [0, 10, 20, 30, 40, 50, 60]
    assert list(steps(2, 60)) == [0, 60, 120]


def test_cluster_autoscaler_scans_every_ten_seconds_whatever_the_worlds_step() -> None:
    # The FAQ: "It checks for any unschedulable pods every 10 seconds (configurable by
    # --scan-interval flag)" (shared/reference/cluster-autoscaler-faq.txt, "How does
    # scale-up work?")
    scan = Cadence(int(SCAN.total_seconds()))
    # Given a world of 10-second steps: a scan at every one of them
    assert times(scan, 1, 10) == [0, 10, 20, 30, 40, 50, 60]
    # a world of 5-second steps: every other step, still every 10 s
    assert times(scan, 1, 5) == [0, 10, 20, 30, 40, 50, 60]
    # a world of minutes: each step holds its six scans, one call stands for them
    assert times(scan, 2, 60) == [0, 60, 120]


def test_sqs_publishes_its_metrics_once_a_minute_not_at_every_step() -> None:
    # "pushed to CloudWatch at one-minute intervals":
    # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html
    assert times(EVERY_MINUTE, 3, 10) == [0, 60, 120, 180]


def test_nodescalers_tick_comes_at_the_stacks_rate_not_at_every_step() -> None:
    # Given the stack's schedule, rate(5 minutes), on a world of 10-second steps
    tick = Cadence(5 * 60)
    # Then the tick comes every 5 minutes from the start, never between
    assert times(tick, 16, 10) == [0, 300, 600, 900]
    assert times(Cadence(60), 2, 10) == [0, 60, 120]  # rate(1 minute)


def test_a_minutes_arrivals_spread_over_its_steps_the_same_in_every_run() -> None:
    # Given 60 pods due in one minute of six 10-second steps
    drawn = within_the_minute("web@12", 60, 6)
    # Then each comes at a step of the minute, most steps take some, in order
    assert len(drawn) == 60 and set(drawn) <= set(range(6))
    assert len(set(drawn)) == 6
    assert drawn == sorted(drawn)
    # the same draw in every run (a seed, not the process's hash), another for another minute
    assert within_the_minute("web@12", 60, 6) == drawn
    assert within_the_minute("web@13", 60, 6) != drawn
    # and with minute steps, all at the minute, as the world of minutes had them
    assert within_the_minute("web@12", 60, 1) == [0] * 60

"""A forecast with warmPool end to end over moto: the evaluate function keeps the
growth it forecasts over the next warm-up window warm with PutWarmPool, writes it once,
and names a group that has no warm pool."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from nodescaler.domain.ahead.forecast import DemandHistory
from nodescaler.domain.scaling.group_state import GroupState

from tests.aws import CallCounter, client, desired_capacity, make_asg
from tests.e2e.conftest import Deployment
from tests.e2e.test_handlers import OPTED_IN, TRAINING_QUEUE, training_tasks

WARM = OPTED_IN | {"nodescaler/policy": "warm-training"}


def working_hours(at: datetime) -> int:
    """10 nodes from 09:00 to 17:00 UTC, 2 otherwise, every day."""
    return 10 if 9 <= at.hour < 17 else 2


def learnt_a_day(deployment: Deployment, group: str) -> None:
    """At 08:40, the group's state as a day of evaluations would have left it."""
    deployment.clock.at = deployment.clock.at.replace(hour=8, minute=40)
    now, history = deployment.clock.now(), DemandHistory()
    at = now - timedelta(days=1)
    while at < now:
        history = history.record(at, working_hours(at))
        at += timedelta(minutes=5)
    deployment.evaluator.state.save(GroupState(group=group, demand=history))


def write_policy(policies: Path) -> None:
    document = {
        "apiVersion": "nodescaler.io/v1alpha1",
        "kind": "NodeGroupPolicy",
        "metadata": {"name": "warm-training"},
        "spec": {
            "minReplicas": 0,
            "maxReplicas": 40,
            "metrics": [
                {
                    "type": "SQSQueue",
                    "sqsQueue": {"queue": TRAINING_QUEUE},
                    "target": {"type": "AverageValue", "averageValue": 4},
                },
                {
                    "type": "Predictive",
                    "predictive": {"mode": "ForecastAndScale", "warmPool": True},
                },
            ],
        },
    }
    (policies / "warm-training.yaml").write_text(yaml.safe_dump(document))


def a_trainers_group(
    policies: Path, deployment: Deployment, tags: dict[str, str] = WARM, **pool: Any
) -> None:
    """The warm-training policy deployed; a group with the operator's warm pool (`pool`,
    none when empty) and a day of its demand learnt; a queue asking for 2 nodes at 08:40,
    where yesterday 08:45 needed 2 and 09:00 10."""
    write_policy(policies)
    deployment.deploy()
    make_asg("trainers", tags=tags, max_size=40)
    if pool:
        client("autoscaling").put_warm_pool(AutoScalingGroupName="trainers", **pool)
    learnt_a_day(deployment, "trainers")
    training_tasks(8)


def warm_pool(group: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = (
        client("autoscaling")
        .describe_warm_pool(AutoScalingGroupName=group)
        .get("WarmPoolConfiguration")
    )
    return found


def test_the_forecast_growth_is_kept_warm_and_the_size_follows_the_live_metrics(
    policies: Path, deployment: Deployment, calls: CallCounter
) -> None:
    # Given the group with a hibernated warm pool of the operator's
    a_trainers_group(
        policies,
        deployment,
        MinSize=1,
        PoolState="Hibernated",
        InstanceReusePolicy={"ReuseOnScaleIn": True},
    )
    writes: list[str] = []
    deployment.clients.autoscaling.meta.events.register(
        "before-call.auto-scaling.*",
        lambda model, **_: (
            writes.append(model.name) if not model.name.startswith("Describe") else None
        ),
    )

    # When it is evaluated, twice
    deployment.tick()
    deployment.clock.advance(minutes=1)
    deployment.tick()

    # Then the group has what the queue and the forecast for 08:45 ask, and the 8 more the
    # forecast expects within the warm-up window are warm, in the pool's own state, set once
    assert desired_capacity("trainers") == 2
    assert warm_pool("trainers") == {
        "MinSize": 8,
        "MaxGroupPreparedCapacity": 8,
        "PoolState": "Hibernated",
        "InstanceReusePolicy": {"ReuseOnScaleIn": True},
    }
    # after the resize: a pool shrunk first would give up what the scale-up takes
    assert writes == ["SetDesiredCapacity", "PutWarmPool"]
    assert calls.calls["PutWarmPool"] == 1
    decision = deployment.evaluator.state.load("trainers").last_decision
    assert decision is not None
    assert (decision.warm_pool, decision.warm_pool_note) == (
        8,
        "warm pool 8: forecast up to 10 in the next warm-up − 2 desired",
    )


def test_a_group_without_a_warm_pool_is_told_and_still_scaled(
    policies: Path, deployment: Deployment, calls: CallCounter
) -> None:
    a_trainers_group(policies, deployment)

    deployment.tick()

    assert desired_capacity("trainers") == 2
    assert calls.calls["PutWarmPool"] == 0
    assert warm_pool("trainers") is None  # nodescaler never creates one
    decision = deployment.evaluator.state.load("trainers").last_decision
    assert decision is not None and decision.warm_pool is None
    assert "the group has no warm pool to size: create one" in decision.reason


def test_a_refused_warm_pool_write_is_the_groups_problem_and_the_resize_still_happens(
    policies: Path, deployment: Deployment
) -> None:
    a_trainers_group(policies, deployment, MinSize=0)

    class RefusingWarmPools:
        def __init__(self, groups: Any) -> None:
            self._groups = groups

        def size_warm_pool(self, *_: Any) -> None:
            raise RuntimeError("AccessDenied: autoscaling:PutWarmPool")

        def __getattr__(self, name: str) -> Any:
            return getattr(self._groups, name)

    deployment.evaluator = replace(
        deployment.evaluator, node_groups=RefusingWarmPools(deployment.evaluator.node_groups)
    )
    result = deployment.evaluator.evaluate("trainers", "tick-1")

    assert (result.outcome, desired_capacity("trainers")) == ("acted", 2)
    assert result.problems == (
        "warm pool: sizing it to 8 failed: AccessDenied: autoscaling:PutWarmPool",
    )
    assert deployment.evaluator.state.load("trainers").problems == result.problems


def test_a_group_in_dry_run_has_its_pool_decided_but_not_written(
    policies: Path, deployment: Deployment, calls: CallCounter
) -> None:
    a_trainers_group(policies, deployment, WARM | {"nodescaler/dry-run": "true"}, MinSize=0)

    deployment.tick()

    assert calls.calls["PutWarmPool"] == 0  # the functions made none
    assert warm_pool("trainers") == {"MinSize": 0, "PoolState": "Stopped"}
    decision = deployment.evaluator.state.load("trainers").last_decision
    assert decision is not None and decision.warm_pool == 8

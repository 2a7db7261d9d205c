"""When a side's scale request takes effect, as its latencies are charged (`latency`): the
path that brought it (CA's scan, nodescaler's tick or fast path) and the first second it
answers a pod waiting."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import TypeAdapter, ValidationError

from nodescaler_sandbox import (
    latency,
)
from nodescaler_sandbox.baseline import (
    Flags,
)
from nodescaler_sandbox.cadence import MINUTE
from nodescaler_sandbox.controllers import NODESCALER
from nodescaler_sandbox.sandbox import FAST_PATH
from nodescaler_sandbox.scenario_file import Scenario
from nodescaler_sandbox.world import World

if TYPE_CHECKING:
    pass


def request_path(controller: str, cause: str | None) -> str:
    """What brought a scale request, for its latencies (`latency`): a CA loop; the fast
    path's look; nodescaler's tick; else an event (an alarm's, a launch failure's), from
    the `cause` of the evaluation that made it."""
    if controller != NODESCALER:
        return latency.SCAN
    if (cause or "").startswith(latency.FAST_PATH):
        return latency.FAST_PATH
    return latency.TICK if cause == latency.TICK else latency.EVENT


def takes_effect(
    world: World, controller: str, charge: latency.Charged
) -> Callable[[str, str | None], datetime]:
    """When a scale request the side makes now takes effect, for the world to start its
    instances then (`cluster.SimulatedCluster.request`): the first second it answers one
    of the pods waiting that the group could take, as their reactions are charged
    (`latency`); with none (a queue, a schedule, a forecast), a look in this step."""

    def second(group: str, cause: str | None) -> datetime:
        path, at = request_path(controller, cause), world.at
        watched = charge.watched(group, at)  # once a request, not once a pod
        seconds = [
            charge.effective(charge.arrival(seen, name), at, path, gpu=gpu, pod=watched)
            for name, seen, gpu in world.waiting_for(group)
        ]
        first = min(seconds, default=charge.effective(at - charge.step + 1, at, path, gpu=False))
        # the first step's demand arrived "before" it, but nothing runs before the start:
        # its requests launch with the groups' first instances, at 0
        return world.start + timedelta(seconds=max(first, 0.0))

    return second


def charge(
    controller: str,
    scenario: Scenario,
    settings: dict[str, Any],
    failed_looks: Callable[[], Sequence[float]] = tuple,
) -> latency.Charged:
    """The side's latencies (`latency`), at their defaults: the same for every scenario
    but the stack's tick and fast-path rates; CA's loops frequent as its flags say (`settings`: CA
    tuned's; the untuned run's are 1.37's defaults, `Flags`). `failed_looks`: the seconds
    the fast path's looks failed so far, its invocation down until the next minute's."""
    step = scenario.step_seconds
    if controller == NODESCALER:
        poll = _fast_path_poll(scenario.environment.get("FAST_PATH_INTERVAL_SECONDS"))
        on = scenario.environment.get(FAST_PATH) != "false" and poll is not None
        poll = latency.POLL_S if poll is None else poll
        side = latency.Nodescaler(poll=poll, tick=scenario.tick_minutes * MINUTE, fast_path=on)
        watching = _pending_pods_groups(scenario)

        def watched(group: str, at: float) -> bool:
            down = any(at - MINUTE < failed <= at for failed in failed_looks())
            return group in watching and not down

        return latency.Charged(side, step, watched)
    flags = settings.get("flags") or {}
    frequent = bool(flags.get("--frequent-loops-enabled", Flags().frequent_loops_enabled))
    return latency.Charged(latency.ClusterAutoscaler(frequent_loops=frequent), step)


def _pending_pods_groups(scenario: Scenario) -> frozenset[str]:
    """The groups whose policy takes pending pods: those the fast path watches."""
    from nodescaler.adapters.deployed_policies import load_policies

    policies = load_policies(scenario.policies_path)
    return frozenset(
        g.name
        for g in scenario.groups
        if (policy := policies.get(g.policy)) is not None and policy.takes_pending_pods
    )


def _fast_path_poll(written: str | None) -> float | None:
    """The seconds between the fast path's looks, as it reads its setting; None for one it
    refuses (not a number, or out of its range): each invocation then fails at its start,
    and the tick alone answers (as cdk.json fastPath off)."""
    from nodescaler.config import FastPathSettings

    field = FastPathSettings.model_fields["interval_seconds"]
    try:
        return TypeAdapter(Annotated[float, *field.metadata]).validate_python(
            latency.POLL_S if written is None else written
        )
    except ValidationError:
        return None

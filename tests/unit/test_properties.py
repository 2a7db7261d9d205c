"""Properties of the autoscaling function over generated policies, readings and histories."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from nodescaler.domain.policy import MetricBase, NodeGroupPolicy
from nodescaler.domain.scale_up.backoff import Backoff, BackoffRules, after_failure
from nodescaler.domain.scaling.autoscaler import Evaluation, decide
from nodescaler.domain.scaling.fallback import FailureRun, MetricFailures
from nodescaler.domain.scaling.group_size import GroupSize
from nodescaler.domain.scaling.history import History, ScaleEvent, TimedRecommendation
from nodescaler.domain.scaling.limits import Ceiling
from nodescaler.domain.scaling.readings import MetricReading, MetricUnavailable, Reading

from tests.builders import T0

METRIC_NAMES = ("a", "b", "c")
RULES = BackoffRules()

scaling_policy = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["Replicas", "Percent"]),
        "value": st.integers(1, 500),
        "periodSeconds": st.integers(1, 1800),
    }
)
rules = st.fixed_dictionaries(
    {},
    optional={
        "stabilizationWindowSeconds": st.just(0) | st.integers(0, 3600),
        "selectPolicy": st.sampled_from(["Max", "Min", "Disabled"]),
        "policies": st.lists(scaling_policy, min_size=1, max_size=3),
        "tolerance": st.floats(0, 0.9),
    },
)
target = st.one_of(
    st.builds(lambda v: {"type": "Value", "value": v}, st.floats(0.01, 1e6)),
    st.builds(lambda v: {"type": "AverageValue", "averageValue": v}, st.floats(0.01, 1e6)),
    st.builds(lambda v: {"type": "Utilization", "averageUtilization": v}, st.floats(1, 100)),
)


fallbacks = st.none() | st.one_of(
    st.builds(lambda r: {"replicas": r}, st.integers(0, 2000)),
    st.builds(lambda a: {"action": a}, st.sampled_from(["hold", "currentReplicas"])),
    st.builds(lambda r: {"action": "ifHigher", "replicas": r}, st.integers(0, 2000)),
).flatmap(lambda f: st.builds(lambda n: f | {"failureThreshold": n}, st.integers(0, 4)))


@st.composite
def policies(
    draw: st.DrawFn, *, with_fallbacks: bool = False, with_pending: bool = False
) -> NodeGroupPolicy:
    low = draw(st.integers(0, 50))
    high = draw(st.integers(max(low, 1), 1000))
    count = draw(st.integers(1, len(METRIC_NAMES)))
    metrics = [
        {
            "type": "CloudWatch",
            "name": name,
            "cloudWatch": {"metric": {"namespace": "App", "metricName": name}},
            "target": draw(target),
            "staleAfterSeconds": draw(st.integers(60, 900)),  # at least the default period
        }
        for name in METRIC_NAMES[:count]
    ]
    for metric in metrics if with_fallbacks else ():
        if (fallback := draw(fallbacks)) is not None:
            metric["fallback"] = fallback
    behavior = {"scaleUp": draw(rules), "scaleDown": draw(rules)}
    if with_pending:
        metrics.append({"type": "PendingPods"})
    return NodeGroupPolicy.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {
                "minReplicas": low,
                "maxReplicas": high,
                "metrics": metrics,
                "behavior": behavior,
            },
        }
    )


any_value = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(0, 1e5),
    st.integers(0, 10**12).map(float),
)
reading = st.one_of(
    st.builds(
        lambda v, age: MetricReading(value=v, at=T0 - timedelta(seconds=age)),
        any_value,
        st.integers(-900, 900),  # negative: dated in the future
    ),
    st.builds(MetricUnavailable, reason=st.text(max_size=20)),
)
readings = st.dictionaries(st.sampled_from(METRIC_NAMES), reading)
histories = st.builds(
    lambda recs, events: History(
        recommendations=tuple(
            TimedRecommendation(at=T0 - timedelta(seconds=s), replicas=r) for s, r in recs
        ),
        scale_events=tuple(ScaleEvent(at=T0 - timedelta(seconds=s), change=c) for s, c in events),
    ),
    st.lists(st.tuples(st.integers(1, 4000), st.integers(0, 2000)), max_size=8),
    st.lists(st.tuples(st.integers(1, 2000), st.integers(-500, 500).filter(bool)), max_size=8),
)
small_or_any = st.integers(0, 10) | st.integers(0, 2000)  # small groups show more edge cases
sizes = st.builds(
    lambda current, lo, extra, launched, protected: GroupSize(
        current=current,
        min_size=lo,
        max_size=lo + extra,
        launched=min(launched, current),
        protected=min(protected, launched, current),
    ),
    small_or_any,
    st.integers(0, 20),
    small_or_any,
    small_or_any,
    st.just(0) | small_or_any,
)
backoffs = st.none() | st.builds(
    lambda minutes: after_failure(None, T0 - timedelta(minutes=minutes), "no capacity", RULES),
    st.integers(0, 10),
)
ceilings = st.none() | st.builds(lambda n: Ceiling(n, "limit"), st.integers(0, 3000))


def _decide(
    policy: NodeGroupPolicy,
    size: GroupSize,
    values: dict[str, Reading],
    history: History,
    **also: Any,  # backoff, ceiling, failures
) -> Evaluation:
    return decide(
        node_group="ng", policy=policy, size=size, readings=values, history=history, now=T0, **also
    )


def one_metric(*, max_replicas: int = 10, **fields: Any) -> NodeGroupPolicy:
    """One CloudWatch metric `a`, stale after 60 s, scaling down at once (and `fields`)."""
    return NodeGroupPolicy.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {
                "minReplicas": 0,
                "maxReplicas": max_replicas,
                "metrics": [
                    {
                        "type": "CloudWatch",
                        "name": "a",
                        "cloudWatch": {"metric": {"namespace": "App", "metricName": "a"}},
                        "target": {"type": "Value", "value": 1},
                        "staleAfterSeconds": 60,
                    }
                    | fields
                ],
                "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
            },
        }
    )


ONE_METRIC = one_metric()


def documented_bounds(policy: NodeGroupPolicy, size: GroupSize) -> tuple[int, int]:
    """docs/policies.md's rule (*How a decision is made*), worked out here rather than asked of
    the code under test, which would vouch for its own bug: the policy's minReplicas and
    maxReplicas, each moved inside the group's own MinSize..MaxSize, which always win."""

    def inside_the_group(n: int) -> int:
        return sorted((size.min_size, n, size.max_size))[1]

    spec = policy.spec
    return inside_the_group(spec.min_replicas), inside_the_group(spec.max_replicas)


@settings(max_examples=400, deadline=None)
@given(policies(), sizes, readings, histories, backoffs, ceilings)
# A metric asking for more than the policy's maxReplicas in a group that allows more: the
# policy's maximum holds it.
@example(
    one_metric(max_replicas=3),
    GroupSize(2, 0, 10),
    {"a": MetricReading(value=8, at=T0)},
    History(),
    None,
    None,
)
def test_the_result_is_never_outside_min_max(
    policy: NodeGroupPolicy,
    size: GroupSize,
    values: dict[str, Reading],
    history: History,
    backoff: Backoff | None,
    ceiling: Ceiling | None,
) -> None:
    """Whatever holds it back too: a backoff, protected instances, the cluster's limits."""
    decision = _decide(policy, size, values, history, backoff=backoff, ceiling=ceiling).decision
    lowest, highest = documented_bounds(policy, size)
    assert lowest <= decision.desired <= highest
    assert size.min_size <= decision.desired <= size.max_size


def unusable(metric: MetricBase, reading: Reading | None) -> bool:
    """Judged from the inputs alone, not from what the decision says of them: missing,
    not a finite non-negative number, older than the metric allows, or dated more than a
    minute ahead of the clock."""
    if not isinstance(reading, MetricReading):
        return True
    age = (T0 - reading.at).total_seconds()
    return (
        not math.isfinite(reading.value)
        or reading.value < 0
        or age > metric.stale_after_seconds
        or age < -60
    )


@settings(max_examples=600, deadline=None)
@given(policies(), sizes, readings, histories)
# The cases a search may take long to find, always tried: a reading 61 s old for a metric
# stale after 60 s, and one dated two minutes ahead, each asking to scale 4 → 0.
@example(
    ONE_METRIC,
    GroupSize(4, 0, 10),
    {"a": MetricReading(value=0, at=T0 - timedelta(seconds=61))},
    History(),
)
@example(
    ONE_METRIC,
    GroupSize(4, 0, 10),
    {"a": MetricReading(value=0, at=T0 + timedelta(seconds=120))},
    History(),
)
def test_a_missing_stale_or_invalid_metric_never_causes_a_scale_in(
    policy: NodeGroupPolicy, size: GroupSize, values: dict[str, Reading], history: History
) -> None:
    evaluation = _decide(policy, size, values, history)
    lowest, highest = documented_bounds(policy, size)
    if (
        any(unusable(m, values.get(m.key)) for m in policy.spec.metrics)
        and lowest <= size.current <= highest
    ):
        assert evaluation.decision.desired >= size.current


@settings(max_examples=400, deadline=None)
@given(
    policies(with_pending=True),
    sizes,
    readings,
    histories,
    st.integers(0, 60),
    st.integers(0, 9),
    st.integers(1, 4000),
)
def test_a_missing_metric_sheds_no_more_than_the_nodes_empty_of_pods(
    policy: NodeGroupPolicy,
    size: GroupSize,
    values: dict[str, Reading],
    history: History,
    empty: int,
    movable: int,
    unneeded_for: int,
) -> None:
    """Given pending pods that find `empty` nodes empty of pods and `movable` more whose
    pods could move, each unneeded for `unneeded_for` seconds (read a second ago too), a
    metric that cannot be read lets the group shed the empty ones at most."""
    names = tuple(f"n{i}" for i in range(empty + movable))
    spare = MetricReading(
        value=0, at=T0, unneeded_nodes=empty + movable, empty_nodes=empty, candidates=names
    )
    since = T0 - timedelta(seconds=unneeded_for)
    history = history.with_unneeded(since, names, trusted_seconds=unneeded_for)
    history = history.with_unneeded(T0 - timedelta(seconds=1), names, unneeded_for)
    evaluation = _decide(policy, size, values | {"pending-pods": spare}, history)
    lowest, highest = documented_bounds(policy, size)
    metrics = [m for m in policy.spec.metrics if m.key != "pending-pods"]
    if any(unusable(m, values.get(m.key)) for m in metrics) and lowest <= size.current <= highest:
        assert evaluation.decision.desired >= size.current - empty
    assert lowest <= evaluation.decision.desired <= highest  # and never outside its bounds


@settings(max_examples=200, deadline=None)
@given(policies(), sizes, readings, histories)
def test_the_same_inputs_give_the_same_decision(
    policy: NodeGroupPolicy, size: GroupSize, values: dict[str, Reading], history: History
) -> None:
    assert _decide(policy, size, values, history) == _decide(policy, size, values, history)


@settings(max_examples=200, deadline=None)
@given(policies(), sizes, readings, histories)
def test_every_decision_explains_itself(
    policy: NodeGroupPolicy, size: GroupSize, values: dict[str, Reading], history: History
) -> None:
    decision = _decide(policy, size, values, history).decision
    verb = (
        "scale up"
        if decision.desired > decision.current
        else "scale down"
        if decision.desired < decision.current
        else "hold at"
    )
    assert decision.reason.startswith(verb)
    assert len(decision.metrics) == len(policy.spec.metrics)


failure_runs = st.builds(
    lambda counts: MetricFailures(
        runs={
            name: FailureRun(count=n, since=T0 - timedelta(minutes=n)) for name, n in counts.items()
        }
    ),
    st.dictionaries(st.sampled_from(METRIC_NAMES), st.integers(1, 5)),
)


@settings(max_examples=400, deadline=None)
@given(policies(with_fallbacks=True), sizes, readings, histories, failure_runs)
# One failure short of its threshold: the fallback to 0 must not apply yet.
@example(
    one_metric(fallback={"failureThreshold": 3, "replicas": 0}),
    GroupSize(4, 0, 10),
    {},
    History(),
    MetricFailures(runs={"a": FailureRun(count=1, since=T0)}),
)
def test_with_fallbacks_the_result_is_never_outside_min_max_nor_scales_in_on_a_failure_without_one(
    policy: NodeGroupPolicy,
    size: GroupSize,
    values: dict[str, Reading],
    history: History,
    failures: MetricFailures,
) -> None:
    """A fallback may scale in, within the bounds; a failing metric whose fallback gives no
    vote (none, `hold`, or its run short of the threshold) still holds scale-in."""
    decision = _decide(policy, size, values, history, failures=failures).decision
    lowest, highest = documented_bounds(policy, size)
    assert lowest <= decision.desired <= highest

    def falls_back(metric: MetricBase) -> bool:
        run = failures.runs.get(metric.key)
        count = 1 + (run.count if run is not None else 0)
        fallback = metric.fallback
        return (
            fallback is not None
            and fallback.action != "hold"
            and count > fallback.failure_threshold  # KEDA: failures > failureThreshold
        )

    held = any(unusable(m, values.get(m.key)) and not falls_back(m) for m in policy.spec.metrics)
    if held and lowest <= size.current <= highest:
        assert decision.desired >= size.current

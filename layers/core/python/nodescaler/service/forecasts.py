"""The histories of the metrics forecasts name (a Predictive metric's `cloudWatch`): read
through the `MetricHistory` port at each evaluation, all of a group's in one read, and
turned into demand in the forecast's slots (`domain.ahead.forecast`).

A read that fails never fails the evaluation: each forecast from it abstains, naming why.
"""

from __future__ import annotations

from datetime import datetime

from nodescaler.domain.ahead.forecast import (
    NamedHistory,
    history_from_datapoints,
    named_history_window,
)
from nodescaler.domain.policy import NodeGroupPolicy, PredictiveMetric
from nodescaler.domain.scaling.readings import MetricUnavailable
from nodescaler.errors import NodescalerError
from nodescaler.ports import MetricHistory


def named_histories(
    policy: NodeGroupPolicy, source: MetricHistory | None, now: datetime
) -> dict[str, NamedHistory]:
    """Each Predictive metric naming a metric of its own, by key: its history, or why none."""
    named = {
        m.key: m.predictive.cloud_watch
        for m in policy.spec.metrics
        if isinstance(m, PredictiveMetric) and m.predictive.cloud_watch is not None
    }
    if not named:
        return {}
    if source is None:
        return dict.fromkeys(named, MetricUnavailable(reason="no metric history reader is set"))
    since, until = named_history_window(now)
    try:
        series = source.datapoints(list(named.values()), since, until)
    except Exception as error:  # an adapter's bug abstains too: a forecast is never a hold
        why = str(error) if isinstance(error, NodescalerError) else repr(error)
        return dict.fromkeys(named, MetricUnavailable(reason=why))
    return {
        key: history_from_datapoints(points, demand.per_node, now)
        for (key, demand), points in zip(named.items(), series, strict=True)
    }

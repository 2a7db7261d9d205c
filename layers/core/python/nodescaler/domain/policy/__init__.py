"""Policy documents: the autoscaling/v2 HPA spec, "pods" renamed to "replicas", per node group.

A policy is user-written YAML, so every model forbids unknown fields and every check
names the field it rejects. Rooms: `spec` (the models' base), `sources` (where each metric
type reads), `metrics` (targets, fallbacks, one model per type), `behavior` (rates and
scale-in windows), `document` (the whole policy), `parsing` (YAML text to a policy),
`versions` (stored versions).
"""

from __future__ import annotations

from nodescaler.domain.policy.behavior import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    DEFAULT_TOLERANCE,
    Behavior,
    Rules,
    ScaleInWindow,
    ScalingPolicy,
    ScalingPolicyType,
    ScalingRules,
    SelectPolicy,
)
from nodescaler.domain.policy.document import (
    Metadata,
    NodeGroupPolicy,
    PolicySpec,
)
from nodescaler.domain.policy.metrics import (
    KEDA_BEHAVIORS,
    METRIC_TYPES,
    PER_REPLICA_ONE,
    CapacityReservationMetric,
    CloudWatchMetric,
    Fallback,
    FallbackAction,
    MetricBase,
    MetricSpec,
    MetricTarget,
    PendingPodsMetric,
    PredictiveMetric,
    PrometheusMetric,
    ScheduleMetric,
    SqsQueueMetric,
    TargetType,
)
from nodescaler.domain.policy.sources import (
    FORECAST_PERIOD_SECONDS,
    BufferToleration,
    CapacityBuffer,
    CapacityReservationSource,
    CloudWatchMetricStat,
    CloudWatchSource,
    Consolidation,
    DemandMetric,
    ForecastMode,
    PendingPodsSource,
    PredictiveSource,
    PrometheusSource,
    ReservationResource,
    ScheduleEntry,
    ScheduleSource,
    SqsQueueSource,
)
from nodescaler.domain.policy.spec import (
    PositiveAmount,
    Spec,
)

__all__ = [
    "DEFAULT_SCALE_DOWN",
    "DEFAULT_SCALE_UP",
    "DEFAULT_TOLERANCE",
    "FORECAST_PERIOD_SECONDS",
    "KEDA_BEHAVIORS",
    "METRIC_TYPES",
    "PER_REPLICA_ONE",
    "Behavior",
    "BufferToleration",
    "CapacityBuffer",
    "CapacityReservationMetric",
    "CapacityReservationSource",
    "CloudWatchMetric",
    "CloudWatchMetricStat",
    "CloudWatchSource",
    "Consolidation",
    "DemandMetric",
    "Fallback",
    "FallbackAction",
    "ForecastMode",
    "Metadata",
    "MetricBase",
    "MetricSpec",
    "MetricTarget",
    "NodeGroupPolicy",
    "PendingPodsMetric",
    "PendingPodsSource",
    "PolicySpec",
    "PositiveAmount",
    "PredictiveMetric",
    "PredictiveSource",
    "PrometheusMetric",
    "PrometheusSource",
    "ReservationResource",
    "Rules",
    "ScaleInWindow",
    "ScalingPolicy",
    "ScalingPolicyType",
    "ScalingRules",
    "ScheduleEntry",
    "ScheduleMetric",
    "ScheduleSource",
    "SelectPolicy",
    "Spec",
    "SqsQueueMetric",
    "SqsQueueSource",
    "TargetType",
]

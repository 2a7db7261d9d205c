"""Policy documents: the autoscaling/v2 HPA spec, "pods" renamed to "replicas", per node group.

A policy is user-written YAML, so every model forbids unknown fields and every check
names the field it rejects. Rooms: `spec` (the models' base), `sources` (where each metric
type reads; the pending pods' with its buffers in `pending_pods_source`), `metrics`
(targets, fallbacks, one model per type), `behavior` (rates and scale-in windows),
`document` (the whole policy), `parsing` (YAML text to a policy), `versions` (stored
versions).
"""

from __future__ import annotations

from nodescaler.domain.cluster.snapshot import ReservationResource
from nodescaler.domain.policy.behavior_model import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    DEFAULT_TOLERANCE,
    MOST_NODES,
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
from nodescaler.domain.policy.pending_pods_source import (
    ArrivalsSizing,
    BufferToleration,
    CapacityBuffer,
    Consolidation,
    PendingPodsSource,
)
from nodescaler.domain.policy.sources import (
    FORECAST_PERIOD_SECONDS,
    CapacityReservationSource,
    CloudWatchMetricStat,
    CloudWatchSource,
    DemandMetric,
    ForecastMode,
    PredictiveSource,
    PrometheusSource,
    ReservationHeadroom,
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
    "MOST_NODES",
    "PER_REPLICA_ONE",
    "ArrivalsSizing",
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
    "ReservationHeadroom",
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

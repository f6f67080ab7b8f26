"""vigil.gate: the AdaptiveGate (candle close / agent timer / z-score anomaly / wake conditions)."""

from gate.conditions import (
    METRICS,
    MetricSpec,
    Operator,
    Rejection,
    WakeCondition,
    build_metric_registry,
    describe_metrics,
    validate_conditions,
)
from gate.gate import (
    AdaptiveGate,
    GateConfig,
    GateStats,
    GateUpdate,
    GateVerdict,
    Layer,
    LayerStats,
)
from gate.metrics import MetricBoard, MetricSource

__all__ = [
    "METRICS",
    "AdaptiveGate",
    "GateConfig",
    "GateStats",
    "GateUpdate",
    "GateVerdict",
    "Layer",
    "LayerStats",
    "MetricBoard",
    "MetricSource",
    "MetricSpec",
    "Operator",
    "Rejection",
    "WakeCondition",
    "build_metric_registry",
    "describe_metrics",
    "validate_conditions",
]

"""The report's cost section: the one cost accounting, ``agent.cost_accounting`` (also read by
``/api/status`` and ``python -m bench cost``), so the figures cannot drift apart."""

from __future__ import annotations

from agent.cost_accounting import (
    LAYER_ORDER,
    CostBook,
    CostRow,
    CostSummary,
    cost_summary,
    day_span,
    layer_of,
)

__all__ = [
    "LAYER_ORDER",
    "CostBook",
    "CostRow",
    "CostSummary",
    "cost_summary",
    "day_span",
    "layer_of",
]

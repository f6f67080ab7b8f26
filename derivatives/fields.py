"""The snapshot fields that outside sources (derivatives, sentiment, flows) fill."""

from __future__ import annotations

#: snapshot fields that outside sources fill; listed so a missing source is always named
CONTEXT_FIELDS = (
    "funding_rates",
    "open_interest",
    "taker_delta",
    "long_short_ratio",
    "liquidations",
    "basis",
    "stablecoin_supply",
    "fear_greed",
    "news_summary",
    "etf_flow",
    "paxg",
    "derivatives_signal",
)

"""The signal names deciders report in ``signal_weights`` and the learner keeps posteriors for.

One name per source the snapshot carries, so the learner can tell funding from open interest from
basis, and macro from the crypto regime (they used to merge into ``derivatives`` and ``regime``).
``SYNONYMS`` is the one table that maps the other spellings a model (or a person) uses, snapshot
field names included, to these names; ``canonical_signal`` applies it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

#: technical signals (the fallback's blend), then the snapshot's outside context, then regimes
SIGNAL_NAMES: Final[tuple[str, ...]] = (
    "rsi",
    "momentum",
    "bollinger",
    "macd",
    "volume",
    "return_zscore",
    "btc_move",
    "funding",
    "open_interest",
    "basis",
    "taker_flow",
    "long_short",
    "liquidations",
    "stablecoin_supply",
    "fear_greed",
    "news",
    "etf_flow",
    "derivatives",  # the DerivativesSignal: the weighted summary of the derivatives fields
    "macro",
    "regime",
)

SYNONYMS: Final[Mapping[str, str]] = {
    "rsi_14": "rsi",
    "relative_strength": "rsi",
    "roc": "momentum",
    "rate_of_change": "momentum",
    "trend": "momentum",
    "ema": "momentum",
    "moving_average": "momentum",
    "bb": "bollinger",
    "bollinger_bands": "bollinger",
    "percent_b": "bollinger",
    "macd_histogram": "macd",
    "volume_ratio": "volume",
    "volume_24h": "volume",
    "zscore": "return_zscore",
    "z_score": "return_zscore",
    "btc": "btc_move",
    "btc_change": "btc_move",
    "btc_change_1h_pct": "btc_move",
    "btc_change_24h_pct": "btc_move",
    "funding_rate": "funding",
    "funding_rates": "funding",
    "oi": "open_interest",
    "taker_delta": "taker_flow",
    "taker": "taker_flow",
    "order_flow": "taker_flow",
    "long_short_ratio": "long_short",
    "ls_ratio": "long_short",
    "liquidation": "liquidations",
    "stablecoins": "stablecoin_supply",
    "fng": "fear_greed",
    "fear_and_greed": "fear_greed",
    "sentiment": "fear_greed",
    "news_summary": "news",
    "etf": "etf_flow",
    "etf_flows": "etf_flow",
    "derivatives_signal": "derivatives",
    "macro_regime": "macro",
    "macro_quadrant": "macro",
    "crypto_regime": "regime",
    "volatility_regime": "regime",
    "hmm": "regime",
    "hmm_regime": "regime",
}

_KNOWN: Final = frozenset(SIGNAL_NAMES)


def canonical_signal(name: str) -> str | None:
    """The signal ``name`` stands for, or None when it is none of ours. Case, spaces, dashes and
    slashes do not matter (``Open Interest``, ``long/short`` and ``open-interest`` are known)."""
    key = re.sub(r"[\s/\-.]+", "_", name.strip().lower()).strip("_")
    if key in _KNOWN:
        return key
    return SYNONYMS.get(key)


#: reasoning keyword -> signal, for answers that leave ``signal_weights`` out (word starts)
SIGNAL_KEYWORDS: Final[Mapping[str, tuple[str, ...]]] = {
    "rsi": ("rsi", "overbought", "oversold"),
    "momentum": ("momentum", "trend", "moving average", "ema", "breakout"),
    "bollinger": ("bollinger", "band"),
    "macd": ("macd",),
    "volume": ("volume",),
    "funding": ("funding",),
    "open_interest": ("open interest",),
    "basis": ("basis", "premium"),
    "taker_flow": ("taker",),
    "long_short": ("long/short", "long-short", "long short"),
    "liquidations": ("liquidation",),
    "stablecoin_supply": ("stablecoin",),
    "fear_greed": ("sentiment", "fear", "greed"),
    "news": ("news", "headline"),
    "etf_flow": ("etf",),
    "derivatives": ("derivative",),
    "macro": ("macro", "goldilocks", "reflation", "stagflation", "deflation"),
    "regime": ("regime", "volatility", "hmm"),
}

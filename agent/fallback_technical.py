"""The rule-based decider's technical signals of one closes series: RSI, momentum and Bollinger
%B, each mapped to [-1, 1], or the reason it is missing.

A series only changes on a candle close, and every decision in between (about 13 per 4h candle in
a replay) asks for the same numbers, so ``TechnicalSignals.of`` keeps the last few series'
results. The series is one tuple object from close to close (``market.closes``), so it is looked
up by identity first: hashing a few hundred floats on every decision was most of the signals' cost.
"""

from __future__ import annotations

from agent import indicators
from agent.fallback_config import FallbackConfig
from agent.memo import IdentityMemo, remember

#: closes series whose signals are kept: a few tickers, each with and without the learner
MEMO_SIZE = 16

#: (raw indicator values, signals in [-1, 1], signal -> why it is missing)
Technical = tuple[dict[str, float], dict[str, float], dict[str, str]]


def clip_unit(value: float) -> float:
    return max(-1.0, min(1.0, value))


def rsi_signal(rsi: float, oversold: float, overbought: float) -> float:
    mid, half = (oversold + overbought) / 2.0, (overbought - oversold) / 2.0
    return clip_unit((mid - rsi) / half)


def momentum_signal(rate_of_change_pct: float, full_scale_pct: float) -> float:
    return clip_unit(rate_of_change_pct / full_scale_pct)


def bollinger_signal(percent_b: float) -> float:
    return clip_unit(1.0 - 2.0 * percent_b)


class TechnicalSignals:
    def __init__(self, config: FallbackConfig) -> None:
        self._config = config
        self._memo: dict[tuple[float, ...], Technical] = {}
        self._by_identity: IdentityMemo[tuple[float, ...], Technical] = IdentityMemo(MEMO_SIZE)

    def of(self, closes: indicators.Closes) -> Technical:
        """The signals of ``closes``, in fresh dicts each call (the caller adds to them)."""
        if not isinstance(closes, tuple):  # arrays and frames (tests, tools): no memo
            return self.compute(indicators.as_closes(closes))
        known = self._by_identity.get(closes)
        if known is None:
            known = self._by_value(closes)
            self._by_identity.put(closes, known)
        raw, signals, unavailable = known
        return dict(raw), dict(signals), dict(unavailable)

    def _by_value(self, closes: tuple[float, ...]) -> Technical:
        known = self._memo.get(closes)
        if known is None:
            known = self.compute(indicators.as_closes(closes))
            remember(self._memo, closes, known, MEMO_SIZE)
        return known

    def compute(self, closes: indicators.FloatArray) -> Technical:
        config = self._config
        raw: dict[str, float] = {}
        signals: dict[str, float] = {}
        unavailable: dict[str, str] = {}
        have = len(closes)
        rsi_value = indicators.rsi_last(closes, config.rsi_window)
        if rsi_value is None:
            unavailable["rsi"] = f"needs {config.rsi_window + 1} closes, have {have}"
        else:
            raw["rsi"] = rsi_value
            signals["rsi"] = rsi_signal(rsi_value, config.rsi_oversold, config.rsi_overbought)
        roc = indicators.rate_of_change_last_pct(closes, config.momentum_window)
        if roc is None:
            unavailable["momentum"] = f"needs {config.momentum_window + 1} closes, have {have}"
        else:
            raw["rate_of_change_pct"] = roc
            signals["momentum"] = momentum_signal(roc, config.momentum_full_scale_pct)
        bands = indicators.bollinger_last(closes, config.bollinger_window, config.bollinger_num_std)
        if bands is None:
            unavailable["bollinger"] = f"needs {config.bollinger_window} closes, have {have}"
        elif bands.percent_b is None:
            unavailable["bollinger"] = "flat window: the bands have no width"
        else:
            raw["percent_b"] = bands.percent_b
            signals["bollinger"] = bollinger_signal(bands.percent_b)
        return raw, signals, unavailable


__all__ = [
    "MEMO_SIZE",
    "TechnicalSignals",
    "bollinger_signal",
    "clip_unit",
    "momentum_signal",
    "rsi_signal",
]

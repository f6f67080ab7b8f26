"""The rule-based decider's technical signals of one closes series: RSI, momentum and Bollinger
%B, each mapped to [-1, 1], or the reason it is missing.

A series only changes on a candle close, and every decision in between (about 13 per 4h candle in
a replay) asks for the same numbers, so ``TechnicalSignals.of`` keeps the last few series' results. The series is one tuple object
from close to close (``market.closes``), so it is looked up by identity first: hashing a few
hundred floats on every decision was most of the signals' cost.
"""

from __future__ import annotations

from typing import TypeVar

from agent import indicators
from agent.fallback_config import FallbackConfig

#: closes series whose signals are kept: a few tickers, each with and without the learner
MEMO_SIZE = 16

#: (raw indicator values, signals in [-1, 1], signal -> why it is missing)
Technical = tuple[dict[str, float], dict[str, float], dict[str, str]]

K = TypeVar("K")
V = TypeVar("V")


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
        # id -> (the series itself, its signals): holding the series keeps its id from reuse
        self._by_identity: dict[int, tuple[tuple[float, ...], Technical]] = {}

    def of(self, closes: indicators.Closes) -> Technical:
        """The signals of ``closes``, in fresh dicts each call (the caller adds to them)."""
        if not isinstance(closes, tuple):  # arrays and frames (tests, tools): no memo
            return self.compute(indicators.as_closes(closes))
        same = self._by_identity.get(id(closes))
        if same is not None and same[0] is closes:
            known = same[1]
        else:
            known = self._by_value(closes)
            _remember(self._by_identity, id(closes), (closes, known))
        raw, signals, unavailable = known
        return dict(raw), dict(signals), dict(unavailable)

    def _by_value(self, closes: tuple[float, ...]) -> Technical:
        known = self._memo.get(closes)
        if known is None:
            known = self.compute(indicators.as_closes(closes))
            _remember(self._memo, closes, known)
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


def _remember(memo: dict[K, V], key: K, value: V) -> None:
    """Store ``key``, dropping the oldest entry beyond ``MEMO_SIZE``."""
    if len(memo) >= MEMO_SIZE:
        del memo[next(iter(memo))]
    memo[key] = value


__all__ = [
    "MEMO_SIZE",
    "TechnicalSignals",
    "bollinger_signal",
    "clip_unit",
    "momentum_signal",
    "rsi_signal",
]

"""Tick features per ticker: the gate's anomaly input, updated incrementally on every tick.

``FeatureTracker`` is a ``CandleObserver`` of the aggregator. Everything is measured on one base
timeframe (15m by default):

- ``change_{1h,4h,24h}_pct``: price now vs the last close at or before ``now - horizon``, i.e. the
  close of the base candle ending at ``floor((now - horizon) / base) * base``.
- ``volume_ratio``: the forming base candle's volume pro-rated to a whole candle, over the mean
  volume of the last ``volume_window`` closed base candles.
- ``return_zscore``: the return since the last closed base close, standardised by the mean and
  sample std of the last ``return_window`` close-to-close returns (returns across a gap are not
  taken: they would span more than one candle).

A feature that cannot be computed is ``None`` with the reason in ``unavailable``: never a guess.
Per tick the tracker only stores the price (and the forming volume); ``features()`` builds the
model lazily and caches it, and references that only change on a close are cached per bucket.
"""

from __future__ import annotations

import math
from collections import deque
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from core.events import Candle, MarketTick
from core.unvalidated import require_plain, unvalidated
from market.timeframes import timeframe_ms

HOUR_MS: Final = 3_600_000
CHANGE_HORIZONS_MS: Final[dict[str, int]] = {
    "change_1h_pct": HOUR_MS,
    "change_4h_pct": 4 * HOUR_MS,
    "change_24h_pct": 24 * HOUR_MS,
}
#: the horizons in the order of TickFeatures' fields (and of their reasons in ``unavailable``)
_HORIZONS: Final = tuple(CHANGE_HORIZONS_MS.items())
#: a candle a few seconds old has a tiny volume; projecting it to a whole candle from less than
#: this fraction of the candle would turn noise into a spike, so the projection starts here
MIN_ELAPSED_FRACTION: Final = 0.1


class TickFeatures(BaseModel):
    """What the gate reads on every tick. ``None`` features carry a reason in ``unavailable``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ticker: str
    at_ms: int  # event time of the newest tick
    price: float
    change_1h_pct: float | None
    change_4h_pct: float | None
    change_24h_pct: float | None
    volume_ratio: float | None
    return_zscore: float | None
    unavailable: dict[str, str] = Field(default_factory=dict)


class _Ticker:
    """One ticker's incremental state."""

    __slots__ = (
        "at_ms",
        "cached",
        "closes",
        "forming_open_ms",
        "forming_volume",
        "last_close",
        "last_open_ms",
        "price",
        "reference_reasons",
        "references",
        "references_at",
        "return_mean",
        "return_std",
        "returns",
        "volume_sum",
        "volumes",
    )

    def __init__(self, return_window: int, volume_window: int) -> None:
        self.price = math.nan
        self.at_ms = -1
        self.closes: dict[int, float] = {}  # base candle open -> close, the last day and a bit
        self.last_open_ms = -1
        self.last_close = math.nan
        self.returns: deque[float] = deque(maxlen=return_window)
        self.return_mean = math.nan
        self.return_std = math.nan
        self.volumes: deque[float] = deque(maxlen=volume_window)
        self.volume_sum = 0.0
        self.forming_open_ms = -1
        self.forming_volume = 0.0
        # per horizon, its reference close (None: missing, the reason in reference_reasons),
        # as looked up for references_at (the bucket's open, or the instant: see
        # FeatureTracker._look_up_references); a close or a correction forgets them (None)
        self.references: tuple[float | None, ...] = ()
        self.reference_reasons: dict[str, str] = {}
        self.references_at: int | None = None
        self.cached: TickFeatures | None = None


class FeatureTracker:
    def __init__(
        self,
        *,
        timeframe: str = "15m",
        return_window: int = 96,
        min_returns: int = 20,
        volume_window: int = 20,
        min_volumes: int = 5,
    ) -> None:
        if not 2 <= min_returns <= return_window:
            raise ValueError(f"need 2 <= min_returns <= return_window, got {min_returns}")
        if not 1 <= min_volumes <= volume_window:
            raise ValueError(f"need 1 <= min_volumes <= volume_window, got {min_volumes}")
        self.timeframe = timeframe
        self._step_ms = timeframe_ms(timeframe)
        self._return_window = return_window
        self._min_returns = min_returns
        self._volume_window = volume_window
        self._min_volumes = min_volumes
        # enough closes to look 24 h back from anywhere in the current candle
        self._keep_closes = max(CHANGE_HORIZONS_MS.values()) // self._step_ms + 3
        self._min_elapsed_ms = self._step_ms * MIN_ELAPSED_FRACTION
        self._per_bucket = all(h % self._step_ms == 0 for _, h in _HORIZONS)
        self._tickers: dict[str, _Ticker] = {}

    # -- CandleObserver -------------------------------------------------------------------------

    def on_tick(self, tick: MarketTick) -> None:
        state = self._tickers.get(tick.ticker) or self._new(tick.ticker)
        if tick.event_time_ms < state.at_ms:
            return  # an older tick (a backfilled close): it says nothing about now
        if (
            tick.event_time_ms == state.at_ms
            and tick.close == state.price
            and tick.timeframe != self.timeframe
        ):
            # another timeframe's update of the same instant (every stream pushes at once):
            # nothing the features read has changed, so the cached ones still hold
            return
        state.price = tick.close
        state.at_ms = tick.event_time_ms
        state.cached = None
        if (
            tick.timeframe == self.timeframe
            and not tick.closed
            and tick.open_time_ms >= state.forming_open_ms
        ):
            state.forming_open_ms = tick.open_time_ms
            state.forming_volume = tick.volume

    def on_close(self, ticker: str, timeframe: str, candle: Candle) -> None:
        if timeframe != self.timeframe:
            return
        state = self._tickers.get(ticker) or self._new(ticker)
        if candle.open_time_ms <= state.last_open_ms:
            return
        if state.last_open_ms >= 0 and candle.open_time_ms == state.last_open_ms + self._step_ms:
            state.returns.append(candle.close / state.last_close - 1.0)
            state.return_mean, state.return_std = _mean_std(state.returns)
        state.volumes.append(candle.volume)
        state.volume_sum = math.fsum(state.volumes)  # re-summed: no drift over months of closes
        state.closes[candle.open_time_ms] = candle.close
        if len(state.closes) > self._keep_closes:
            # the oldest: keys only arrive newer than every one kept (corrections replace one)
            del state.closes[next(iter(state.closes))]
        state.last_open_ms = candle.open_time_ms
        state.last_close = candle.close
        state.references_at = None
        state.cached = None

    def on_correct(self, ticker: str, timeframe: str, candle: Candle) -> None:
        """The newest close was corrected: its price, its volume and the return into it."""
        state = self._tickers.get(ticker)
        if timeframe != self.timeframe or state is None or candle.open_time_ms not in state.closes:
            return
        if candle.open_time_ms == state.last_open_ms:
            previous = state.closes.get(candle.open_time_ms - self._step_ms)
            if previous is not None and state.returns:
                state.returns[-1] = candle.close / previous - 1.0
                state.return_mean, state.return_std = _mean_std(state.returns)
            if state.volumes:
                state.volumes[-1] = candle.volume
                state.volume_sum = math.fsum(state.volumes)
            state.last_close = candle.close
        state.closes[candle.open_time_ms] = candle.close
        state.references_at = None
        state.cached = None

    # -- reading --------------------------------------------------------------------------------

    def features(self, ticker: str) -> TickFeatures | None:
        """Features as of the newest tick of ``ticker``; None before its first tick."""
        state = self._tickers.get(ticker)
        if state is None or state.at_ms < 0:
            return None
        if state.cached is None:
            state.cached = self._compute(ticker, state)
        return state.cached

    def _compute(self, ticker: str, state: _Ticker) -> TickFeatures:
        """The features of ``state`` now. Once per ticker and instant of a replay, so what a
        feature takes when it has a value is written out here (the same operations, in the same
        order, as ``_volume_ratio`` and ``_zscore``); whatever would give a reason goes through
        those, which say it. The changes' reference closes are looked up once per bucket."""
        at_ms, price, step_ms = state.at_ms, state.price, self._step_ms
        bucket_open_ms = at_ms - at_ms % step_ms
        unavailable: dict[str, str] = {}
        count = len(state.volumes)
        if (
            count >= self._min_volumes
            and state.forming_open_ms == bucket_open_ms
            and not (mean := state.volume_sum / count) <= 0.0
        ):
            elapsed_ms = max(at_ms - bucket_open_ms, self._min_elapsed_ms)
            volume_ratio: float | None = state.forming_volume * step_ms / elapsed_ms / mean
        else:
            volume_ratio, volume_reason = self._volume_ratio(state)
            if volume_reason:
                unavailable["volume_ratio"] = volume_reason
        if (
            len(state.returns) >= self._min_returns
            and state.last_open_ms >= bucket_open_ms - 2 * step_ms
            and 0.0 < state.return_std < math.inf
        ):
            ret = price / state.last_close - 1.0
            zscore: float | None = (ret - state.return_mean) / state.return_std
        else:
            zscore, zscore_reason = self._zscore(state)
            if zscore_reason:
                unavailable["return_zscore"] = zscore_reason
        references_at = bucket_open_ms if self._per_bucket else at_ms
        if state.references_at != references_at:
            self._look_up_references(state, references_at)
        if state.reference_reasons:
            unavailable.update(state.reference_reasons)
        close_1h, close_4h, close_24h = state.references
        return _assemble(
            {
                "ticker": ticker,
                "at_ms": at_ms,
                "price": price,
                "change_1h_pct": None if close_1h is None else (price / close_1h - 1.0) * 100.0,
                "change_4h_pct": None if close_4h is None else (price / close_4h - 1.0) * 100.0,
                "change_24h_pct": None if close_24h is None else (price / close_24h - 1.0) * 100.0,
                "volume_ratio": volume_ratio,
                "return_zscore": zscore,
                "unavailable": unavailable,
            }
        )

    def _look_up_references(self, state: _Ticker, key: int) -> None:
        """Each horizon's reference: the close of the base candle ending at the last boundary at
        or before ``now - horizon``. While every horizon is a whole number of base candles,
        that boundary moves only with the bucket of now (``key``: its open), else with now."""
        step_ms, closes, reasons = self._step_ms, state.closes, {}
        found: list[float | None] = []
        for name, horizon_ms in _HORIZONS:
            target_ms = state.at_ms - horizon_ms
            open_ms = target_ms - target_ms % step_ms - step_ms
            close = closes.get(open_ms)
            if close is None:
                reasons[name] = self._missing_reason(state, open_ms)
            found.append(close)
        state.references, state.reference_reasons = tuple(found), reasons
        state.references_at = key

    def _missing_reason(self, state: _Ticker, open_ms: int) -> str:
        wanted = f"the {self.timeframe} candle opening {_iso(open_ms)}"
        if not state.closes:
            return f"no closed {self.timeframe} candles yet (need {wanted})"
        first = min(state.closes)
        if open_ms < first:
            return f"history too short: need {wanted}, earliest known opens {_iso(first)}"
        return f"{wanted} is missing (gap in the data)"

    def _volume_ratio(self, state: _Ticker) -> tuple[float | None, str]:
        count = len(state.volumes)
        if count < self._min_volumes:
            return None, (
                f"only {count} closed {self.timeframe} volume(s), need {self._min_volumes}"
            )
        bucket_open_ms = state.at_ms - state.at_ms % self._step_ms
        if state.forming_open_ms != bucket_open_ms:
            return (
                None,
                f"no {self.timeframe} update yet in the candle opening {_iso(bucket_open_ms)}",
            )
        mean = state.volume_sum / count
        if mean <= 0.0:
            return None, f"mean closed {self.timeframe} volume is 0"
        elapsed_ms = max(state.at_ms - bucket_open_ms, self._min_elapsed_ms)
        projected = state.forming_volume * self._step_ms / elapsed_ms
        return projected / mean, ""

    def _zscore(self, state: _Ticker) -> tuple[float | None, str]:
        count = len(state.returns)
        if count < self._min_returns:
            return None, (
                f"only {count} consecutive {self.timeframe} return(s), need {self._min_returns}"
            )
        bucket_open_ms = state.at_ms - state.at_ms % self._step_ms
        if state.last_open_ms < bucket_open_ms - 2 * self._step_ms:
            return (
                None,
                f"last closed {self.timeframe} candle ({_iso(state.last_open_ms)}) is stale",
            )
        if not math.isfinite(state.return_std):
            return None, f"{self.timeframe} returns have no finite spread"
        if not state.return_std > 0.0:
            return None, f"{self.timeframe} returns have zero spread"
        ret = state.price / state.last_close - 1.0
        return (ret - state.return_mean) / state.return_std, ""

    def _new(self, ticker: str) -> _Ticker:
        state = _Ticker(self._return_window, self._volume_window)
        self._tickers[ticker] = state
        return state


_COMPUTED: Final = frozenset(
    {"ticker", "at_ms", "price", "volume_ratio", "return_zscore", "unavailable"}
)
require_plain(TickFeatures, _COMPUTED | frozenset(CHANGE_HORIZONS_MS))


def _assemble(values: dict[str, Any]) -> TickFeatures:
    """``TickFeatures`` of ``values``, not validated field by field: ``_compute`` gives every field
    a value of its exact type (a str, an int, floats or None, a fresh dict of str), which
    validation would hand back unchanged, at about half the cost, once per ticker and instant of
    a replay."""
    return unvalidated(TickFeatures, values)


def _mean_std(values: deque[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1); NaN std below two values. Returns past
    float's range (infinities of both signs, or a square that overflows) give NaN for both
    instead of raising: the close that brought them still counts, and ``_zscore`` says why
    there is no z-score until they leave the window."""
    n = len(values)
    try:
        mean = math.fsum(values) / n
        if n < 2:
            return mean, math.nan
        variance = math.fsum([(x - mean) ** 2 for x in values]) / (n - 1)
    except (OverflowError, ValueError):
        return math.nan, math.nan
    return mean, math.sqrt(variance)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%MZ")


__all__ = ["CHANGE_HORIZONS_MS", "MIN_ELAPSED_FRACTION", "FeatureTracker", "TickFeatures"]

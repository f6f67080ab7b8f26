"""FrameGuard: the checks a parsed kline must pass against the clock and the market before it may
move anything, and ``RejectionCounter``, the per-reason count of every frame dropped.

The parser (``market.parse``) knows only the frame: JSON, types, finiteness, o/h/l/c consistency.
What needs the outside world is here:

- **time**: every exchange timestamp (event time ``E``, candle open ``t``) must lie within
  ``max_clock_skew_secs`` of the injected clock, and ``E`` must not be older than
  ``max_frame_age_secs``. One frame stamped in the future would otherwise become its stream's
  high-water mark, and every real frame after it would be dropped as out of order.
- **early closes**: a close (``x=true``) is taken only at or after the candle's close time ``T``
  (less ``close_tolerance_ms``: Binance's last push of a candle may carry the instant of its last
  250 ms update); an early one would win the candle and make the real close a duplicate.
- **plausibility**: prices and volumes under hard caps; a candle's high/low within
  ``max_candle_range_frac`` of each other; every price within ``max_price_move_frac`` of the
  ticker's anchor (the last plausible price, or the reference, e.g. the seeded history, before the
  first). A market that really moved that far (a long outage) is re-anchored once the new level
  has been consistent for ``reanchor_after_secs`` of clock time; REST closes re-anchor at once.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Final, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

from core.clock import Clock
from core.events import MarketTick
from market.wire import FrameRejected, RejectReason

#: no listed USDⓈ-M contract trades anywhere near these; a number beyond is a broken frame, and
#: keeping it would overflow the sums (24 h volume, features) that the snapshot is built from
DEFAULT_MAX_PRICE: Final = 1e9
DEFAULT_MAX_VOLUME: Final = 1e15


def is_price(value: object) -> TypeGuard[float]:
    """A number a market could have traded at, as a saved or journaled value is read back: over
    0 and within ``DEFAULT_MAX_PRICE`` (NaN and infinity fail; a bool is no number)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 < value <= DEFAULT_MAX_PRICE
    )


class FrameGuardConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    max_clock_skew_secs: float = Field(300.0, gt=0)
    max_frame_age_secs: float = Field(6 * 3600.0, gt=0)
    close_tolerance_ms: int = Field(1_000, ge=0)
    max_price_move_frac: float = Field(0.3, gt=0)
    max_candle_range_frac: float = Field(1.0, gt=0)
    reanchor_after_secs: float = Field(60.0, ge=0)
    max_price: float = Field(DEFAULT_MAX_PRICE, gt=0)
    max_volume: float = Field(DEFAULT_MAX_VOLUME, gt=0)


class RejectionCounter:
    """Dropped frames by reason: what the status line sums and a metrics exporter reads."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def add(self, reason: str, count: int = 1) -> None:
        self._counts[reason] += count

    def __getitem__(self, reason: str) -> int:
        return self._counts[reason]

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def as_dict(self) -> dict[str, int]:
        """Reason -> count, sorted by reason (a stable order for logs and metrics)."""
        return dict(sorted(self._counts.items()))


class _Anchor:
    __slots__ = ("candidate", "candidate_since_secs", "price")

    def __init__(self, price: float) -> None:
        self.price = price
        self.candidate = math.nan  # a level outside the band, seen since candidate_since_secs
        self.candidate_since_secs = 0.0


class FrameGuard:
    def __init__(
        self,
        clock: Clock,
        config: FrameGuardConfig | None = None,
        *,
        reference_price: Callable[[str], float | None] | None = None,
    ) -> None:
        self._clock = clock
        self.config = config = config or FrameGuardConfig()
        self._skew_ms = round(config.max_clock_skew_secs * 1000)
        self._max_age_ms = round(config.max_frame_age_secs * 1000)
        self._move = 1.0 + config.max_price_move_frac
        self._range = 1.0 + config.max_candle_range_frac
        self._reference = reference_price
        self._anchors: dict[str, _Anchor] = {}
        self.reanchored = 0

    def check(self, tick: MarketTick) -> None:
        """Raise ``FrameRejected`` unless ``tick`` is timely and plausible."""
        self._check_time(tick)
        self._check_values(tick)

    def note_price(self, ticker: str, price: float) -> None:
        """A trusted price (a REST close): the anchor moves there at once."""
        if math.isfinite(price) and 0.0 < price <= self.config.max_price:
            self._anchors[ticker] = _Anchor(price)

    def anchors(self) -> Mapping[str, float]:
        return {ticker: anchor.price for ticker, anchor in self._anchors.items()}

    def _check_time(self, tick: MarketTick) -> None:
        now_ms = self._clock.now_ms()
        event_ms, open_ms = tick.event_time_ms, tick.open_time_ms
        if event_ms > now_ms + self._skew_ms or open_ms > now_ms + self._skew_ms:
            raise FrameRejected(
                RejectReason.FUTURE_TIME, f"E={event_ms} t={open_ms} vs clock {now_ms}"
            )
        if event_ms < now_ms - self._max_age_ms:
            raise FrameRejected(RejectReason.STALE_TIME, f"E={event_ms} vs clock {now_ms}")
        if open_ms > event_ms:
            raise FrameRejected(RejectReason.FUTURE_TIME, f"candle t={open_ms} opens after E")
        if tick.closed and event_ms < tick.close_time_ms - self.config.close_tolerance_ms:
            raise FrameRejected(
                RejectReason.EARLY_CLOSE, f"x=true at E={event_ms}, closes at {tick.close_time_ms}"
            )

    def _check_values(self, tick: MarketTick) -> None:
        config = self.config
        if tick.high > config.max_price:
            raise FrameRejected(RejectReason.IMPLAUSIBLE_PRICE, f"h={tick.high} over the cap")
        if tick.volume > config.max_volume:
            raise FrameRejected(RejectReason.IMPLAUSIBLE_VOLUME, f"v={tick.volume} over the cap")
        if tick.high > tick.low * self._range:
            raise FrameRejected(
                RejectReason.IMPLAUSIBLE_PRICE, f"range h={tick.high} l={tick.low} too wide"
            )
        anchor = self._anchors.get(tick.ticker)
        if anchor is None:
            reference = self._reference(tick.ticker) if self._reference is not None else None
            if reference is None or not math.isfinite(reference) or reference <= 0.0:
                self._anchors[tick.ticker] = _Anchor(tick.close)  # nothing to compare with yet
                return
            anchor = self._anchors[tick.ticker] = _Anchor(reference)
        if self._within(tick, anchor.price):
            anchor.price = tick.close
            anchor.candidate = math.nan
            return
        self._maybe_reanchor(tick, anchor)

    def _within(self, tick: MarketTick, price: float) -> bool:
        low, high = price / self._move, price * self._move
        return low <= tick.low and tick.high <= high

    def _maybe_reanchor(self, tick: MarketTick, anchor: _Anchor) -> None:
        """Outside the band: reject, unless the new level has held long enough to be the market."""
        now_secs = self._clock.monotonic_secs()
        if math.isnan(anchor.candidate) or not self._within(tick, anchor.candidate):
            anchor.candidate, anchor.candidate_since_secs = tick.close, now_secs
        elif now_secs - anchor.candidate_since_secs >= self.config.reanchor_after_secs:
            anchor.price, anchor.candidate = tick.close, math.nan
            self.reanchored += 1
            return
        raise FrameRejected(
            RejectReason.IMPLAUSIBLE_PRICE,
            f"{tick.ticker} l={tick.low} h={tick.high} c={tick.close} vs last good {anchor.price}",
        )


__all__ = ["FrameGuard", "FrameGuardConfig", "RejectionCounter"]

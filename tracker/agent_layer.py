"""The agent layer's pure parts: what the reviewer is shown, the fallback verdict, ADD sizing."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from core.unvalidated import is_float_map, require_plain, unvalidated
from tracker.config import TrackerConfig
from tracker.ports import PositionReview, ReviewVerdict
from tracker.positions import TrackedPosition
from tracker.safety import pnl_pct
from tracker.score import FallbackScore, fallback_score

_REVIEW_ORDER = (
    "ticker",
    "entry_price",
    "mark_price",
    "pnl_pct",
    "peak_pnl_pct",
    "holding_secs",
    "regime_at_entry",
    "regime_now",
    "entry_signals",
)
require_plain(PositionReview, frozenset(_REVIEW_ORDER))
_REVIEW_NAMES = set(_REVIEW_ORDER)


def position_review(
    position: TrackedPosition, mark_price: float, regime_now: str, now_ms: int
) -> PositionReview:
    entry_price, signals = position.entry_price, dict(position.signals)
    fields = {
        "ticker": position.ticker,
        "entry_price": entry_price,
        "mark_price": mark_price,
        "pnl_pct": pnl_pct(entry_price, mark_price),
        "peak_pnl_pct": pnl_pct(entry_price, max(position.trailing_high, mark_price)),
        "holding_secs": max(0, now_ms - position.entry_time_ms) / 1000.0,
        "regime_at_entry": position.regime,
        "regime_now": regime_now,
        "entry_signals": signals,
    }
    # a tracked position's fields are validated already, and the rest is made here: validating
    # it again at every review of every position only copied the signals once more
    if (
        type(entry_price) is float
        and type(mark_price) is float
        and type(position.ticker) is str
        and type(position.regime) is str
        and type(regime_now) is str
        and is_float_map(signals)
    ):
        return unvalidated(PositionReview, fields, _REVIEW_NAMES)
    return PositionReview(**fields)


class FallbackVerdict:
    """The fallback score's verdict, its reason written only when read: the reason is read by an
    ADD's order and by the INFO log, not by a HOLD or an EXIT (most reviews), so a replay at
    WARNING skipped formatting it for every position every review. Same text as when eager:
    it comes from the frozen score and ``why`` alone."""

    __slots__ = ("_reason", "_scored", "_why", "action", "ticker")
    decided_by = "fallback"

    def __init__(self, ticker: str, scored: FallbackScore, why: str) -> None:
        self.ticker = ticker
        self.action = scored.action
        self._scored = scored
        self._why = why
        self._reason: str | None = None

    @property
    def reason(self) -> str:
        if self._reason is None:
            self._reason = f"{self._scored.summary()} [{self._why}]"
        return self._reason

    def verdict(self) -> ReviewVerdict:
        return ReviewVerdict(
            ticker=self.ticker, action=self.action, reason=self.reason, decided_by="fallback"
        )


def scored_fallback(
    review: PositionReview,
    recent_prices: Sequence[float],
    btc_change_1h_pct: float | None,
    config: TrackerConfig,
    why: str,
) -> FallbackVerdict:
    """The fallback score's verdict; ``why`` says why the reviewer did not decide;
    ``btc_change_1h_pct`` is BTC's change over the last hour (None: unknown)."""
    scored = fallback_score(
        regime_at_entry=review.regime_at_entry,
        regime_now=review.regime_now,
        recent_prices=recent_prices,
        btc_change_1h_pct=btc_change_1h_pct,
        is_btc=review.ticker == config.btc_ticker,
        pnl_pct=review.pnl_pct,
        peak_pnl_pct=review.peak_pnl_pct,
        holding_secs=review.holding_secs,
        config=config,
    )
    return FallbackVerdict(review.ticker, scored, why)


def fallback_verdict(
    review: PositionReview,
    recent_prices: Sequence[float],
    btc_change_1h_pct: float | None,
    config: TrackerConfig,
    why: str,
) -> ReviewVerdict:
    """``scored_fallback``'s verdict as a model, its reason written."""
    return scored_fallback(review, recent_prices, btc_change_1h_pct, config, why).verdict()


class AddSize(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    notional_usd: float  # 0 when nothing may be added
    limited_by: str  # "add_pct", "max_position", "cash"


def add_size(
    portfolio_usd: float, cash_usd: float, position_value_usd: float, config: TrackerConfig
) -> AddSize:
    """``add_pct`` of the portfolio, capped so the position stays within ``max_position_pct`` of it
    (the risk cap the decision routine applies to its own BUYs) and within the free cash, less a
    reserve for the broker's fee (``fee_reserve_pct``)."""
    limits = {
        "add_pct": config.add_pct * portfolio_usd,
        "max_position": config.max_position_pct * portfolio_usd - position_value_usd,
        "cash": cash_usd / (1.0 + config.fee_reserve_pct / 100.0),
    }
    limited_by = min(limits, key=lambda name: limits[name])
    return AddSize(notional_usd=max(limits[limited_by], 0.0), limited_by=limited_by)

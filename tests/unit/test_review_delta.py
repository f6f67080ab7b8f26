"""Position reviews without a material change keep HOLD without a model call."""

from __future__ import annotations

from agent.materiality import DeltaConfig
from agent.review_delta import UNCHANGED, ReviewDelta
from tracker.ports import PositionReview, ReviewAction


def _position(ticker: str, mark: float, regime: str = "medium_volatility") -> PositionReview:
    return PositionReview(
        ticker=ticker,
        entry_price=100.0,
        mark_price=mark,
        pnl_pct=mark - 100.0,
        peak_pnl_pct=max(0.0, mark - 100.0),
        holding_secs=600.0,
        regime_at_entry="medium_volatility",
        regime_now=regime,
    )


def test_a_position_claude_has_not_seen_is_always_asked() -> None:
    delta = ReviewDelta(DeltaConfig())
    ask, keep = delta.split([_position("SOL/USDT", 101.0)], now_secs=0.0)
    assert [p.ticker for p in ask] == ["SOL/USDT"] and keep == []


def test_small_moves_keep_hold_and_material_ones_ask_again() -> None:
    delta = ReviewDelta(DeltaConfig(review_min_move_pct=0.5, review_max_unchanged_secs=1800))
    delta.reviewed([_position("SOL/USDT", 100.0), _position("ETH/USDT", 100.0)], now_secs=0.0)
    ask, keep = delta.split(
        [_position("SOL/USDT", 100.3), _position("ETH/USDT", 100.6)], now_secs=180.0
    )
    assert [p.ticker for p in ask] == ["ETH/USDT"]  # moved 0.6 % >= 0.5 %
    (hold,) = keep
    assert (hold.ticker, hold.action, hold.decided_by) == ("SOL/USDT", ReviewAction.HOLD, UNCHANGED)
    assert delta.skipped == 1


def test_a_regime_change_or_an_old_review_asks_again() -> None:
    delta = ReviewDelta(DeltaConfig(review_max_unchanged_secs=1800))
    delta.reviewed([_position("SOL/USDT", 100.0)], now_secs=0.0)
    ask, _ = delta.split([_position("SOL/USDT", 100.0, regime="high_volatility")], now_secs=60.0)
    assert len(ask) == 1
    ask, _ = delta.split([_position("SOL/USDT", 100.0)], now_secs=1800.0)
    assert len(ask) == 1


def test_off_when_delta_gating_is_off_and_closed_positions_are_forgotten() -> None:
    delta = ReviewDelta(DeltaConfig(enabled=False))
    delta.reviewed([_position("SOL/USDT", 100.0)], now_secs=0.0)
    ask, keep = delta.split([_position("SOL/USDT", 100.0)], now_secs=1.0)
    assert len(ask) == 1 and keep == []
    gating = ReviewDelta(DeltaConfig())
    gating.reviewed([_position("SOL/USDT", 100.0)], now_secs=0.0)
    gating.forget([])  # the position closed: a new one of the same ticker is asked about
    ask, _ = gating.split([_position("SOL/USDT", 100.0)], now_secs=1.0)
    assert len(ask) == 1

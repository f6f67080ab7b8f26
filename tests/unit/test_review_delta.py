"""Position reviews without a material change keep HOLD without a model call."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

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


def _at(
    mark: float, regime_now: str = "medium_volatility", entry_regime: str = "medium_volatility"
) -> PositionReview:
    return _position("BTC/USDT", mark, regime_now).model_copy(
        update={"regime_at_entry": entry_regime}
    )


def test_a_winner_turning_into_a_loser_is_asked_again_even_on_a_small_move() -> None:
    delta = ReviewDelta(DeltaConfig(review_min_move_pct=0.5))
    delta.reviewed([_at(100.05)], now_secs=0.0)  # Claude saw +0.05 %
    ask, keep = delta.split([_at(99.9)], now_secs=180.0)  # -0.10 %: moved 0.15 % only
    assert [p.ticker for p in ask] == ["BTC/USDT"] and keep == []


def test_a_loser_recovering_into_profit_is_asked_again() -> None:
    delta = ReviewDelta(DeltaConfig(review_min_move_pct=0.5))
    delta.reviewed([_at(99.9)], now_secs=0.0)
    ask, _ = delta.split([_at(100.1)], now_secs=180.0)
    assert len(ask) == 1


def test_a_losing_position_outside_its_entry_regime_is_asked_when_the_loss_deepens() -> None:
    delta = ReviewDelta(DeltaConfig(review_min_move_pct=0.5, review_at_risk_move_pct=0.25))
    broken = {"regime_now": "high_volatility", "entry_regime": "low_volatility"}
    delta.reviewed([_at(99.9, **broken)], now_secs=0.0)  # Claude held it at -0.10 %
    ask, keep = delta.split([_at(99.8, **broken)], now_secs=180.0)  # -0.20 %: 0.10 % deeper
    assert ask == [] and len(keep) == 1
    ask, keep = delta.split([_at(99.6, **broken)], now_secs=360.0)  # -0.40 %: 0.30 % deeper
    assert [p.ticker for p in ask] == ["BTC/USDT"] and keep == []


def test_the_tighter_at_risk_move_applies_only_to_losers_outside_their_entry_regime() -> None:
    delta = ReviewDelta(DeltaConfig(review_min_move_pct=0.5, review_at_risk_move_pct=0.25))
    delta.reviewed([_at(99.9)], now_secs=0.0)  # losing, but in the regime it was entered in
    ask, keep = delta.split([_at(99.6)], now_secs=180.0)
    assert ask == [] and len(keep) == 1
    outside = ReviewDelta(DeltaConfig(review_min_move_pct=0.5, review_at_risk_move_pct=0.25))
    winning = {"regime_now": "high_volatility", "entry_regime": "low_volatility"}
    outside.reviewed([_at(100.9, **winning)], now_secs=0.0)  # outside, but winning
    ask, keep = outside.split([_at(100.6, **winning)], now_secs=180.0)
    assert ask == [] and len(keep) == 1


@given(
    seen_pnl=st.floats(-3.0, 3.0, allow_nan=False),
    now_pnl=st.floats(-3.0, 3.0, allow_nan=False),
    regime_now=st.sampled_from(["low_volatility", "high_volatility"]),
)
def test_any_break_even_crossing_is_asked_whatever_the_move(
    seen_pnl: float, now_pnl: float, regime_now: str
) -> None:
    def held(pnl_pct: float) -> PositionReview:  # the P&L as the tracker computed it
        position = _at(100.0 + pnl_pct, regime_now, "low_volatility")
        return position.model_copy(update={"pnl_pct": pnl_pct})

    delta = ReviewDelta(DeltaConfig(review_min_move_pct=5.0, review_at_risk_move_pct=5.0))
    delta.reviewed([held(seen_pnl)], now_secs=0.0)
    ask, keep = delta.split([held(now_pnl)], now_secs=60.0)
    crossed = (seen_pnl < 0) != (now_pnl < 0)
    assert (len(ask), len(keep)) == ((1, 0) if crossed else (0, 1))

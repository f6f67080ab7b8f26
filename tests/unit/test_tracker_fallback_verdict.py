"""The fallback's verdict writes its reason only when read: the same text as written at once,
read where it is read (an ADD's order, the INFO log), and not written for a HOLD at WARNING."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_tracker_support import BTC, ETH, make_rig

from broker.port import OrderIntent, OrderResult
from tracker.agent_layer import (
    FallbackVerdict,
    fallback_verdict,
    position_review,
    scored_fallback,
)
from tracker.config import TrackerConfig
from tracker.ports import PositionReview, ReviewAction, ReviewVerdict
from tracker.review import AgentLayer
from tracker.score import FallbackScore, fallback_score

CONFIG = TrackerConfig()
regimes = st.sampled_from(
    ["low_volatility_goldilocks", "medium_volatility_reflation", "high_volatility", "unknown"]
)
pcts = st.floats(min_value=-100.0, max_value=1000.0)


def eager_verdict(
    review: PositionReview, prices: Sequence[float], btc: float | None, why: str
) -> ReviewVerdict:
    """The verdict as it was made before: the score's summary written at once."""
    scored = fallback_score(
        regime_at_entry=review.regime_at_entry,
        regime_now=review.regime_now,
        recent_prices=prices,
        btc_change_1h_pct=btc,
        is_btc=review.ticker == CONFIG.btc_ticker,
        pnl_pct=review.pnl_pct,
        peak_pnl_pct=review.peak_pnl_pct,
        holding_secs=review.holding_secs,
        config=CONFIG,
    )
    reason = f"{scored.summary()} [{why}]"
    return ReviewVerdict(
        ticker=review.ticker, action=scored.action, reason=reason, decided_by="fallback"
    )


@given(
    st.sampled_from([BTC, ETH]),
    regimes,
    regimes,
    pcts,
    pcts,
    st.floats(min_value=0, max_value=1e6),
    st.lists(st.floats(min_value=1e-3, max_value=1e6), max_size=8),
    st.one_of(st.none(), st.floats(min_value=-50.0, max_value=50.0)),
    st.text(max_size=40),
)
def test_the_lazy_reason_is_the_eager_one(
    ticker: str,
    before: str,
    now: str,
    pnl: float,
    peak: float,
    holding: float,
    prices: list[float],
    btc: float | None,
    why: str,
) -> None:
    review = PositionReview(
        ticker=ticker,
        entry_price=100.0,
        mark_price=100.0 * (1 + pnl / 100),
        pnl_pct=pnl,
        peak_pnl_pct=max(pnl, peak),
        holding_secs=holding,
        regime_at_entry=before,
        regime_now=now,
    )
    want = eager_verdict(review, prices, btc, why)
    lazy = scored_fallback(review, prices, btc, CONFIG, why)
    assert (lazy.ticker, lazy.action, lazy.decided_by) == (want.ticker, want.action, "fallback")
    assert lazy.reason == want.reason and lazy.reason == want.reason  # read twice: the same
    made = lazy.verdict()
    assert made == want and made.model_dump(mode="json") == want.model_dump(mode="json")
    assert made.model_fields_set == want.model_fields_set
    assert fallback_verdict(review, prices, btc, CONFIG, why) == want


def counting_summaries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    written: list[str] = []
    summary = FallbackScore.summary

    def counted(self: FallbackScore) -> str:
        written.append(summary(self))
        return written[-1]

    monkeypatch.setattr(FallbackScore, "summary", counted)
    return written


async def test_a_hold_at_warning_writes_no_reason_and_review_returns_it_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(tmp_path, reviewer=None)
    await rig.open_position(BTC, 100.0)
    written = counting_summaries(monkeypatch)
    layer = AgentLayer(rig.clock, rig.broker, None, rig.tracker.config, rig.tracker)
    with caplog.at_level(logging.WARNING, logger="tracker.review"):
        (lazy,) = await layer.run_review()
    assert isinstance(lazy, FallbackVerdict) and lazy.action is ReviewAction.HOLD
    assert written == []  # nobody read it: not written
    with caplog.at_level(logging.INFO, logger="tracker.review"):
        (verdict,) = await layer.review()
    assert verdict.reason == f"{written[-1]} [no reviewer]" == lazy.reason
    assert f"tracker: HOLD {BTC} by fallback: {verdict.reason}" in caplog.text


async def test_a_fallback_add_orders_with_the_eager_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(tmp_path, reviewer=None, regimes={BTC: "high_volatility"})
    await rig.open_position(BTC, 100.0, notional_usd=1000.0)
    for price in (104.0, 108.0, 110.0):  # rising, at its peak, calmer than at entry: ADD
        rig.set_price(BTC, price)
        await rig.tracker.check_safety()
    rig.regimes[BTC] = "low_volatility_goldilocks"
    tracker = rig.tracker
    seen = position_review(
        tracker.positions[BTC], 110.0, tracker.regime_now(BTC), rig.clock.now_ms()
    )
    want = eager_verdict(
        seen, tracker.recent_prices(BTC), tracker.btc_change_1h_pct(), "no reviewer"
    )
    placed: list[OrderIntent] = []
    execute = rig.broker.execute_decisions

    async def recorded(intents: Sequence[OrderIntent]) -> Sequence[OrderResult]:
        placed.extend(intents)
        return await execute(intents)

    monkeypatch.setattr(rig.broker, "execute_decisions", recorded)
    with caplog.at_level(logging.WARNING, logger="tracker.review"):  # as a replay logs
        (verdict,) = await tracker.review_positions()
    assert verdict == want and want.action is ReviewAction.ADD
    (intent,) = placed
    assert intent.reasoning == want.reason

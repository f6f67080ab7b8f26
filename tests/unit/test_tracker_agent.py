"""The agent layer (reviewer verdicts, fallback on failure, ADD sizing), the loop's cadence on a
VirtualClock, its failure backoff, and reconciling with the broker."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_tracker_support import (
    BTC,
    ETH,
    SOL,
    T0_MS,
    FailingReviewer,
    HangingReviewer,
    ScriptedReviewer,
    make_rig,
)

from broker.ids import client_order_id
from broker.paper import PaperBroker
from broker.port import Action, PositionDetail
from contract.broker_harness import make_intent
from tracker.agent_layer import add_size
from tracker.config import TrackerConfig
from tracker.ports import ReviewAction


async def test_reviewer_exit_sells_and_says_it_was_the_agent(tmp_path: Path) -> None:
    reviewer = ScriptedReviewer({BTC: ReviewAction.EXIT, ETH: ReviewAction.HOLD})
    rig = make_rig(tmp_path, reviewer=reviewer, regimes={BTC: "low_volatility_goldilocks"})
    await rig.open_position(BTC, 100.0, rsi=0.3)
    await rig.open_position(ETH, 2000.0)
    rig.set_price(BTC, 106.0)
    await rig.tracker.check_safety()
    rig.regimes[BTC] = "high_volatility_goldilocks"
    rig.set_price(BTC, 104.0)

    verdicts = await rig.tracker.review_positions()

    assert {(v.ticker, v.action, v.decided_by) for v in verdicts} == {
        (BTC, ReviewAction.EXIT, "claude"),
        (ETH, ReviewAction.HOLD, "claude"),
    }
    (shown,) = reviewer.seen
    btc = next(r for r in shown if r.ticker == BTC)
    assert btc.pnl_pct == pytest.approx(4.0) and btc.peak_pnl_pct == pytest.approx(6.0)
    assert btc.regime_at_entry == "low_volatility_goldilocks"
    assert btc.regime_now == "high_volatility_goldilocks"
    assert btc.entry_signals == {"rsi": 0.3}
    (done,) = rig.exits
    assert done.ticker == BTC and done.reason == "AGENT EXIT"
    assert rig.tracker.is_tracked(ETH) and not rig.tracker.is_tracked(BTC)


async def test_reviewer_add_buys_add_pct_of_the_portfolio(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, reviewer=ScriptedReviewer({BTC: ReviewAction.ADD}))
    await rig.open_position(BTC, 100.0, notional_usd=1000.0)
    portfolio = await rig.broker.get_portfolio_value()
    await rig.tracker.review_positions()
    add_id = client_order_id(f"add-{BTC}-{rig.clock.now_ms()}", BTC, "BUY")
    order = rig.broker.order(add_id)
    assert order is not None and order.status == "open"
    assert float(order.requested_notional_usd) == pytest.approx(0.05 * portfolio)
    # the ADD is still open: the next review does not stack another one on it
    await rig.clock.advance(180)
    rig.set_price(BTC, 100.0)
    await rig.tracker.review_positions()
    assert len(rig.broker.open_orders()) == 1


def test_add_is_capped_at_the_max_position_and_the_cash() -> None:
    config = TrackerConfig()
    assert add_size(10_000, 9_000, 1_000, config).notional_usd == pytest.approx(500)
    capped = add_size(10_000, 9_000, 1_900, config)
    assert capped.limited_by == "max_position" and capped.notional_usd == pytest.approx(100)
    assert add_size(10_000, 9_000, 2_500, config).notional_usd == 0.0
    short = add_size(10_000, 50, 1_000, config)
    assert short.limited_by == "cash" and short.notional_usd == pytest.approx(50 / 1.001)


async def test_an_add_at_the_max_position_is_skipped(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, reviewer=ScriptedReviewer({BTC: ReviewAction.ADD}))
    await rig.open_position(BTC, 100.0, notional_usd=2000.0)  # 20 % of 10 000 already
    await rig.tracker.review_positions()
    assert rig.broker.open_orders() == []


async def test_an_add_counts_a_decisions_resting_buy_as_held(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, reviewer=ScriptedReviewer({BTC: ReviewAction.ADD}))
    await rig.open_position(BTC, 100.0, notional_usd=1000.0)  # 10 % of 10 000
    resting = make_intent(BTC, Action.BUY, notional_usd=900.0, reference_price=96.0)
    (placed,) = await rig.broker.execute_decisions([resting])  # a limit under the market: rests
    assert placed.status == "open"
    await rig.tracker.review_positions()
    add_id = client_order_id(f"add-{BTC}-{rig.clock.now_ms()}", BTC, "BUY")
    order = rig.broker.order(add_id)
    # max position 20 %: 2000 - 1000 held - 900 resting leaves 100 (not add_pct's 500)
    assert order is not None
    assert float(order.requested_notional_usd) == pytest.approx(100.0, rel=1e-3)


async def test_a_failing_reviewer_falls_back_to_the_score(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reviewer = FailingReviewer()
    rig = make_rig(tmp_path, reviewer=reviewer, regimes={BTC: "low_volatility_goldilocks"})
    await rig.open_position(BTC, 100.0)
    for price in (103.0, 100.0, 97.0, 95.0):  # up 3 %, then down: momentum against the long
        rig.set_price(BTC, price)
        await rig.tracker.check_safety()
    rig.regimes[BTC] = "high_volatility_goldilocks"
    await rig.clock.advance(24 * 3600)
    rig.set_price(BTC, 95.0)
    with caplog.at_level(logging.WARNING, logger="tracker.tracker"):
        (verdict,) = await rig.tracker.review_positions()
    assert reviewer.calls == 1
    assert verdict.decided_by == "fallback" and verdict.action is ReviewAction.EXIT
    assert "reviewer failed: RuntimeError" in verdict.reason
    assert "the fallback score decides" in caplog.text
    (done,) = rig.exits
    assert done.reason == "FALLBACK EXIT"


async def test_no_reviewer_and_missing_verdicts_use_the_fallback(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, reviewer=None)
    await rig.open_position(BTC, 100.0)
    (verdict,) = await rig.tracker.review_positions()
    assert verdict.decided_by == "fallback" and "no reviewer" in verdict.reason
    assert verdict.action is ReviewAction.HOLD  # flat, fresh, same regime: score 0

    partial = ScriptedReviewer({ETH: ReviewAction.EXIT, SOL: ReviewAction.EXIT})
    rig2 = make_rig(tmp_path / "b", reviewer=partial)
    await rig2.open_position(BTC, 100.0)
    await rig2.open_position(ETH, 2000.0)
    verdicts = {v.ticker: v for v in await rig2.tracker.review_positions()}
    assert verdicts[ETH].decided_by == "claude" and verdicts[BTC].decided_by == "fallback"


async def test_a_reviewer_that_hangs_is_timed_out_on_the_clock(tmp_path: Path) -> None:
    reviewer = HangingReviewer()
    rig = make_rig(tmp_path, reviewer=reviewer, config=TrackerConfig(review_timeout_secs=60))
    await rig.open_position(BTC, 100.0)
    review = asyncio.create_task(rig.tracker.review_positions())
    await rig.clock.advance(59)
    assert not review.done()
    await rig.clock.advance(1)
    (verdict,) = await review
    assert verdict.decided_by == "fallback" and "TimeoutError" in verdict.reason
    assert reviewer.cancelled


async def test_the_loop_checks_every_30_s_and_reviews_every_3_min(tmp_path: Path) -> None:
    reviewer = ScriptedReviewer({BTC: ReviewAction.HOLD})
    rig = make_rig(tmp_path, reviewer=reviewer)
    await rig.open_position(BTC, 100.0)
    start = rig.clock.monotonic_secs()
    loop = asyncio.create_task(rig.tracker.run())
    try:
        await rig.clock.advance(0)
        assert rig.tracker.safety_checks == 1 and rig.tracker.agent_reviews == 0
        await rig.clock.advance_to(start + 179)
        assert rig.tracker.safety_checks == 6 and rig.tracker.agent_reviews == 0
        rig.set_price(BTC, 100.0)  # keep the mark fresh for the review
        await rig.clock.advance_to(start + 180)
        assert rig.tracker.safety_checks == 7 and rig.tracker.agent_reviews == 1
        assert len(reviewer.seen) == 1
        await rig.clock.advance_to(start + 360)
        assert rig.tracker.safety_checks == 13 and rig.tracker.agent_reviews == 2
    finally:
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop


class FlakyBroker(PaperBroker):
    """A paper broker whose position listing fails the first ``failures`` times."""

    def __init__(self, *args: object, failures: int, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.failures_left = failures

    async def get_positions_detail(self) -> Sequence[PositionDetail]:
        if self.failures_left > 0:
            self.failures_left -= 1
            raise ConnectionError("exchange unreachable")
        return await super().get_positions_detail()


async def test_a_failing_check_is_logged_and_retried_with_backoff(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from core.clock import VirtualClock

    clock = VirtualClock(T0_MS)
    broker = FlakyBroker(clock, failures=2)
    rig = make_rig(tmp_path, broker=broker, clock=clock)
    rig.tracker.track(ETH, 2000.0, 1.0, T0_MS, {}, "unknown")  # not held: reconcile drops it
    loop = asyncio.create_task(rig.tracker.run())
    try:
        with caplog.at_level(logging.ERROR, logger="tracker.tracker"):
            await clock.advance(0)
            assert rig.tracker.loop_failures == 1
            await clock.advance(30)  # backoff is capped at the safety interval
        assert broker.failures_left == 0 and rig.tracker.loop_failures == 2
        assert "safety check failed" in caplog.text and "ConnectionError" in caplog.text
        assert not rig.tracker.is_tracked(ETH)
        assert rig.tracker.safety_checks >= 1
    finally:
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop


async def test_reconcile_untracks_what_is_not_held_and_tracks_what_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(tmp_path, attach=False)  # the BUY below opens a position nobody tracks
    await rig.open_position(BTC, 100.0)
    rig.tracker.track(ETH, 2000.0, 1.0, T0_MS, {"x": 1.0}, "unknown")
    with caplog.at_level(logging.WARNING, logger="tracker.tracker"):
        await rig.tracker.reconcile_with_broker()
    assert not rig.tracker.is_tracked(ETH)
    position = rig.tracker.position(BTC)
    assert position is not None
    assert position.entry_price == 100.0 and position.quantity == pytest.approx(10.0)
    assert position.entry_time_ms == T0_MS + 1000 and position.regime == "unknown"
    assert "ETH/USDT was tracked but the broker holds no position" in caplog.text
    assert "that was not tracked" in caplog.text


async def test_a_filled_add_is_followed_at_the_next_review(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, reviewer=ScriptedReviewer({BTC: ReviewAction.ADD}))
    await rig.open_position(BTC, 100.0, notional_usd=1000.0)
    rig.set_price(BTC, 110.0)
    await rig.tracker.check_safety()
    await rig.tracker.review_positions()  # ADD ~500 USD at 110
    await rig.clock.advance(30)
    rig.set_price(BTC, 109.0)  # trades through the limit: the ADD fills
    await rig.tracker.review_positions()
    position = rig.tracker.position(BTC)
    held = rig.broker.ledger.positions[BTC]
    assert position is not None
    assert position.quantity == pytest.approx(float(held.quantity)) and position.quantity > 10.0
    assert position.entry_price == pytest.approx(float(held.average_entry_price))
    assert 100.0 < position.entry_price < 110.0
    assert position.trailing_high == 110.0


async def test_two_adds_in_one_review_never_plan_more_than_the_cash(tmp_path: Path) -> None:
    reviewer = ScriptedReviewer({BTC: ReviewAction.ADD, ETH: ReviewAction.ADD})
    rig = make_rig(tmp_path, reviewer=reviewer)
    await rig.open_position(BTC, 100.0, notional_usd=1000.0)
    await rig.open_position(ETH, 2000.0, notional_usd=1000.0)
    await rig.open_position(SOL, 200.0, notional_usd=7600.0)  # leaves ~400 USD of cash
    cash = await rig.broker.get_cash()
    assert 300.0 < cash < 500.0  # less than one 5 % ADD (~500)
    await rig.tracker.review_positions()
    placed = sum(float(o.requested_notional_usd) for o in rig.broker.open_orders())
    assert placed <= cash
    assert len(rig.broker.open_orders()) == 1


async def test_every_agent_cycle_reconciles_with_the_broker(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, attach=False)  # fills nobody announces, as a late exchange fill
    loop = asyncio.create_task(rig.tracker.run())
    try:
        await rig.clock.advance(0)  # the start-up reconcile: nothing held yet
        await rig.open_position(BTC, 100.0)
        assert not rig.tracker.is_tracked(BTC)
        await rig.clock.advance(rig.tracker.config.agent_interval_secs)
        assert rig.tracker.is_tracked(BTC)
    finally:
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop


class CountingBroker(FlakyBroker):
    """A flaky paper broker that counts its position listings."""

    listings = 0

    async def get_positions_detail(self) -> Sequence[PositionDetail]:
        self.listings += 1
        return await super().get_positions_detail()


@pytest.mark.parametrize("failures", [0, 1])
async def test_an_agent_cycle_reviews_what_its_reconcile_read(
    tmp_path: Path, failures: int
) -> None:
    """The review takes the positions the cycle's reconcile just read; a reconcile that failed
    leaves the review to read them itself."""
    reviewer = ScriptedReviewer({BTC: ReviewAction.HOLD})
    rig = make_rig(
        tmp_path,
        reviewer=reviewer,
        broker_factory=lambda c, b: CountingBroker(c, bus=b, failures=0),
    )
    broker = rig.broker
    assert isinstance(broker, CountingBroker)
    await rig.open_position(BTC, 100.0)
    start = rig.clock.monotonic_secs()
    loop = asyncio.create_task(rig.tracker.run())
    try:
        await rig.clock.advance(0)  # the start-up reconcile
        rig.set_price(BTC, 100.0)
        before, broker.failures_left = broker.listings, failures
        await rig.clock.advance_to(start + rig.tracker.config.agent_interval_secs)
        assert rig.tracker.agent_reviews == 1 and len(reviewer.seen) == 1
        assert broker.listings - before == 1 + failures
    finally:
        loop.cancel()
        with pytest.raises(asyncio.CancelledError):
            await loop

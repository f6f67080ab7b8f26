"""Safety-layer exits end to end over a real PaperBroker and RunnerStateStore: the SELL, the
position.exit event, untracking, persistence across a restart, untracked SELLs skipped."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_tracker_support import BTC, ETH, T0_MS, make_rig

from broker.ids import client_order_id
from broker.paper import PaperBroker
from broker.port import Action, OrderIntent, OrderResult
from state.models import RunnerState
from tracker.config import TrackerConfig
from tracker.safety import ExitReason


async def test_opening_a_position_tracks_it_and_saves_it(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, regimes={BTC: "medium_volatility_goldilocks"})
    await rig.open_position(BTC, 100.0, rsi=0.4)
    position = rig.tracker.position(BTC)
    assert position is not None
    assert position.entry_price == 100.0 and position.quantity == pytest.approx(10.0)
    assert position.regime == "medium_volatility_goldilocks"
    assert position.signals == {"rsi": 0.4}
    saved = RunnerState.model_validate_json(rig.state_path.read_bytes())
    assert dict(saved.entry_prices) == {BTC: 100.0}
    assert dict(saved.entry_times_ms) == {BTC: T0_MS + 1000}
    assert saved.extra["tracker"]["positions"][BTC]["regime"] == "medium_volatility_goldilocks"


async def test_stop_loss_sells_publishes_the_exit_and_untracks(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, regimes={BTC: "low_volatility_goldilocks"})
    await rig.open_position(BTC, 100.0, rsi=0.4, momentum=0.2)
    await rig.tracker.check_safety()
    assert rig.exits == [] and rig.tracker.is_tracked(BTC)

    await rig.clock.advance(3600)
    rig.set_price(BTC, 90.0)  # exactly -10 %
    (done,) = await rig.tracker.check_safety()

    assert rig.exits == [done]
    assert done.ticker == BTC and done.reason == "STOP LOSS"
    assert done.regime == "low_volatility_goldilocks"
    assert done.signals == {"rsi": 0.4, "momentum": 0.2}
    assert done.holding_secs == pytest.approx(3600.0)
    fill = 90.0 * (1 - 0.0005)  # the paper broker's market SELL: last price minus slippage
    assert done.pnl_pct == pytest.approx((fill / 100.0 - 1) * 100)
    sell_id = client_order_id(f"exit-stop_loss-{BTC}-{rig.clock.now_ms()}", BTC, "SELL")
    sold = rig.broker.order(sell_id)
    assert sold is not None and sold.status == "filled"
    assert BTC not in rig.broker.ledger.positions
    assert not rig.tracker.is_tracked(BTC)
    saved = RunnerState.model_validate_json(rig.state_path.read_bytes())
    assert dict(saved.entry_prices) == {} and dict(saved.trailing_highs) == {}


async def test_a_stop_loss_cancels_the_tickers_resting_buy_so_it_cannot_buy_back_in(
    tmp_path: Path,
) -> None:
    rig = make_rig(tmp_path)
    await rig.open_position(BTC, 100.0)
    await rig.clock.advance(1)
    rig.set_price(BTC, 91.0)  # down 9 %: the stop (-10 %) holds
    top_up = OrderIntent(
        decision_id="d-topup",
        ticker=BTC,
        action=Action.BUY,
        notional_usd=500.0,
        reference_price=87.0,  # a limit under the market (within its price band): it rests
        position_pct=0.05,
    )
    (resting,) = await rig.broker.execute_decisions([top_up])
    assert resting.status == "open"
    await rig.clock.advance(60)
    rig.set_price(BTC, 90.0)  # the stop fires (-10 %) with the top-up limit still resting
    (done,) = await rig.tracker.check_safety()
    assert done.reason == "STOP LOSS"
    cancelled = rig.broker.order(resting.client_order_id)
    assert cancelled is not None and cancelled.status == "cancelled"
    rig.set_price(BTC, 86.0)  # through the old limit: nothing is bought back
    assert BTC not in rig.broker.ledger.positions


async def test_trailing_stop_arms_after_8_pct_and_fires_12_pct_below_the_high(
    tmp_path: Path,
) -> None:
    rig = make_rig(tmp_path)
    await rig.open_position(BTC, 100.0)
    rig.set_price(BTC, 107.0)
    await rig.tracker.check_safety()
    rig.set_price(BTC, 94.0)  # 12 % below 107, but not armed: holds
    assert await rig.tracker.check_safety() == []
    rig.set_price(BTC, 125.0)
    await rig.tracker.check_safety()
    position = rig.tracker.position(BTC)
    assert position is not None and position.armed and position.trailing_high == 125.0
    rig.set_price(BTC, 110.5)
    assert await rig.tracker.check_safety() == []
    rig.set_price(BTC, 110.0)  # 125 x 0.88
    (done,) = await rig.tracker.check_safety()
    assert done.reason == "TRAILING STOP"
    assert done.pnl_pct == pytest.approx((110.0 * 0.9995 / 100.0 - 1) * 100)


async def test_the_trailing_high_and_armed_flag_survive_a_restart(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, regimes={BTC: "high_volatility_goldilocks"})
    await rig.open_position(BTC, 100.0, rsi=0.7)
    rig.set_price(BTC, 120.0)
    await rig.tracker.check_safety()

    # a new daemon: new store and tracker on the same state file, the same broker account
    again = make_rig(tmp_path, broker=rig.broker, clock=rig.clock)
    position = again.tracker.position(BTC)
    assert position is not None
    assert position.armed and position.trailing_high == 120.0
    assert position.entry_price == 100.0 and position.quantity == pytest.approx(10.0)
    assert position.regime == "high_volatility_goldilocks" and position.signals == {"rsi": 0.7}
    rig.set_price(BTC, 105.0)  # 120 x 0.88 = 105.6: the resumed trailing stop fires
    (done,) = await again.tracker.check_safety()
    assert done.reason == "TRAILING STOP" and done.regime == "high_volatility_goldilocks"


async def test_a_lower_arming_level_after_a_restart_arms_at_an_unchanged_high(
    tmp_path: Path,
) -> None:
    # arming without a new high: the trailing high (105) stays, only the arming level moved
    # under it, so the check is not a quiet one (a replay must not pass it over) and its
    # armed flag is saved at once
    rig = make_rig(tmp_path)
    await rig.open_position(BTC, 100.0)
    rig.set_price(BTC, 105.0)
    await rig.tracker.check_safety()
    position = rig.tracker.position(BTC)
    assert position is not None and not position.armed and position.trailing_high == 105.0

    lower = TrackerConfig(trailing_arm_pct=4.0)
    again = make_rig(tmp_path, broker=rig.broker, clock=rig.clock, config=lower)
    assert not again.tracker._safety.only_samples(
        again.tracker.config
    )  # the check would arm: not quiet
    assert await again.tracker.check_safety() == []
    position = again.tracker.position(BTC)
    assert position is not None and position.armed and position.trailing_high == 105.0
    assert again.tracker._safety.only_samples(
        again.tracker.config
    )  # armed now: the same price only samples
    saved = RunnerState.model_validate_json(again.state_path.read_bytes())
    assert saved.extra["tracker"]["positions"][BTC]["armed"] is True

    again.set_price(BTC, 92.0)  # under 105 x 0.88: the trailing stop armed at the old high fires
    (done,) = await again.tracker.check_safety()
    assert done.reason == "TRAILING STOP"


async def test_a_sell_for_an_untracked_position_is_skipped_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tracker.tracker"):
        assert await rig.tracker.exit_position(ETH, ExitReason.AGENT_EXIT) is None
    assert "not tracked" in caplog.text and ETH in caplog.text
    assert rig.broker.ledger.positions == {} and rig.exits == []

    await rig.open_position(BTC, 100.0)
    sells = [
        OrderIntent(
            decision_id="d1",
            ticker=t,
            action=Action.SELL,
            notional_usd=100.0,
            reference_price=100.0,
            position_pct=0.1,
        )
        for t in (ETH, BTC)
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tracker.tracker"):
        assert [i.ticker for i in rig.tracker.filter_sells(sells)] == [BTC]
    assert "SELL ETH/USDT (decision d1) skipped" in caplog.text


async def test_a_decision_routine_sell_of_a_tracked_position_is_an_exit(tmp_path: Path) -> None:
    rig = make_rig(tmp_path)
    await rig.open_position(BTC, 100.0, rsi=0.1)
    rig.set_price(BTC, 104.0)
    sell = OrderIntent(
        decision_id="d2",
        ticker=BTC,
        action=Action.SELL,
        notional_usd=1040.0,
        reference_price=104.0,
        position_pct=0.1,
    )
    results = await rig.broker.execute_decisions([sell])
    await rig.tracker.on_executed([sell], results)
    (done,) = rig.exits
    assert done.reason == "DECISION SELL" and done.signals == {"rsi": 0.1}
    assert done.pnl_pct == pytest.approx((104.0 * 0.9995 / 100 - 1) * 100)
    assert not rig.tracker.is_tracked(BTC)


async def test_a_position_the_broker_no_longer_holds_is_untracked_not_sold(
    tmp_path: Path,
) -> None:
    rig = make_rig(tmp_path)
    rig.tracker.track(ETH, 2000.0, 1.0, T0_MS, {}, "unknown")
    rig.set_price(ETH, 1700.0)
    assert await rig.tracker.check_safety() == []
    assert not rig.tracker.is_tracked(ETH) and rig.exits == []


async def test_a_check_without_a_price_waits_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(tmp_path)
    rig.tracker.track(ETH, 2000.0, 1.0, T0_MS, {}, "unknown")
    with caplog.at_level(logging.WARNING, logger="tracker.tracker"):
        await rig.tracker.check_safety()
        await rig.tracker.check_safety()
    assert caplog.text.count("no price for ETH/USDT") == 1
    assert rig.tracker.is_tracked(ETH)


async def test_an_exit_fill_reaches_trades_csv_and_other_state_is_kept(tmp_path: Path) -> None:
    from core.events import Topic
    from runner.subscriptions import trades_row_writer
    from state.journal import CsvJournal
    from state.records import TRADE_COLUMNS

    rig = make_rig(tmp_path)
    rig.store.replace(extra={"learner": {"alpha": 1.0}})
    journal = CsvJournal(tmp_path / "trades.csv", TRADE_COLUMNS, fsync=False, clock=rig.clock)
    rig.bus.subscribe(Topic.ORDER_FILLED, trades_row_writer(journal), name="trades_journal")
    await rig.open_position(BTC, 100.0)
    rig.set_price(BTC, 80.0)
    (done,) = await rig.tracker.check_safety()
    journal.close()
    rows = (tmp_path / "trades.csv").read_text().splitlines()
    assert len(rows) == 3  # header, the BUY fill, the exit's SELL fill
    sell = dict(zip(TRADE_COLUMNS, rows[2].split(","), strict=True))
    assert sell["side"] == "sell" and sell["ticker"] == BTC
    assert sell["client_order_id"] == client_order_id(
        f"exit-stop_loss-{BTC}-{done.at_ms}", BTC, "SELL"
    )
    saved = RunnerState.model_validate_json(rig.state_path.read_bytes())
    assert saved.extra["learner"] == {"alpha": 1.0}
    assert dict(saved.extra["tracker"]["positions"]) == {}


async def test_a_rejected_exit_is_logged_and_retried_by_the_next_check(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = make_rig(tmp_path)
    await rig.open_position(BTC, 100.0)
    rig.set_price(BTC, 85.0)
    await rig.clock.advance(600)  # the paper broker refuses to sell on a 10-minute-old price
    with caplog.at_level(logging.ERROR, logger="tracker.tracker"):
        assert await rig.tracker.check_safety() == []
    assert "STOP LOSS for BTC/USDT not filled (rejected" in caplog.text
    assert rig.tracker.is_tracked(BTC) and rig.exits == []
    await rig.clock.advance(30)  # the next check: a new decision id, so a new order
    rig.set_price(BTC, 85.0)
    (done,) = await rig.tracker.check_safety()
    assert done.reason == "STOP LOSS" and not rig.tracker.is_tracked(BTC)


class SlowFillBroker(PaperBroker):
    """Reports exit SELLs as still open the first time; ``lookup`` then finds them filled."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.looked_up: list[str] = []
        self.sells: list[OrderIntent] = []

    async def execute_decisions(self, intents: Sequence[OrderIntent]) -> Sequence[OrderResult]:
        self.sells += [i for i in intents if i.action is Action.SELL]
        results = await super().execute_decisions(intents)
        return [r.model_copy(update={"status": "open"}) if r.side == "sell" else r for r in results]

    async def lookup(self, client_order_id: str) -> OrderResult | None:
        self.looked_up.append(client_order_id)
        return await super().lookup(client_order_id)


async def test_an_exit_order_still_open_is_followed_not_placed_again(tmp_path: Path) -> None:
    rig = make_rig(tmp_path, broker_factory=lambda clock, bus: SlowFillBroker(clock, bus=bus))
    broker = rig.broker
    assert isinstance(broker, SlowFillBroker)
    await rig.open_position(BTC, 100.0)
    rig.set_price(BTC, 89.0)
    assert await rig.tracker.check_safety() == []
    assert rig.tracker.is_exiting(BTC) and rig.exits == []
    (done,) = await rig.tracker.check_safety()
    assert done.reason == "STOP LOSS"
    (sell,) = broker.sells  # placed once, then followed
    assert broker.looked_up == [client_order_id(sell.decision_id, BTC, "SELL")]

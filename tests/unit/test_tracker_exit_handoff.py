"""The exit -> learner hand-off survives a kill anywhere between the exit's fill and its event, and
a BUY adopted after a kill keeps its entry's signals and regime.

A "kill" is a failpoint that raises a BaseException: nothing after it runs, and the next "run" is
built from the files alone (paper account, runner_state.json, outbox, learner model)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakes.log_records import tracebacks
from test_tracker_support import T0_MS

from broker.paper import PaperBroker
from broker.port import Action, OrderIntent
from broker.trading_state import TradingSwitch
from core.bus import EventBus
from core.clock import VirtualClock
from core.events import PositionExit, Topic
from learner.online import OnlineLearner
from runner.wiring import record_exit
from state.outbox import Outbox, OutboxEntry
from state.store import RunnerStateStore
from tracker.safety import ExitReason
from tracker.tracker import PositionTracker

BTC, ETH = "BTC/USDT", "ETH/USDT"
SIGNALS = {"rsi": 0.5, "momentum": 0.2}


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so no handler on the way catches it."""


def kill_at(point: str | None) -> Callable[[str], None]:
    def hit(name: str) -> None:
        if name == point:
            raise Killed(name)

    return hit


@dataclass
class Run:
    clock: VirtualClock
    broker: PaperBroker
    store: RunnerStateStore
    outbox: Outbox
    learner: OnlineLearner
    tracker: PositionTracker


def start(tmp_path: Path, point: str | None = None, *, attach: bool = True) -> Run:
    """One daemon run over the files in ``tmp_path`` (what a restart builds)."""
    clock, bus = VirtualClock(T0_MS), EventBus()
    broker = PaperBroker(clock, bus=bus, state_path=tmp_path / "paper_broker.json")
    store = RunnerStateStore(tmp_path / "runner_state.json", clock)
    store.load()
    outbox = Outbox(tmp_path / "outbox" / "exits.jsonl")
    outbox.load()
    learner = OnlineLearner(tmp_path / "online_learner.json")

    def learn(entry: OutboxEntry) -> None:
        learner.on_position_exit(PositionExit.model_validate(entry.payload), trade_id=entry.key)

    outbox.subscribe("learner", learn)
    outbox.deliver()  # what a previous run recorded and the learner did not take
    failpoint = kill_at(point)

    def price(ticker: str) -> float | None:
        mark = broker.mark(ticker)
        return None if mark is None else mark.price

    tracker = PositionTracker(
        clock,
        bus,
        broker,
        store,
        reviewer=None,
        price=price,
        regime=lambda _t: "regime_now",
        record_exit=lambda key, event: record_exit(outbox, key, event, failpoint),
        failpoint=failpoint,
    )
    if attach:
        bus.subscribe(Topic.POSITION_OPENED, tracker.on_position_opened, name="tracker")
    return Run(clock, broker, store, outbox, learner, tracker)


async def open_btc(run: Run, price: float = 100.0, *, ticker: str = BTC) -> None:
    intent = OrderIntent(
        decision_id=f"entry-{ticker}",
        ticker=ticker,
        action=Action.BUY,
        notional_usd=1_000.0,
        reference_price=price,
        position_pct=0.1,
        signal_weights=SIGNALS,
        regime="high_volatility",
    )
    await run.broker.execute_decisions([intent])
    await run.clock.advance(1)
    run.broker.on_market_price(ticker, price * 0.999, at_ms=run.clock.now_ms())
    assert ticker in run.broker.ledger.positions


@pytest.mark.parametrize(
    "point", ["after_exit_fill", "after_exit_outboxed", "after_exit_recorded", None]
)
async def test_an_exit_cut_anywhere_is_learned_exactly_once_after_restart(
    tmp_path: Path, point: str | None
) -> None:
    first = start(tmp_path, point)
    await open_btc(first)
    assert first.tracker.position(BTC) is not None
    first.broker.on_market_price(BTC, 90.0, at_ms=first.clock.now_ms())
    if point is None:
        await first.tracker.exit_position(BTC, ExitReason.STOP_LOSS)
    else:
        with pytest.raises(Killed):
            await first.tracker.exit_position(BTC, ExitReason.STOP_LOSS)
    assert not first.broker.ledger.positions  # the SELL filled and was saved

    second = start(tmp_path)
    await second.tracker.reconcile_with_broker()
    await second.tracker.check_safety()
    third = start(tmp_path)  # and a restart after that learns nothing more
    await third.tracker.reconcile_with_broker()
    await third.tracker.check_safety()

    (trade,) = third.learner.recent_trades()
    assert trade["signals"] == SIGNALS and trade["regime"] == "high_volatility"
    assert trade["pnl_pct"] < 0
    (entry,) = third.outbox.entries()
    assert third.outbox.pending("learner") == []
    assert entry.payload["reason"] == ExitReason.STOP_LOSS.value
    assert third.tracker.positions == {} and third.store.current.entry_prices == {}


async def test_a_buy_adopted_after_a_kill_keeps_its_signals_and_regime(tmp_path: Path) -> None:
    first = start(tmp_path, attach=False)  # the kill fell between the fill and the tracking
    await open_btc(first)
    assert first.tracker.position(BTC) is None
    second = start(tmp_path)
    await second.tracker.reconcile_with_broker()
    adopted = second.tracker.position(BTC)
    assert adopted is not None
    assert adopted.signals == SIGNALS and adopted.regime == "high_volatility"


async def test_the_entry_regime_comes_from_the_decision_not_the_fill_time(tmp_path: Path) -> None:
    run = start(tmp_path)
    await open_btc(run)
    position = run.tracker.position(BTC)
    assert position is not None and position.regime == "high_volatility"


async def test_an_exit_the_outbox_cannot_record_halts_once_and_is_recorded_when_it_frees(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An outbox that cannot be appended to (a link to ``/dev/full`` in its place, never
    followed: every append is ELOOP, as a full disk's is ENOSPC) fails the record of a filled
    exit. The exit stays in flight, so each check looks it up and tries the record again, with
    no traceback per check; the other positions' stops still run; trading halts (a sold position
    still tracked must not be bought again meanwhile); and once the link goes, the exits reach
    the outbox and the learner, each once."""
    run = start(tmp_path)
    run.tracker._trading = switch = TradingSwitch(run.clock, run.store, lambda _line: None)
    await open_btc(run)
    await open_btc(run, ticker=ETH)
    assert set(run.tracker.positions) == {BTC, ETH}
    run.outbox.path.symlink_to("/dev/full")

    loop = asyncio.create_task(run.tracker.run())
    run.broker.on_market_price(BTC, 90.0, at_ms=run.clock.now_ms())
    run.broker.on_market_price(ETH, 90.0, at_ms=run.clock.now_ms())
    await run.clock.advance(300.0)

    assert not loop.done() and not run.broker.ledger.positions  # both stops sold
    assert set(run.tracker.positions) == {BTC, ETH} and run.tracker.is_exiting(ETH)
    assert switch.halted and "could not be recorded" in switch.state.reason
    assert len(tracebacks(caplog)) == 1

    run.outbox.path.unlink()
    await run.clock.advance(30.0)
    assert run.tracker.positions == {} and not loop.done()
    assert sorted(e.payload["ticker"] for e in run.outbox.entries()) == [BTC, ETH]
    assert len(run.learner.recent_trades()) == 2
    assert "recorded again" in caplog.text
    loop.cancel()


async def test_a_cursor_that_cannot_be_saved_costs_no_exit_and_no_halt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The learner took the exit, but its cursor cannot be written (a folder in its place, as a
    full disk). The exit is recorded and learned: the cursor moves on in memory (a restart
    before it is saved delivers the exit again, which the learner knows by its key), so the
    position is untracked and trading goes on; one line says so, and the next ack writes it."""
    run = start(tmp_path)
    run.tracker._trading = switch = TradingSwitch(run.clock, run.store, lambda _line: None)
    cursor = run.outbox.path.with_name("exits.jsonl.learner.ack")
    cursor.mkdir()
    await open_btc(run)
    run.broker.on_market_price(BTC, 90.0, at_ms=run.clock.now_ms())
    assert await run.tracker.exit_position(BTC, ExitReason.STOP_LOSS) is not None

    assert run.tracker.positions == {} and not switch.halted
    assert len(run.learner.recent_trades()) == 1 and run.outbox.pending("learner") == []
    (said,) = [r for r in caplog.records if "cursor" in r.getMessage()]
    assert "IsADirectoryError" in said.getMessage() or "Is a directory" in said.getMessage()

    cursor.rmdir()
    await open_btc(run, ticker=ETH)
    run.broker.on_market_price(ETH, 90.0, at_ms=run.clock.now_ms())
    await run.tracker.exit_position(ETH, ExitReason.STOP_LOSS)
    assert cursor.read_text() == "2\n" and "saved again" in caplog.records[-1].getMessage()

"""Trading state ACTIVE / HALTED: a ``HaltTradingError`` halts trading (journaled and persisted), no
entries while halted (exits and stops still run), a restart stays halted, a person resumes with
``vigil trading resume`` or by editing runner_state.json while the daemon runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from test_decision_routine import FakeBroker, Rig
from test_tracker_support import BTC, make_rig

from agent.decision import AgentDecision, TradeDecision
from agent.risk import RiskContext
from broker.port import Action, OrderIntent, OrderResult, PositionDetail
from broker.trading_state import TradingSwitch
from core.clock import VirtualClock
from core.errors import HaltTradingError
from runner.cli import main
from state.store import RunnerStateStore
from tracker.ports import ReviewAction

T0_MS = 1_740_787_200_000


class _Journal:
    def __init__(self) -> None:
        self.lines: list[Mapping[str, Any]] = []

    def append(self, record: Mapping[str, Any]) -> None:
        self.lines.append(record)

    def trading_lines(self) -> list[Mapping[str, Any]]:
        return [line for line in self.lines if line["type"] == "trading_state"]


def _switch(tmp_path: Path, clock: VirtualClock | None = None) -> tuple[TradingSwitch, _Journal]:
    store = RunnerStateStore(tmp_path / "runner_state.json", clock or VirtualClock(T0_MS))
    store.load()
    journal = _Journal()
    return TradingSwitch(clock or VirtualClock(T0_MS), store, journal.append), journal


def _mode(switch: TradingSwitch) -> str:
    return switch.state.mode  # a call: mypy would keep the narrowing of an earlier assert


def _on_disk(tmp_path: Path) -> dict[str, Any]:
    trading: dict[str, Any] = json.loads((tmp_path / "runner_state.json").read_text())["trading"]
    return trading


class _HaltingBroker(FakeBroker):
    async def execute_decisions(self, intents: Sequence[OrderIntent]) -> Sequence[OrderResult]:
        raise HaltTradingError("paper broker could not save its state: disk full")


BUY_AND_SELL = AgentDecision(
    decisions=(
        TradeDecision(ticker="SOL/USDT", action=Action.BUY, position_pct=0.1),
        TradeDecision(ticker="ETH/USDT", action=Action.SELL),
    ),
    decided_by="fallback",
)


async def test_a_halt_error_in_a_decision_halts_trading_journals_and_persists_it(
    tmp_path: Path,
) -> None:
    rig = Rig(BUY_AND_SELL, broker=_HaltingBroker())
    switch, journal = _switch(tmp_path)
    rig.routine._trading = switch
    record = await rig.routine.decide_once(["agent_timer"])

    assert "HaltTradingError" in record["error"] and record["trading"] == "halted"
    assert switch.halted and "disk full" in switch.state.reason
    (line,) = journal.trading_lines()
    assert line["mode"] == "halted" and line["previous"] == "active" and line["by"] == "daemon"
    assert _on_disk(tmp_path)["mode"] == "halted"  # saved at once: a restart stays halted
    assert switch.status().startswith("HALTED(decision ")

    # a restart reads it back and stays halted
    restarted, _ = _switch(tmp_path)
    assert restarted.halted and restarted.state.reason == switch.state.reason


async def test_while_halted_entries_are_held_and_exits_still_go_out(tmp_path: Path) -> None:
    rig = Rig(BUY_AND_SELL)
    switch, _ = _switch(tmp_path)
    switch.halt("broker disagreement")
    rig.routine._trading = switch
    rig.routine._risk_context = lambda _snapshot: RiskContext(
        whitelist=("SOL/USDT", "ETH/USDT"),
        portfolio_value_usd=10_000.0,
        cash_usd=9_500.0,
        position_notional_usd={"ETH/USDT": 500.0},
        prices={"SOL/USDT": 150.0, "ETH/USDT": 3_000.0},
    )
    record = await rig.routine.decide_once(["agent_timer"])

    assert [(i.ticker, i.action) for i in rig.broker.executed] == [("ETH/USDT", Action.SELL)]
    assert record["skipped"] == [
        {"ticker": "SOL/USDT", "action": "BUY", "reason": "trading halted: broker disagreement"}
    ]
    switch.resume(by="test")
    await rig.routine.decide_once(["agent_timer"])
    assert ("SOL/USDT", Action.BUY) in [(i.ticker, i.action) for i in rig.broker.executed]


async def test_the_tracker_halts_on_a_halt_error_and_adds_nothing_while_halted(
    tmp_path: Path,
) -> None:
    rig = make_rig(tmp_path, reviewer=_AddEverything())
    switch = TradingSwitch(rig.clock, rig.store, _Journal().append)
    rig.tracker._trading = switch
    await rig.open_position(BTC, 100.0)

    real_positions = rig.broker.get_positions_detail

    async def short_on_the_exchange() -> list[PositionDetail]:
        raise HaltTradingError("short position of -1 BTC/USDT on the exchange")

    rig.broker.get_positions_detail = short_on_the_exchange  # type: ignore[method-assign]
    loop = asyncio.create_task(rig.tracker.run())
    await rig.clock.advance(1)
    assert switch.halted and "short position" in switch.state.reason

    rig.broker.get_positions_detail = real_positions  # type: ignore[method-assign]
    await rig.tracker.review_positions()
    assert rig.broker.open_orders() == []  # no ADD while halted
    rig.set_price(BTC, 90.0)  # below the stop loss: the exit still runs
    await rig.tracker.check_safety()
    assert [e.ticker for e in rig.exits] == [BTC]
    loop.cancel()


class _AddEverything:
    async def review(self, positions: Sequence[Any], context: Mapping[str, object]) -> list[Any]:
        from tracker.ports import ReviewVerdict

        return [
            ReviewVerdict(ticker=p.ticker, action=ReviewAction.ADD, reason="x", decided_by="claude")
            for p in positions
        ]


def test_a_person_resumes_with_the_cli_and_the_running_daemon_journals_it(
    tmp_path: Path, capsys: Any
) -> None:
    clock = VirtualClock(T0_MS)
    store = RunnerStateStore(tmp_path / "runner_state.json", clock)
    store.load()
    journal = _Journal()
    switch = TradingSwitch(clock, store, journal.append)
    switch.halt("unknown order status 'WEIRD'")

    assert main(["--state-dir", str(tmp_path), "trading", "status"]) == 1
    assert "HALTED" in capsys.readouterr().out
    assert main(["--state-dir", str(tmp_path), "trading", "resume"]) == 0

    store.poll()  # the daemon's state watch...
    switch.observe()  # ...and what runs after each poll
    assert _mode(switch) == "active"
    resumed = journal.trading_lines()[-1]
    assert resumed["mode"] == "active" and resumed["by"] == "cli"
    assert resumed["previous"] == "halted"

    assert main(["--state-dir", str(tmp_path), "trading", "halt", "--reason", "audit"]) == 0
    store.poll()
    switch.observe()
    assert _mode(switch) == "halted" and switch.state.reason == "audit"
    assert len(journal.trading_lines()) == 3


def test_a_hand_edit_of_the_mode_is_merged_stamped_and_journaled(tmp_path: Path) -> None:
    switch, journal = _switch(tmp_path)
    switch.halt("broker disagreement")
    path = tmp_path / "runner_state.json"
    edited = json.loads(path.read_text())
    edited["trading"]["mode"] = "active"
    path.write_text(json.dumps(edited))
    switch._store.poll()  # type: ignore[attr-defined]
    switch.observe()
    assert not switch.halted
    line = journal.trading_lines()[-1]
    assert line["mode"] == "active" and line["by"] == "state edit"


def test_the_daemons_own_reason_is_written_as_one_line_and_cut_never_refused(
    tmp_path: Path,
) -> None:
    """An error's message may hold line breaks or run long: before, over 2,000 characters the
    halt itself raised (a ValidationError), and a line break went into the log as a new line."""
    switch, journal = _switch(tmp_path)
    assert switch.halt("loop market: HaltTradingError: first\nsecond\x00" + "x" * 3000)
    reason = switch.state.reason
    assert reason.startswith("loop market: HaltTradingError: first\\nsecond\\x00xxx")
    assert len(reason) == 2000 and "\n" not in reason
    assert _on_disk(tmp_path)["reason"] == reason == journal.trading_lines()[-1]["reason"]


@pytest.mark.parametrize("blocked", ["runner_state.json", "runner_state.last-good.json"])
async def test_a_runner_state_that_cannot_be_saved_halts_trading_and_the_decision_completes(
    tmp_path: Path, blocked: str
) -> None:
    """The decision's save of runner_state.json fails (a folder stands in the file's place, or in
    its copy's, which fails the write as a full disk does): the orders already went out, so the
    decision is not a failure; it reaches the memory write-back and ``decision.made`` as ever,
    and trading halts, since what the tracker keeps of each position there could be lost. The
    state is saved once the path is a file's again."""
    rig = Rig(BUY_AND_SELL.model_copy(update={"memory_update": "SOL looked strong."}))
    switch, _ = _switch(tmp_path)
    rig.routine._trading = switch
    rig.routine._store = switch._store  # type: ignore[assignment]
    switch._store.save()
    (tmp_path / blocked).unlink()
    (tmp_path / blocked).mkdir()

    record = await rig.routine.decide_once(["agent_timer"])

    assert "error" not in record and "IsADirectoryError" in record["state_error"]
    assert [d.decision_id for d in rig.made] == [record["decision_id"]]
    assert switch.halted and "could not be saved" in switch.state.reason
    assert record["trading"] == "halted"

    (tmp_path / blocked).rmdir()
    await rig.routine.decide_once(["agent_timer"])
    assert _on_disk(tmp_path)["mode"] == "halted"
    saved = json.loads((tmp_path / "runner_state.json").read_text())
    assert saved["agent_memory"] == "SOL looked strong."


async def test_tracker_state_that_cannot_be_saved_halts_trading_with_one_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each new trailing high is saved at once; while runner_state.json cannot be written (a
    folder in its place, as a full disk) the first failure is logged with its traceback and
    halts trading (a crash would lose the trailing high and any exit in flight), the later ones
    add no traceback per check, and the save works again by itself once the path is free."""
    rig = make_rig(tmp_path)
    switch = TradingSwitch(rig.clock, rig.store, _Journal().append)
    rig.tracker._trading = switch
    await rig.open_position(BTC, 100.0)
    rig.state_path.unlink()
    rig.state_path.mkdir()

    for price in (101.0, 102.0, 103.0, 104.0):
        rig.set_price(BTC, price)
        await rig.tracker.check_safety()

    assert switch.halted and "runner_state.json" in switch.state.reason
    tracebacks = [r for r in caplog.records if r.exc_info and r.name == "tracker.tracker"]
    assert len(tracebacks) == 1

    rig.state_path.rmdir()
    rig.set_price(BTC, 105.0)
    await rig.tracker.check_safety()
    saved = json.loads(rig.state_path.read_text())
    assert saved["trailing_highs"] == {BTC: 105.0} and saved["trading"]["mode"] == "halted"
    assert "saved again" in caplog.records[-1].getMessage()

"""The composition root builds the whole daemon without connecting anything: live and simulator."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from pathlib import Path

import pytest

from core.errors import RefuseToStartError
from core.scaled_clock import ScaledClock
from market.listener import MarketListener
from memory.context_config import ContextConfig
from runner.app import build_daemon
from runner.config import MarketConfig, Settings


async def test_live_daemon_wires_every_loop_and_public_binance_urls(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", market=MarketConfig(source="binance"))
    daemon = await build_daemon(settings)
    try:
        assert list(daemon.supervisor.status) == [
            "market",
            "derivatives",
            "liquidations",
            "decisions",
            "tracker",
            "bus",
            "state_watch",
            "api",  # the operator's API (api/), after the trading loops
            "api_runs",  # the replays asked through POST /api/runs (child processes)
            "watchdog",
            "heartbeat",
        ]
        # their child processes' graces run beside the trading loops' stops, not after them
        early = [spec.name for spec in daemon.supervisor.loops if spec.stop_early]
        assert early == ["api", "api_runs"]
        assert daemon.sim is None
        listener = daemon.market.ticks
        assert isinstance(listener, MarketListener)
        assert listener.url.startswith(
            "wss://fstream.binance.com/market/stream?streams=btcusdt@kline_15m/"
        )
        liquidations = daemon.decision.liquidations
        assert liquidations is not None
        assert liquidations.url == (
            "wss://fstream.binance.com/market/stream?streams="
            "btcusdt@forceOrder/ethusdt@forceOrder/solusdt@forceOrder"
        )
        assert "fapi.binance.com" in str(daemon.market.exchange.urls["api"])
        assert not daemon.decision.agents.decider.enabled  # no key: the fallback decides
    finally:
        await daemon.market.exchange.close()


async def test_sim_daemon_has_no_liquidation_stream(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", market=MarketConfig(source="sim"))
    daemon = await build_daemon(settings)
    try:
        assert daemon.decision.liquidations is None
        assert "liquidations" not in daemon.supervisor.status
        assert daemon.sim is not None
        listener = daemon.market.ticks
        assert isinstance(listener, MarketListener)
        assert listener.url.startswith(daemon.sim.ws_base_url)
    finally:
        await daemon.market.exchange.close()
        await daemon.sim.stop()


async def _refuses_connections(url: str) -> bool:
    host, port = re.fullmatch(r"\w+://([\d.]+):(\d+).*", url).groups()  # type: ignore[union-attr]
    try:
        _, writer = await asyncio.open_connection(host, int(port))
    except ConnectionRefusedError:
        return True
    writer.close()
    return False


async def test_a_refused_start_stops_the_simulator_it_had_started(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The organisation policy is read after the simulator is up; its refusal used to leave the
    simulator's servers listening and its stall watch running until the process exited."""
    settings = Settings(
        state_dir=tmp_path / "state",
        market=MarketConfig(source="sim"),
        context=ContextConfig(organisation_path=tmp_path / "no-such-folder"),
    )
    with (
        caplog.at_level(logging.INFO, logger="runner.sim_boot"),
        pytest.raises(RefuseToStartError, match="organisation_path"),
    ):
        await build_daemon(settings)
    started = next(r for r in caplog.records if r.getMessage().startswith("simulator on "))
    assert isinstance(started.args, tuple)
    ws_url, rest_url = str(started.args[0]), str(started.args[1])
    assert await _refuses_connections(ws_url) and await _refuses_connections(rest_url)
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "sim clock stalls"]


async def test_sim_daemon_leaves_process_stalls_out_of_simulated_time(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path / "state", market=MarketConfig(source="sim"))
    daemon = await build_daemon(settings)
    watch = next(t for t in asyncio.all_tasks() if t.get_name() == "sim clock stalls")
    try:
        assert isinstance(daemon.clock, ScaledClock)
        await asyncio.sleep(0)  # the watch has begun
        assert daemon.clock.stall_cap_secs is not None and not watch.done()
    finally:
        watch.cancel()
        await daemon.market.exchange.close()
        assert daemon.sim is not None
        await daemon.sim.stop()
    with contextlib.suppress(asyncio.CancelledError):
        await watch
    assert daemon.clock.stall_cap_secs is None


async def test_every_bus_subscription_is_a_row_of_the_one_table_in_order(tmp_path: Path) -> None:
    """No domain object subscribes itself: the bus holds exactly the table's rows, and within a
    topic the order that correctness rests on (tick path before the watchdog; the trades journal
    before the failpoint that kills the daemon after it). The learner is fed by the exits outbox,
    not the bus."""
    settings = Settings(state_dir=tmp_path / "state", market=MarketConfig(source="binance"))
    daemon = await build_daemon(settings)
    try:
        assert list(daemon.bus.stats()) == [
            "market.tick:tick_path",
            "market.tick:watchdog",
            "market.tick:api_freshness",  # the operator's rows come after the daemon's own
            "decision.requested:decision_requests",
            "market.candle_closed:regime_pending",
            "market.candle_closed:log_candle_close",
            "position.opened:tracker",
            "position.opened:memory_entries",
            "order.filled:trades_journal",
            "order.filled:failpoint",
            "order.filled:memory_fees",
            "order.filled:metrics",
            "decision.made:memory_decisions",
            "position.exit:memory_outbox",  # the memory's durable row before the kill point
            "position.exit:failpoint",
            "position.exit:metrics",
            "agent.failure:agent_failure_journal",
            "market.candle_closed:history_and_regime",
            "position.exit:memory_writer",  # one coalescing wake-up drains the memory outbox
            "decision.made:memory_writer",
        ]
    finally:
        await daemon.market.exchange.close()

"""The composition root builds the whole daemon without connecting anything: live and simulator."""

from __future__ import annotations

from pathlib import Path

from market.listener import MarketListener
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
            "watchdog",
            "heartbeat",
        ]
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

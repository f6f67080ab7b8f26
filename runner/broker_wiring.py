"""Builds the broker the settings ask for: the paper broker (default) or the ccxt broker.

The ccxt broker trades on Binance demo trading unless live is asked for twice (``--live`` and
``VIGIL_LIVE_CONFIRM=yes``); against the simulator it uses the simulator's order endpoints and test
keys. Its positions and open orders are reconciled with the exchange before any trading.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from broker.live_guard import ApiKeys, check_live
from broker.paper import PaperBroker
from broker.port import Broker
from core.bus import EventBus
from core.clock import Clock
from core.errors import RefuseToStartError
from runner.config import Settings
from runner.crypto_runner import PriceSink

log = logging.getLogger(__name__)


@dataclass
class BrokerParts:
    broker: Broker
    price_sinks: list[PriceSink] = field(default_factory=list)
    equity: Callable[[], str] = lambda: "n/a"
    start: Callable[[], Awaitable[object]] | None = None  # run before trading (reconcile)
    close: Callable[[], Awaitable[None]] | None = None


def build_broker(
    settings: Settings, clock: Clock, bus: EventBus, *, live: bool, sim_rest_url: str | None
) -> BrokerParts:
    if settings.broker.kind == "paper":
        if live:
            raise RefuseToStartError('--live needs broker.kind = "ccxt" (VIGIL_BROKER__KIND=ccxt)')
        return _paper(settings, clock, bus)
    return _ccxt(settings, clock, bus, live=live, sim_rest_url=sim_rest_url)


def make_paper_broker(
    settings: Settings,
    clock: Clock,
    *,
    bus: EventBus | None = None,
    state_path: Path | None = None,
) -> PaperBroker:
    """A paper broker on the configured terms (no ``state_path``: a fresh, unsaved account). Its
    saves are fsynced when the journals are (a replay's are not: it is rerun, not recovered)."""
    terms = settings.broker
    return PaperBroker(
        clock,
        starting_cash_usd=terms.starting_cash_usd,
        maker_fee_pct=terms.maker_fee_pct,
        taker_fee_pct=terms.taker_fee_pct,
        slippage_pct=terms.slippage_pct,
        limit_ttl_secs=terms.limit_ttl_secs,
        state_path=state_path,
        durable=settings.state.fsync_journals,
        bus=bus,
    )


def _paper(settings: Settings, clock: Clock, bus: EventBus) -> BrokerParts:
    paper = make_paper_broker(
        settings, clock, bus=bus, state_path=settings.state_dir / "paper_broker.json"
    )

    async def save_marks() -> None:
        paper.save()

    async def start() -> object:
        return paper.announce_recorded_fills()  # the trades journal keeps the ones it lacks

    return BrokerParts(
        broker=paper,
        price_sinks=[paper.on_market_tick],
        equity=lambda: f"{float(paper.portfolio_value_usd()):,.2f}",
        start=start,
        close=save_marks,
    )


def _ccxt(
    settings: Settings, clock: Clock, bus: EventBus, *, live: bool, sim_rest_url: str | None
) -> BrokerParts:
    # ccxt (~4 s of imports) loads with the ccxt broker only, not with every daemon
    from broker.ccxt_broker import CcxtBroker, build_exchange

    if sim_rest_url is not None:
        if live:
            raise RefuseToStartError("--live cannot be combined with --sim")
        from sim.orders import TEST_API_KEY, TEST_API_SECRET

        keys = ApiKeys(api_key=SecretStr(TEST_API_KEY), api_secret=SecretStr(TEST_API_SECRET))
        mode = check_live(False, os.environ)
    else:
        mode = check_live(live, os.environ)
        if settings.binance_api_key is None or settings.binance_api_secret is None:
            raise RefuseToStartError(
                "broker.kind = ccxt needs BINANCE_API_KEY and BINANCE_API_SECRET "
                "(environment or secret files)"
            )
        keys = ApiKeys(api_key=settings.binance_api_key, api_secret=settings.binance_api_secret)
    exchange = build_exchange(mode, keys, rest_url=sim_rest_url)
    if sim_rest_url is not None:
        # ccxt stamps signed requests with its own wall clock; the simulator checks them against
        # simulated time (recvWindow), so against the sim ccxt must read the daemon's clock.
        exchange.milliseconds = clock.now_ms
        # 60 s is Binance's largest recvWindow; at N x speed it is 60/N real seconds of slack
        exchange.options["recvWindow"] = 60_000
    broker = CcxtBroker(
        exchange,
        clock,
        settings.state_dir / "orders.jsonl",
        tickers=settings.market.tickers,
        bus=bus,  # the broker announces its own fills, as the paper broker does
        maker_fee_pct=float(settings.broker.maker_fee_pct),
        taker_fee_pct=float(settings.broker.taker_fee_pct),
    )
    where = "the simulator" if sim_rest_url else ("LIVE Binance" if mode == "live" else "demo")
    log.log(logging.WARNING if mode == "live" else logging.INFO, "ccxt broker trading on %s", where)

    async def start() -> object:
        try:
            report = await broker.reconcile()
        except Exception as exc:
            raise RefuseToStartError(
                f"could not reconcile positions and open orders with the exchange before trading "
                f"({type(exc).__name__}: {exc}); nothing was traded"
            ) from exc
        log.info("ccxt broker reconciled with the exchange: %s", report)
        broker.announce_recorded_fills()  # the trades journal keeps the ones it lacks
        return report

    return BrokerParts(broker=broker, start=start, close=broker.close)

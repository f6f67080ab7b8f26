"""Builds the monitor's ``ContextField`` s from ``DerivativesConfig``: one ``CachedSource`` each.

Called by the composition root (nothing connects here: the ccxt client opens its session on the
first request, the aiohttp ones per request). ``exchange`` is a ccxt ``binanceusdm`` from
``market.ccxt_client.make_binanceusdm`` (pointed at the simulator or at Binance).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from derivatives.binance import BinanceDerivatives
from derivatives.cache import CachedSource
from derivatives.config import DerivativesConfig, SourceTiming
from derivatives.liquidations import LiquidationWindow, fetch_liquidations
from derivatives.monitor import ContextField
from derivatives.web_sources import (
    EtfFlowProvider,
    fetch_etf_flow,
    fetch_fear_greed,
    fetch_stablecoin_supply,
    fetch_trending,
)
from runner.clock import Clock


def build_context_fields(
    config: DerivativesConfig,
    clock: Clock,
    tickers: Sequence[str],
    exchange: Any,
    *,
    liquidations: LiquidationWindow | None = None,
    etf_provider: EtfFlowProvider | None = None,
) -> list[ContextField]:
    binance = BinanceDerivatives(exchange, tickers)

    def cached(
        name: str, fetch: Callable[[], Awaitable[Any]], timing: SourceTiming
    ) -> CachedSource[Any]:
        return CachedSource(name, fetch, clock, timing.policy())

    c = config
    return [
        ContextField(
            "funding_rates",
            cached("funding (premiumIndex)", binance.fetch_funding_rates, c.funding),
        ),
        ContextField(
            "open_interest", cached("open interest", binance.fetch_open_interest, c.open_interest)
        ),
        ContextField(
            "taker_delta", cached("taker buy/sell ratio", binance.fetch_taker_delta, c.taker_delta)
        ),
        ContextField(
            "long_short_ratio",
            cached("top-trader long/short", binance.fetch_long_short, c.long_short),
        ),
        ContextField("basis", cached("basis", binance.fetch_basis, c.basis)),
        ContextField(
            "liquidations",
            cached(
                "liquidations",
                lambda: fetch_liquidations(liquidations, clock.now_ms()),
                c.liquidations,
            ),
        ),
        ContextField(
            "stablecoin_supply",
            cached(
                "stablecoin supply",
                lambda: fetch_stablecoin_supply(c.defillama_base_url),
                c.stablecoin_supply,
            ),
        ),
        ContextField(
            "fear_greed",
            cached("Fear & Greed", lambda: fetch_fear_greed(c.fng_base_url), c.fear_greed),
        ),
        ContextField(
            "news_summary",
            cached("trending coins", lambda: fetch_trending(c.coingecko_base_url), c.trending),
        ),
        ContextField(
            "etf_flow", cached("BTC ETF flow", lambda: fetch_etf_flow(etf_provider), c.etf_flow)
        ),
    ]


__all__ = ["build_context_fields"]

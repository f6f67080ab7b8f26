"""Builds the monitor's ``ContextField`` s from ``DerivativesConfig``: one ``CachedSource`` each.

Called by the composition root (nothing connects here: the ccxt client opens its session on the
first request, the aiohttp ones per request). ``exchange`` is a ccxt ``binanceusdm`` from
``market.ccxt_client.make_binanceusdm`` (pointed at the simulator or at Binance).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from core.clock import Clock
from derivatives.binance import BinanceDerivatives
from derivatives.cache import CachedSource, CachePolicy
from derivatives.config import DerivativesConfig, SourceTiming
from derivatives.etf_flow import fetch_etf_flow
from derivatives.hedge import fetch_paxg
from derivatives.liquidations import LiquidationWindow, fetch_liquidations
from derivatives.monitor import ContextField
from derivatives.web_sources import (
    fetch_fear_greed,
    fetch_stablecoin_supply,
    fetch_trending,
)

Fetch = Callable[[], Awaitable[Any]]


def context_sources(config: DerivativesConfig) -> tuple[tuple[str, str, SourceTiming], ...]:
    """(snapshot field, source name, timing) of every context field, in the snapshot's order:
    the one table the live and the recorded builders share."""
    c = config
    return (
        ("funding_rates", "funding (premiumIndex)", c.funding),
        ("open_interest", "open interest", c.open_interest),
        ("taker_delta", "taker buy/sell ratio", c.taker_delta),
        ("long_short_ratio", "top-trader long/short", c.long_short),
        ("basis", "basis", c.basis),
        ("liquidations", "liquidations", c.liquidations),
        ("stablecoin_supply", "stablecoin supply", c.stablecoin_supply),
        ("fear_greed", "Fear & Greed", c.fear_greed),
        ("news_summary", "trending coins", c.trending),
        ("etf_flow", "BTC ETF flow", c.etf_flow),
        ("paxg", "PAXG (gold hedge)", c.paxg),
    )


def cached_fields(
    config: DerivativesConfig,
    clock: Clock,
    fetch_for: Callable[[str, str], Fetch],
    *,
    in_process: bool = False,
    rand: Callable[[], float] = random.random,
) -> list[ContextField]:
    """One ``CachedSource`` per context field; ``fetch_for(field, source_name)`` gives its fetch.
    ``in_process``: the fetches read a recording, so they get no timeout. ``rand``: the jitter of
    every source's backoff after a failed fetch."""

    def policy(timing: SourceTiming) -> CachePolicy:
        return replace(timing.policy(), timeout_secs=None) if in_process else timing.policy()

    return [
        ContextField(
            field, CachedSource(name, fetch_for(field, name), clock, policy(timing), rand=rand)
        )
        for field, name, timing in context_sources(config)
    ]


def build_context_fields(
    config: DerivativesConfig,
    clock: Clock,
    tickers: Sequence[str],
    exchange: Any,
    *,
    liquidations: LiquidationWindow | None = None,
    rand: Callable[[], float] = random.random,
) -> list[ContextField]:
    binance = BinanceDerivatives(exchange, tickers, now_ms=clock.now_ms)
    c = config
    fetches: dict[str, Fetch] = {
        "funding_rates": binance.fetch_funding_rates,
        "open_interest": binance.fetch_open_interest,
        "taker_delta": binance.fetch_taker_delta,
        "long_short_ratio": binance.fetch_long_short,
        "basis": binance.fetch_basis,
        "liquidations": lambda: fetch_liquidations(liquidations, clock.now_ms()),
        "stablecoin_supply": lambda: fetch_stablecoin_supply(c.defillama_base_url),
        "fear_greed": lambda: fetch_fear_greed(c.fng_base_url, clock.now_ms()),
        "news_summary": lambda: fetch_trending(c.coingecko_base_url),
        "etf_flow": lambda: fetch_etf_flow(c.etf_flow_url, clock.now_ms()),
        "paxg": lambda: fetch_paxg(c.binance_spot_url, clock.now_ms()),
    }
    return cached_fields(config, clock, lambda field, _name: fetches[field], rand=rand)


__all__ = ["Fetch", "build_context_fields", "cached_fields", "context_sources"]

"""Replay's context fields: ``build_context_fields``'s fields, filled from the recording in-process.

The same field names, in the same order, each a ``CachedSource`` with the live builder's name and
timing policy, so the monitor, the snapshot and their reasons behave as live:

- ``funding_rates``: the live parser, ``BinanceDerivatives.fetch_funding_rates``, over
  ``sim.inprocess.RecordedPremiumIndex`` (the simulator's premiumIndex payload at the clock's now);
- ``fear_greed``: the recorded index's /fng/ answer at now (``FearGreedBook``, what the simulator
  serves), read by the live parser ``fear_greed_from_payload``;
- every other field is not in the recording (only OHLCV, funding and Fear & Greed were recorded):
  unavailable with ``NOT_RECORDED`` as the reason, never an invented number.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from derivatives.binance import BinanceDerivatives
from derivatives.cache import CachedSource, SourceNotAvailableError
from derivatives.config import DerivativesConfig, SourceTiming
from derivatives.monitor import ContextField
from derivatives.web_sources import fear_greed_from_payload
from runner.clock import Clock
from sim.feed import SimFeed
from sim.inprocess import RecordedPremiumIndex
from sim.rest_payloads import FearGreedBook

NOT_RECORDED: Final = "not in the recording: it holds OHLCV, funding and Fear & Greed only"
FNG_WHAT: Final = "Fear & Greed (recorded alternative.me index)"


def _not_recorded(what: str) -> Callable[[], Awaitable[Any]]:
    async def fetch() -> Any:
        raise SourceNotAvailableError(f"{what}: {NOT_RECORDED}")

    return fetch


def build_recorded_context_fields(
    config: DerivativesConfig,
    clock: Clock,
    tickers: Sequence[str],
    feed: SimFeed,
    fear_greed: FearGreedBook,
) -> list[ContextField]:
    binance = BinanceDerivatives(RecordedPremiumIndex(feed, clock), tickers)

    def cached(
        name: str, fetch: Callable[[], Awaitable[Any]], timing: SourceTiming
    ) -> CachedSource[Any]:
        return CachedSource(name, fetch, clock, timing.policy())

    def missing(field: str, name: str, timing: SourceTiming) -> ContextField:
        return ContextField(field, cached(name, _not_recorded(name), timing))

    async def fear_greed_now() -> dict[str, Any]:
        payload = fear_greed.answer({"limit": "1"}, clock.now_ms() // 1000)
        return fear_greed_from_payload(payload, what=FNG_WHAT)

    c = config
    return [
        ContextField(
            "funding_rates",
            cached("funding (premiumIndex)", binance.fetch_funding_rates, c.funding),
        ),
        missing("open_interest", "open interest", c.open_interest),
        missing("taker_delta", "taker buy/sell ratio", c.taker_delta),
        missing("long_short_ratio", "top-trader long/short", c.long_short),
        missing("basis", "basis", c.basis),
        missing("liquidations", "liquidations", c.liquidations),
        missing("stablecoin_supply", "stablecoin supply", c.stablecoin_supply),
        ContextField("fear_greed", cached("Fear & Greed", fear_greed_now, c.fear_greed)),
        missing("news_summary", "trending coins", c.trending),
        missing("etf_flow", "BTC ETF flow", c.etf_flow),
    ]


__all__ = ["FNG_WHAT", "NOT_RECORDED", "build_recorded_context_fields"]

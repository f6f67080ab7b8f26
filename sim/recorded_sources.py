"""Replay's context fields: ``build_context_fields``'s fields, filled from the recording in-process.

The same field names, in the same order, each a ``CachedSource`` with the live builder's name and
timing policy, so the monitor, the snapshot and their reasons behave as live:

- ``funding_rates``: the live parser, ``BinanceDerivatives.fetch_funding_rates``, over
  ``sim.inprocess.RecordedPremiumIndex`` (the simulator's premiumIndex payload at the clock's now);
- ``fear_greed``: the recorded index's /fng/ answer at now (``FearGreedBook``, what the simulator
  serves), read by the live parser ``fear_greed_from_payload``;
- ``paxg`` (the gold hedge): the recorded PAXGUSDT spot klines closed at now
  (``sim.recorded_spot``, what the simulator's /api/v3/klines serves), read by the live parser
  ``derivatives.hedge.paxg_from_klines``; outside the recording it is unavailable;
- a data dir without the funding, Fear & Greed or PAXG files has those fields unavailable with
  ``NOT_IN_DATA_DIR`` and the missing file named;
- every other field is not in the recording (only OHLCV, funding, Fear & Greed and PAXG spot
  were recorded): unavailable with ``NOT_RECORDED`` as the reason, never an invented number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from core.clock import Clock
from derivatives.binance import BinanceDerivatives
from derivatives.cache import SourceNotAvailableError
from derivatives.config import DerivativesConfig
from derivatives.hedge import KLINES_ASKED, PAXG_SYMBOL, paxg_from_klines
from derivatives.monitor import ContextField
from derivatives.sources import Fetch, cached_fields
from derivatives.web_sources import fear_greed_from_payload
from sim.feed import SimFeed
from sim.inprocess import RecordedPremiumIndex
from sim.recorded_spot import RecordedSpotKlines
from sim.rest_payloads import FearGreedBook

NOT_RECORDED: Final = (
    "not in the recording: it holds OHLCV, funding, Fear & Greed and PAXG spot klines only"
)
NOT_IN_DATA_DIR: Final = "not in this data dir"
FNG_WHAT: Final = "Fear & Greed (recorded alternative.me index)"


def _not_recorded(what: str) -> Fetch:
    async def fetch() -> Any:
        raise SourceNotAvailableError(f"{what}: {NOT_RECORDED}")

    return fetch


def _missing(what: str, why: str) -> Fetch:
    async def fetch() -> Any:
        raise SourceNotAvailableError(f"{what}: {NOT_IN_DATA_DIR} ({why})")

    return fetch


def build_recorded_context_fields(
    config: DerivativesConfig,
    clock: Clock,
    tickers: Sequence[str],
    feed: SimFeed,
    fear_greed: FearGreedBook | str,
    spot: RecordedSpotKlines,
) -> list[ContextField]:
    """``fear_greed`` is the recorded index, or why the data dir has none."""
    binance = BinanceDerivatives(RecordedPremiumIndex(feed, clock), tickers)

    async def fear_greed_now() -> dict[str, Any]:
        assert isinstance(fear_greed, FearGreedBook)
        payload = fear_greed.answer({"limit": "1"}, clock.now_ms() // 1000)
        return fear_greed_from_payload(payload, what=FNG_WHAT)

    async def paxg_now() -> dict[str, Any]:
        now_ms = clock.now_ms()
        hourly, four_hourly = (
            spot.answer(PAXG_SYMBOL, timeframe, KLINES_ASKED, now_ms) for timeframe in ("1h", "4h")
        )
        return paxg_from_klines(hourly, four_hourly, now_ms)

    # a ticker without funding among others with it reads as "no settlement yet" (the live parser's
    # rule for a premiumIndex row without lastFundingRate); none at all is the field unavailable
    no_funding = [why for t in tickers if (why := feed.funding_missing(t)) is not None]
    recorded: dict[str, Fetch] = {
        "funding_rates": _missing("funding", "; ".join(no_funding))
        if no_funding and len(no_funding) == len(tickers)
        else binance.fetch_funding_rates,
        "fear_greed": fear_greed_now
        if isinstance(fear_greed, FearGreedBook)
        else _missing("Fear & Greed", fear_greed),
        "paxg": paxg_now,
    }
    return cached_fields(
        config,
        clock,
        lambda field, name: recorded.get(field) or _not_recorded(name),
        in_process=True,
    )


__all__ = ["FNG_WHAT", "NOT_IN_DATA_DIR", "NOT_RECORDED", "build_recorded_context_fields"]

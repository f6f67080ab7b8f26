"""Replay's context fields: ``build_context_fields``'s fields, filled from the recording in-process.

The same field names, in the same order, each a ``CachedSource`` with the live builder's name and
timing policy, so the monitor, the snapshot and their reasons behave as live:

- ``funding_rates``: the live parser, ``BinanceDerivatives.fetch_funding_rates``, over
  ``sim.inprocess.RecordedPremiumIndex`` (the simulator's premiumIndex payload at the clock's now),
  asked again only when its answer can change (``RecordedFunding``);
- ``fear_greed``: the recorded index's /fng/ answer at now (``FearGreedBook``, what the simulator
  serves), read by the live parser ``fear_greed_from_payload``;
- ``paxg`` (the gold hedge): the recorded PAXGUSDT spot klines closed at now
  (``sim.recorded_spot``, what the simulator's /api/v3/klines serves), read by the live parser
  ``derivatives.hedge.paxg_from_klines``, asked again only when a candle closes (``RecordedPaxg``);
  outside the recording it is unavailable;
- a data dir without the funding, Fear & Greed or PAXG files has those fields unavailable with
  ``NOT_IN_DATA_DIR`` and the missing file named;
- every other field is not in the recording (only OHLCV, funding, Fear & Greed and PAXG spot
  were recorded): unavailable with ``NOT_RECORDED`` as the reason, never an invented number.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Final

from core.clock import Clock
from derivatives.binance import BinanceDerivatives
from derivatives.cache import SourceNeverAvailableError
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


# A recording cannot gain a field or a file mid-run: these refusals are for good, so each cached
# source asks once instead of every TTL (8 of the 11 fields, every poll), with the same reason.


def _not_recorded(what: str) -> Fetch:
    async def fetch() -> Any:
        raise SourceNeverAvailableError(f"{what}: {NOT_RECORDED}")

    return fetch


def _missing(what: str, why: str) -> Fetch:
    async def fetch() -> Any:
        raise SourceNeverAvailableError(f"{what}: {NOT_IN_DATA_DIR} ({why})")

    return fetch


class RecordedPaxg:
    """The live parser ``paxg_from_klines`` over the recorded klines, memoised on the candles closed
    at now (``RecordedSpotKlines.closed_count`` of each timeframe), which is all the answer
    depends on: the rows are a slice of the recording ending there, and every row served is closed
    (close time = open + step - 1 < now), so the parser's ``price_at_ms`` (min of that close time
    and now) and its "closed before now" filter never involve now itself. A poll every 5 minutes
    then parses the klines again once an hour, not every 55 s TTL."""

    TIMEFRAMES: Final = ("1h", "4h")

    def __init__(self, spot: RecordedSpotKlines) -> None:
        self._spot = spot
        self._memo: tuple[tuple[int, ...], dict[str, Any]] | None = None

    def at(self, now_ms: int) -> dict[str, Any]:
        key = tuple(self._spot.closed_count(PAXG_SYMBOL, tf, now_ms) for tf in self.TIMEFRAMES)
        memo = self._memo
        if memo is None or memo[0] != key:
            hourly, four_hourly = (
                self._spot.answer(PAXG_SYMBOL, tf, KLINES_ASKED, now_ms) for tf in self.TIMEFRAMES
            )
            # no kline at all raises, never memoised (asking again is as cheap as the memo)
            memo = self._memo = (key, paxg_from_klines(hourly, four_hourly, now_ms))
        return _fresh_copy(memo[1])


class RecordedFunding:
    """The live parser ``BinanceDerivatives.fetch_funding_rates`` over the recorded premiumIndex
    payload (``RecordedPremiumIndex``), memoised on what its answer depends on: for each feed
    ticker, whether it has a price at now (no price: no row, so the parser refuses) and the
    latest settlement at now (its ``lastFundingRate``). The payload's other fields (mark price,
    time, next funding time) change at every instant, but the parser keeps only the funding rate
    of each row; so the payload is built and parsed again only when a settlement passes or a
    price appears or goes, not at every 55 s TTL."""

    def __init__(self, feed: SimFeed, clock: Clock, tickers: Sequence[str]) -> None:
        self._feed = feed
        self._clock = clock
        self._binance = BinanceDerivatives(RecordedPremiumIndex(feed, clock), tickers)
        self._memo: tuple[tuple[Any, ...], dict[str, float]] | None = None

    async def fetch(self) -> dict[str, float]:
        now_ms = self._clock.now_ms()
        feed = self._feed
        key = tuple(
            (feed.has_price(t, now_ms), feed.funding_rate_at(t, now_ms)) for t in feed.tickers
        )
        memo = self._memo
        if memo is None or memo[0] != key:
            # a refusal (no price, no settlement yet) raises and is never memoised
            memo = self._memo = (key, await self._binance.fetch_funding_rates())
        return dict(memo[1])


def _fresh_copy(value: dict[str, Any]) -> dict[str, Any]:
    """A new dict each time, as the unmemoised parser returns: a holder that changed its copy
    could not change the next poll's answer."""
    copied = dict(value)
    if "unavailable" in copied:
        copied["unavailable"] = dict(copied["unavailable"])
    return copied


def build_recorded_context_fields(
    config: DerivativesConfig,
    clock: Clock,
    tickers: Sequence[str],
    feed: SimFeed,
    fear_greed: FearGreedBook | str,
    spot: RecordedSpotKlines,
    *,
    rand: Callable[[], float] = random.random,
) -> list[ContextField]:
    """``fear_greed`` is the recorded index, or why the data dir has none; ``rand`` draws the
    jitter of a failed read's backoff."""
    funding = RecordedFunding(feed, clock, tickers)

    async def fear_greed_now() -> dict[str, Any]:
        assert isinstance(fear_greed, FearGreedBook)
        payload = fear_greed.answer({"limit": "1"}, clock.now_ms() // 1000)
        return fear_greed_from_payload(payload, what=FNG_WHAT)

    paxg = RecordedPaxg(spot)

    async def paxg_now() -> dict[str, Any]:
        return paxg.at(clock.now_ms())

    # a ticker without funding among others with it reads as "no settlement yet" (the live parser's
    # rule for a premiumIndex row without lastFundingRate); none at all is the field unavailable
    no_funding = [why for t in tickers if (why := feed.funding_missing(t)) is not None]
    recorded: dict[str, Fetch] = {
        "funding_rates": _missing("funding", "; ".join(no_funding))
        if no_funding and len(no_funding) == len(tickers)
        else funding.fetch,
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
        rand=rand,
    )


__all__ = [
    "FNG_WHAT",
    "NOT_IN_DATA_DIR",
    "NOT_RECORDED",
    "RecordedFunding",
    "RecordedPaxg",
    "build_recorded_context_fields",
]

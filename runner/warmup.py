"""Start-up warm-up: recent closed candles and the OHLCV history, fetched before live data flows.

Seeding the aggregator lets the tick features (1/4/24 h changes, z-score) work from the first tick,
and tells the listener where its first backfill starts. Nothing here is fatal: a source that is down
leaves the daemon starting cold, said in the log, and the history is retried on the next candle close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from core.clock import DAY_MS, Clock
from core.events import Timeframe
from market.aggregator import MultiTFAggregator
from market.history import OhlcvHistory
from market.ports import CandleBackfill, TickSource
from market.timeframes import candle_open_ms, timeframe_ms
from regime.view import RegimeView

log = logging.getLogger(__name__)

#: how far back to seed each timeframe: 24 h changes need a day of 15m closes plus the z-score window
SEED_SECS = 3 * 24 * 3600


async def seed_recent_candles(
    clock: Clock,
    backfill: CandleBackfill,
    aggregator: MultiTFAggregator,
    listener: TickSource,
    tickers: Sequence[str],
    timeframes: Sequence[Timeframe],
) -> int:
    now_ms = clock.now_ms()
    seeded = 0
    for ticker in tickers:
        for tf in timeframes:
            since_ms = candle_open_ms(now_ms - SEED_SECS * 1000, tf)
            candles = await backfill.closed_candles(ticker, tf, since_ms, now_ms)
            seeded += aggregator.seed(ticker, tf, candles)
            last = aggregator.last_closed(ticker, tf)
            if last is not None:
                listener.resume_from(ticker, tf, last.open_time_ms)
    return seeded


async def warm_up(
    clock: Clock,
    backfill: CandleBackfill,
    aggregator: MultiTFAggregator,
    listener: TickSource,
    history: OhlcvHistory,
    regimes: RegimeView,
    tickers: Sequence[str],
    timeframes: Sequence[Timeframe],
    timeout_secs: float,
) -> None:
    # A real-time bound: start-up must not hang on an unreachable REST API whatever the clock.
    try:
        async with asyncio.timeout(timeout_secs):
            seeded = await seed_recent_candles(
                clock, backfill, aggregator, listener, tickers, timeframes
            )
            if seeded:
                log.info("warm-up: seeded %d closed candles (%s)", seeded, ", ".join(timeframes))
            else:
                # an answer of no candles reads as "none" (ccxt makes rows it cannot parse into
                # nothing: an HTML page answered 200 was an INFO line of 0 candles)
                log.warning(
                    "warm-up: the exchange answered no recent candles (%s) that could be read; "
                    "starting cold",
                    ", ".join(timeframes),
                )
    except Exception as exc:
        log.warning("warm-up: no recent candles (%s: %s); starting cold", type(exc).__name__, exc)
    try:
        async with asyncio.timeout(timeout_secs):
            await history.refresh_all()
        sizes = {t: len(history.frame(t)) for t in history.tickers}
        step_h = timeframe_ms(history.timeframe) // 3_600_000
        log.info("warm-up: %s history (%d h candles): %s", history.timeframe, step_h, sizes)
    except Exception as exc:
        log.warning(
            "warm-up: OHLCV history unavailable (%s: %s); retried on the next candle close",
            type(exc).__name__,
            exc,
        )
        return
    await regimes.refresh_all()
    labels = {t: regimes.crypto(t).label.value for t in tickers}
    log.info("warm-up: crypto regimes %s", labels)


def look_back_window(history_days: int, start_ms: int, end_ms: int) -> tuple[int, int]:
    """(first ms, end ms) of the recording a run from ``start_ms`` to ``end_ms`` can read: before
    its start what its warm-up fetches (the 4h history's ``history_days``, the seed's
    ``SEED_SECS``), a day to spare on each side (a candle reaching over the edge). A replay's
    span, ``vigil prompt``'s instant, the simulator's start."""
    look_back_ms = max(history_days * DAY_MS, SEED_SECS * 1000) + DAY_MS
    return start_ms - look_back_ms, end_ms + DAY_MS

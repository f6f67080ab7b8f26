"""Liquidations from Binance's ``<symbol>@forceOrder`` streams, into a ``LiquidationWindow``.

One combined-stream connection for all tickers. Liquidations are sporadic, so silence is normal here
(no stall detection); a dropped or refused connection is retried with capped, jittered backoff on the
clock. Malformed frames, and frames of a symbol not subscribed, are counted and dropped. Binance
sends at most one liquidation per symbol per second on this stream, so the window's totals are a
lower bound (the window says so).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Sequence
from typing import NoReturn

import websockets

from core.backoff import Backoff
from core.clock import Clock
from derivatives.cache import SourceFailedError
from derivatives.liquidations import (
    MAX_FUTURE_MS,
    WINDOW_MS,
    LiquidationWindow,
    parse_force_order,
)
from market.timeframes import to_binance_symbol

log = logging.getLogger(__name__)


class LiquidationStream:
    def __init__(
        self,
        clock: Clock,
        window: LiquidationWindow,
        *,
        base_url: str,
        tickers: Sequence[str],
        path: str = "/market/stream",
        reconnect_base_secs: float = 1.0,
        reconnect_cap_secs: float = 60.0,
        rng: random.Random | None = None,
    ) -> None:
        symbols = [to_binance_symbol(t) for t in tickers]
        self._symbols = frozenset(symbols)
        streams = "/".join(f"{symbol.lower()}@forceOrder" for symbol in symbols)
        self.url = f"{base_url.rstrip('/')}{path}?streams={streams}"
        self._clock = clock
        self._window = window
        self._backoff = Backoff(base_secs=reconnect_base_secs, cap_secs=reconnect_cap_secs)
        self._rng = rng or random.Random()
        self.received = 0
        self.rejected = 0
        self.connects = 0

    async def run(self) -> NoReturn:
        attempt = 0
        while True:
            try:
                async with websockets.connect(self.url, compression=None) as ws:
                    self.connects += 1
                    attempt = 0
                    log.info("liquidations: connected (%s)", self.url.split("?")[0])
                    async for raw in ws:
                        self.on_frame(raw)
                log.warning("liquidations: the server closed the stream; reconnecting")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("liquidations: stream failed (%s: %s)", type(exc).__name__, exc)
            delay_secs = self._backoff.delay_secs(attempt, self._rng.random())
            attempt += 1
            await self._clock.sleep(delay_secs)

    def on_frame(self, raw: str | bytes) -> None:
        try:
            liquidation = parse_force_order(raw)
            if to_binance_symbol(liquidation.ticker) not in self._symbols:
                raise SourceFailedError(f"a forceOrder of {liquidation.ticker}, not subscribed")
            ahead_ms = liquidation.at_ms - self._clock.now_ms()
            if ahead_ms > MAX_FUTURE_MS:
                raise SourceFailedError(f"a forceOrder time {ahead_ms} ms ahead of the clock")
            if -ahead_ms >= WINDOW_MS:  # kept, a flood of these would push out the last hour
                raise SourceFailedError(f"a forceOrder time {-ahead_ms} ms old, before the window")
            self._window.add(liquidation)
        except SourceFailedError as exc:
            self.rejected += 1
            if self.rejected == 1 or self.rejected % 100 == 0:
                log.warning("liquidations: dropped %d frame(s), latest: %s", self.rejected, exc)
            return
        self.received += 1

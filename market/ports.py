"""Ports of the market package: what the listener needs from the outside, as Protocols."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from runner.events import Candle


class CandleBackfill(Protocol):
    """Closed candles from a REST source, to fill what a websocket outage missed."""

    async def closed_candles(
        self, ticker: str, timeframe: str, since_ms: int, until_ms: int
    ) -> Sequence[Candle]:
        """Closed candles of ``ticker``/``timeframe`` with ``since_ms <= open_time_ms`` whose
        close time is ``<= until_ms``, oldest first."""
        ...

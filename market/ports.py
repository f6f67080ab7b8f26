"""Ports of the market package: what the listener needs from the outside and what a tick source
is to the rest of the daemon, as Protocols."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from core.events import Candle


class CandleBackfill(Protocol):
    """Closed candles from a REST source, to fill what a websocket outage missed."""

    async def closed_candles(
        self, ticker: str, timeframe: str, since_ms: int, until_ms: int
    ) -> Sequence[Candle]:
        """Closed candles of ``ticker``/``timeframe`` with ``since_ms <= open_time_ms`` whose
        close time is ``<= until_ms``, oldest first."""
        ...


class TickStats(Protocol):
    """The figures the status line reads from a tick source."""

    @property
    def ticks_published(self) -> int: ...

    @property
    def rejected(self) -> Mapping[str, int]: ...

    @property
    def reconnects(self) -> Mapping[str, int]: ...


class TickSource(Protocol):
    """What publishes ``market.tick``: the websocket listener live, ``RecordedTicks`` in replay."""

    @property
    def stats(self) -> TickStats: ...

    def resume_from(self, ticker: str, timeframe: str, last_closed_open_ms: int) -> None:
        """The newest close already known from seeded history."""
        ...

    async def run(self) -> None: ...

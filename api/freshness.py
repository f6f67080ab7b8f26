"""Market freshness per stream: the feed's event time of the newest tick of each stream.

An inline handler on ``market.tick`` (one dict store per tick: the hot path stays cheap)."""

from __future__ import annotations

from collections.abc import Sequence

from api.models import StreamBody
from core.events import Event, MarketTick


class StreamFreshness:
    def __init__(self, tickers: Sequence[str], timeframes: Sequence[str]) -> None:
        self._streams = [(t, tf) for t in tickers for tf in timeframes]
        self._last: dict[tuple[str, str], int] = {}

    def on_tick(self, event: Event) -> None:
        if isinstance(event, MarketTick):
            self._last[(event.ticker, event.timeframe)] = event.event_time_ms

    def streams(self, now_ms: int) -> list[StreamBody]:
        bodies = []
        for ticker, timeframe in self._streams:
            last = self._last.get((ticker, timeframe))
            bodies.append(
                StreamBody(
                    ticker=ticker,
                    timeframe=timeframe,
                    last_update_at_ms=last,
                    age_secs=None if last is None else max(0.0, (now_ms - last) / 1000.0),
                )
            )
        return bodies


__all__ = ["StreamFreshness"]

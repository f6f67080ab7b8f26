"""What the notifier learns by looking: every ``watch_interval_secs`` (daemon clock) a ``Sample`` of
the daemon is compared with the previous one. Trading halted/resumed, the breaker opening or
closing, a loop restarted (with its error), the journal failing writes, the market going silent
and coming back, and at each UTC midnight the day's summary. Fills and exits come from the bus
(``NotifyService.on_event``); both end in the notifier's queue, never waiting."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.notify.config import NotifyConfig
from api.notify.messages import Notification, utc
from api.notify.notifier import Notifier
from core.clock import DAY_MS, Clock
from core.events import Event, OrderFilled, PositionExit


@dataclass(frozen=True)
class Sample:
    at_ms: int
    trading: str | None  # active / halted; None: no trading state
    trading_reason: str | None
    breaker: str | None  # closed / open / half_open
    loop_restarts: Mapping[str, int]
    loop_errors: Mapping[str, str | None]
    journal_failed_writes: int
    market_silent_secs: float | None  # the freshest stream's age; None before any tick
    equity_usd: float | None


@dataclass
class DayTally:
    day: int  # UTC day number of the daemon's clock
    start_equity_usd: float | None
    decisions: int = 0
    fills: int = 0
    exits: int = 0
    exit_pnl_pct: list[float] = field(default_factory=list)


def changes(prev: Sample, cur: Sample, market_stale_secs: float) -> list[Notification]:
    out: list[Notification] = []
    at = cur.at_ms
    if cur.trading != prev.trading and cur.trading is not None:
        if cur.trading == "halted":
            out.append(
                _n("trading_halted", at, f"trading HALTED: {cur.trading_reason or 'no reason'}")
            )
        else:
            out.append(_n("trading_resumed", at, "trading resumed (active)"))
    if cur.breaker != prev.breaker and cur.breaker is not None:
        if cur.breaker == "open":
            out.append(_n("breaker_opened", at, "Claude's breaker OPENED: the fallback decides"))
        elif cur.breaker == "closed":
            out.append(_n("breaker_closed", at, "Claude's breaker closed: Claude decides again"))
    for loop, restarts in cur.loop_restarts.items():
        if restarts > prev.loop_restarts.get(loop, 0):
            error = cur.loop_errors.get(loop) or "no error recorded"
            out.append(_n("health", at, f"loop {loop} restarted ({restarts} so far): {error}",
                          check="loop", loop=loop))  # fmt: skip
    if cur.journal_failed_writes > prev.journal_failed_writes:
        failed = cur.journal_failed_writes - prev.journal_failed_writes
        out.append(_n("health", at, f"{failed} journal writes failed", check="journal"))
    was_silent = _silent(prev, market_stale_secs)
    if _silent(cur, market_stale_secs) and not was_silent:
        out.append(_n("health", at, f"no market data for {cur.market_silent_secs:.0f} s",
                      check="market"))  # fmt: skip
    elif was_silent and not _silent(cur, market_stale_secs):
        out.append(_n("health", at, "market data is flowing again", check="market", ok=True))
    return out


def summary(tally: DayTally, end_equity_usd: float | None, at_ms: int) -> Notification:
    start = tally.start_equity_usd
    change = None
    if start and end_equity_usd is not None:
        change = round((end_equity_usd / start - 1) * 100, 4)
    money = "n/a" if end_equity_usd is None else f"{end_equity_usd:,.2f}"
    moved = "" if change is None else f" ({change:+.2f} % on the day)"
    day = utc(tally.day * DAY_MS)[:10]
    return _n(
        "daily_summary",
        at_ms,
        f"{day}: equity {money}{moved}; {tally.decisions} decisions, {tally.fills} fills, "
        f"{tally.exits} exits",
        day=day,
        start_equity_usd=start,
        end_equity_usd=end_equity_usd,
        change_pct=change,
        decisions=tally.decisions,
        fills=tally.fills,
        exits=tally.exits,
    )


def _silent(sample: Sample, limit_secs: float) -> bool:
    return sample.market_silent_secs is not None and sample.market_silent_secs > limit_secs


def _n(event: Any, at_ms: int, text: str, **fields: Any) -> Notification:
    return Notification(event=event, at_ms=at_ms, text=text, fields=fields)


class NotifyService:
    """The notifier plus its watcher and the day's tally, as the daemon wires them."""

    def __init__(
        self,
        config: NotifyConfig,
        clock: Clock,
        sample: Callable[[], Awaitable[Sample]],
        market_stale_secs: float,
    ) -> None:
        self.config = config
        self.notifier = Notifier(config, clock)
        self._clock = clock
        self._sample = sample
        self._market_stale_secs = market_stale_secs
        self._tally: DayTally | None = None

    def on_event(self, event: Event) -> None:
        """Bus subscriber (fills, exits): counted for the day and queued."""
        if self._tally is not None:
            if isinstance(event, OrderFilled):
                self._tally.fills += 1
            elif isinstance(event, PositionExit):
                self._tally.exits += 1
        self.notifier.on_event(event)

    def on_decision(self, line: Mapping[str, Any], _elapsed_secs: float = 0.0) -> None:
        if self._tally is not None and line.get("type", "decision") == "decision":
            self._tally.decisions += 1

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self.notifier.run())
            group.create_task(self._watch())

    async def _watch(self) -> None:
        prev = await self._sample()
        self.start_day(prev)
        while True:
            await self._clock.sleep(self.config.watch_interval_secs)
            cur = await self._sample()
            for notification in self.step(prev, cur):
                self.notifier.publish(notification)
            prev = cur

    def start_day(self, sample: Sample) -> None:
        """Count the day of ``sample`` from here (the daemon started mid-day: a partial day)."""
        self._tally = DayTally(sample.at_ms // DAY_MS, sample.equity_usd)

    def step(self, prev: Sample, cur: Sample) -> list[Notification]:
        found = changes(prev, cur, self._market_stale_secs)
        tally = self._tally
        if tally is not None and cur.at_ms // DAY_MS > tally.day:
            if self.config.daily_summary:
                found.append(summary(tally, prev.equity_usd, cur.at_ms))
            self._tally = DayTally(cur.at_ms // DAY_MS, prev.equity_usd)
        return found


__all__ = ["DayTally", "NotifyService", "Sample", "changes", "summary"]

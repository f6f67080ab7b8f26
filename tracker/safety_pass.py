"""The safety layer's pass over the tracked positions: each one's stop loss and trailing stop.

It lives apart from the ``PositionTracker`` loop because it is the one part that reads each price
and each position: the check (arming saved at once, an exit sold through ``tracker.exits``), the
per-ticker memo of the last verdict, and whether a check would only sample the price.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from core.events import PositionExit
from tracker.config import TrackerConfig
from tracker.exits import ExitPath
from tracker.market_view import MarketView
from tracker.positions import TrackedPosition
from tracker.safety import SafetyVerdict, safety_verdict
from tracker.tracked_book import TrackedBook

log = logging.getLogger("tracker.tracker")  # its lines keep the name they had in the tracker


class ConfigHolder(Protocol):
    """The tracker, whose ``config`` may be replaced while it runs: read at each check."""

    @property
    def config(self) -> TrackerConfig: ...


class SafetyPass:
    def __init__(
        self, book: TrackedBook, market: MarketView, exits: ExitPath, owner: ConfigHolder
    ) -> None:
        self._book = book
        self._market = market
        self._exits = exits
        self._owner = owner
        self._verdicts: dict[str, tuple[tuple[Any, ...], SafetyVerdict]] = {}  # the last, by ticker

    async def check_all(self) -> list[PositionExit]:
        """One safety pass over every tracked position; returns the exits it completed."""
        exits: list[PositionExit] = []
        for ticker in list(self._book.positions):
            if ticker in self._book.pending_exits:
                done = await self._exits.follow(ticker)
            else:
                done = await self.check_one(ticker)
            exits += [done] if done is not None else []
        return exits

    async def check_one(self, ticker: str) -> PositionExit | None:
        """Stop loss and trailing stop for one position; a changed trailing high or armed flag is
        saved at once."""
        price = self._market.mark_price(ticker)
        position = self._book.positions.get(ticker)
        if price is None or position is None:
            return None
        self._book.sample(ticker, price)
        verdict = self.verdict(ticker, position, price, self._owner.config)
        if verdict.armed != position.armed or verdict.trailing_high != position.trailing_high:
            if verdict.armed and not position.armed:
                log.info(
                    "tracker: trailing stop armed for %s (peak PnL %.2f %%)",
                    ticker,
                    verdict.peak_pnl_pct,
                )
            self._book.positions[ticker] = position.model_copy(
                update={"trailing_high": verdict.trailing_high, "armed": verdict.armed}
            )
            self._book.persist()
        if verdict.exit is None:
            return None
        log.warning(
            "tracker: %s for %s: price %s, PnL %.2f %%, peak %.2f %%",
            verdict.exit.value,
            ticker,
            price,
            verdict.pnl_pct,
            verdict.peak_pnl_pct,
        )
        return await self._exits.exit_position(ticker, verdict.exit, reference_price=price)

    def verdict(
        self, ticker: str, position: TrackedPosition, price: float, config: TrackerConfig
    ) -> SafetyVerdict:
        """``safety_verdict`` (a pure function of what it is given); the ticker's last one again
        when that is unchanged, as for the checks between two ticks (a tick every 75 s in replay,
        a check every 30 s)."""
        given = (position.entry_price, price, position.trailing_high, position.armed, config)
        last = self._verdicts.get(ticker)
        if last is not None and last[0] == given:
            return last[1]
        verdict = safety_verdict(*given)
        self._verdicts[ticker] = (given, verdict)
        return verdict

    def only_samples(self, config: TrackerConfig) -> bool:
        """Each tracked position has a price its check reads without a log line, and its
        verdict there moves neither the trailing stop nor to an exit: the check would only
        sample the price (most checks: one every 30 s while a position is held)."""
        for ticker, position in self._book.positions.items():
            price = self._market.quiet_price(ticker)
            if price is None:
                return False
            verdict = self.verdict(ticker, position, price, config)
            if (
                verdict.exit is not None
                or verdict.armed != position.armed
                or verdict.trailing_high != position.trailing_high
            ):
                return False
        return True

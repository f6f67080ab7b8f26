"""The ccxt broker's fill announcements and fee estimates.

A fill is announced (``order.filled``, plus ``position.opened`` for a BUY that opened a position)
when the order journal first records the order's final outcome with a filled quantity, wherever
that outcome is learned: the answer to the order itself, a lookup, ``get_open_orders`` or
``get_positions_detail`` noticing that a resting limit filled since, or the reconcile on start (an
order that filled while the daemon was down). The journal's final line is written before the
announcement, so a fill is announced at most once per process; ``announce_recorded`` publishes
every recorded fill again on start, and the trades journal skips those it already has (by client
order id), so a kill between the two still gives exactly one trades.csv row.

When the exchange's fee cannot be read (the trades request fails, or the fee was paid in another
asset, e.g. BNB) the fill is not held back: its fee is the configured rate times the notional and
is marked ``fee_estimated``.
"""

from __future__ import annotations

import logging

from broker.order_journal import JournalEntry, OrderJournal
from broker.port import OrderResult
from core.bus import EventBus
from core.events import OrderFilled, PositionOpened

log = logging.getLogger(__name__)


def estimated_fee_usd(
    quantity: float, price: float, *, is_maker: bool, maker_pct: float, taker_pct: float
) -> float:
    """The configured rate (percent) times the notional: a LIMIT BUY is a maker, a MARKET a taker."""
    return quantity * price * (maker_pct if is_maker else taker_pct) / 100.0


class FillAnnouncer:
    """Publishes the fills an ``OrderJournal`` records (see the module docstring)."""

    def __init__(self, journal: OrderJournal, bus: EventBus | None) -> None:
        self._journal = journal
        self._bus = bus

    def on_final(self, before: JournalEntry | None, result: OrderResult) -> None:
        """``result`` was just recorded as final; ``before`` is the journal's entry before that."""
        if self._bus is None or before is None or before.final is not None:
            return
        if result.filled_quantity <= 0 or result.average_price is None:
            return
        if result.fee_estimated:
            log.warning(
                "fill of %s: the exchange's fee could not be read; journaled with an estimated "
                "fee of %.6f USDT",
                result.client_order_id,
                result.fee_usd,
            )
        self._publish_filled(result)
        if result.side == "buy" and self._opened_position(result):
            self._bus.publish(
                PositionOpened(
                    at_ms=result.at_ms,
                    ticker=result.ticker,
                    quantity=result.filled_quantity,
                    entry_price=result.average_price,
                    signals=dict(before.intent.signals),
                    regime=before.intent.regime,
                )
            )

    def announce_recorded(self) -> int:
        """Publish ``order.filled`` for every fill the journal holds; returns how many."""
        fills = [
            e.final
            for e in self._journal.entries()
            if e.final is not None and e.final.filled_quantity > 0
        ]
        for result in fills:
            self._publish_filled(result, recovered=True)
        return len(fills)

    def entry_of(self, ticker: str) -> JournalEntry | None:
        """The journaled BUY that opened the current position in ``ticker`` (first filled BUY
        since the last filled SELL), or None."""
        opened: JournalEntry | None = None
        for entry in self._journal.entries():
            final = entry.final
            if final is None or final.ticker != ticker or final.filled_quantity <= 0:
                continue
            if final.side == "sell":
                opened = None
            elif opened is None:
                opened = entry
        return opened

    def _opened_position(self, result: OrderResult) -> bool:
        entry = self.entry_of(result.ticker)
        return entry is not None and entry.intent.client_order_id == result.client_order_id

    def _publish_filled(self, result: OrderResult, *, recovered: bool = False) -> None:
        if self._bus is None or result.average_price is None:
            return
        self._bus.publish(
            OrderFilled(
                at_ms=result.at_ms,
                client_order_id=result.client_order_id,
                ticker=result.ticker,
                side=result.side,
                quantity=result.filled_quantity,
                price=result.average_price,
                fee=result.fee_usd,
                fee_estimated=result.fee_estimated,
                recovered=recovered,
            )
        )


__all__ = ["FillAnnouncer", "estimated_fee_usd"]

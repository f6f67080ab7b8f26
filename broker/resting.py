"""Cancelling resting BUY limits of tickers being sold: left resting, they would buy back in
later, after the decider (or the tracker's stop) wanted out."""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from broker.port import Broker

log = logging.getLogger(__name__)


async def cancel_resting_buys(broker: Broker, tickers: Collection[str]) -> list[dict[str, Any]]:
    """Cancel every open BUY order of ``tickers``; one journal-ready entry per order (its status,
    or the error). Never raises for a broker failure: the sale goes ahead regardless, and the
    entry says what could not be done."""
    if not tickers:
        return []
    try:
        resting = await broker.get_open_orders()
    except Exception as exc:
        log.exception("could not list resting orders to cancel for %s", sorted(tickers))
        return [{"tickers": sorted(tickers), "error": f"{type(exc).__name__}: {exc}"}]
    done: list[dict[str, Any]] = []
    for order in resting:
        if order.side != "buy" or order.ticker not in tickers:
            continue
        entry: dict[str, Any] = {"client_order_id": order.client_order_id, "ticker": order.ticker}
        try:
            result = await broker.cancel(order.client_order_id)
            entry["status"] = result.status if result is not None else "unknown"
        except Exception as exc:
            log.exception("could not cancel resting BUY %s", order.client_order_id)
            entry["error"] = f"{type(exc).__name__}: {exc}"
        done.append(entry)
    return done

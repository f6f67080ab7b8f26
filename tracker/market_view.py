"""``MarketView``: the prices and regimes the tracker reads, each failure turned into "unknown".

A missing or non-positive price is None (logged once while it lasts, and once when it is back); a
regime source that raises gives ``unknown``; BTC's 1h change that raises gives None (the fallback
score's correlation term is then 0).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tracker.positions import UNKNOWN_REGIME

# the tracker's log lines keep the logger they always had
log = logging.getLogger("tracker.tracker")

PriceSource = Callable[[str], float | None]
RegimeSource = Callable[[str], str]


class MarketView:
    def __init__(
        self,
        price: PriceSource,
        regime: RegimeSource,
        btc_change_1h_pct: Callable[[], float | None],
    ) -> None:
        self._price = price
        self._regime = regime
        self._btc_change_1h_pct = btc_change_1h_pct
        self._no_price: set[str] = set()

    def mark_price(self, ticker: str) -> float | None:
        """The price source's price, None (logged once while it lasts) when there is none."""
        price = self._price(ticker)
        if price is None or not price > 0:
            if ticker not in self._no_price:
                self._no_price.add(ticker)
                log.warning("tracker: no price for %s; its checks wait for one", ticker)
            return None
        if ticker in self._no_price:
            self._no_price.discard(ticker)
            log.info("tracker: price for %s is back", ticker)
        return price

    def quiet_price(self, ticker: str) -> float | None:
        """``mark_price`` when reading it would log nothing (a price, and none was missing
        before it), else None: for a look that must leave no trace."""
        price = self._price(ticker)
        if price is None or not price > 0 or ticker in self._no_price:
            return None
        return price

    def regime_now(self, ticker: str) -> str:
        try:
            return self._regime(ticker)
        except Exception:
            log.exception("tracker: regime of %s unavailable; using %r", ticker, UNKNOWN_REGIME)
            return UNKNOWN_REGIME

    def btc_change_1h_pct(self) -> float | None:
        try:
            return self._btc_change_1h_pct()
        except Exception:
            log.exception("tracker: BTC's 1h change unavailable; the correlation term is 0")
            return None

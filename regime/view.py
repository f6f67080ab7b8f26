"""Regimes for the decision path: refreshed on each 4h close, read by the snapshot.

On a 4h close the history cache is refreshed first and only then the ticker's HMM is refitted (when
due) and asked for the regime: the model must see the candle that just closed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from core.events import CandleClosed, Event
from market.history import OhlcvHistory
from regime.combined import combine
from regime.crypto_hmm import CryptoRegime
from regime.macro import MacroRegime
from regime.snapshot import RegimeSnapshot
from regime.tracker import CryptoRegimeTracker

log = logging.getLogger(__name__)

#: the combined label and exposure scale follow the market leader's volatility regime
ANCHOR = "BTC/USDT"


class MacroSource(Protocol):
    async def current(self) -> MacroRegime: ...


class RegimeView:
    def __init__(
        self,
        tracker: CryptoRegimeTracker,
        macro: MacroSource,
        history: OhlcvHistory,
        tickers: Sequence[str],
    ) -> None:
        self._tracker = tracker
        self._macro = macro
        self._history = history
        self._tickers = tuple(sorted(dict.fromkeys(tickers)))
        self._anchor = ANCHOR if ANCHOR in self._tickers else self._tickers[0]

    async def on_candle_closed(self, event: Event) -> None:
        """Queued bus handler: refresh the history on every close it cares about, then the regime."""
        if not isinstance(event, CandleClosed):
            return
        await self._history.on_candle_closed(event)
        if event.timeframe == self._history.timeframe and event.ticker in self._tickers:
            await self._tracker.on_4h_close(event.ticker, self._history.frame(event.ticker))

    async def refresh_all(self) -> None:
        """Fit and predict every ticker from the cached history (start-up)."""
        for ticker in self._tickers:
            frame = self._history.frame(ticker)
            if len(frame):
                await self._tracker.on_4h_close(ticker, frame)

    def crypto(self, ticker: str) -> CryptoRegime:
        return self._tracker.current(ticker)

    async def snapshot(self) -> RegimeSnapshot:
        macro = await self._macro.current()
        crypto = {t: self._tracker.current(t) for t in self._tickers}
        combined = combine(crypto[self._anchor], macro)
        notes = [f"{t}: {r.reason}" for t, r in crypto.items() if r.reason is not None]
        if macro.reason is not None:
            notes.append(f"macro: {macro.reason}")
        return RegimeSnapshot(
            crypto={t: r.label.value for t, r in crypto.items()},
            crypto_exposure={t: r.exposure for t, r in crypto.items()},
            macro=macro.quadrant.value,
            macro_exposure=macro.exposure,
            combined=combined.label,
            exposure_scale=combined.exposure_scale,
            notes=tuple(notes),
        )

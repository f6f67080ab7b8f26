"""Regimes for the decision path: refreshed on each 4h close, read by the snapshot.

On a 4h close the history cache is refreshed first and only then the ticker's HMM is refitted (when
due) and asked for the regime: the model must see the candle that just closed.

The refresh runs in a queued bus handler (a fit takes about half a second in a worker thread), while
the decision that the same close triggers builds its snapshot concurrently. So that the decision
sees the regime of every 4h close observed before it, not whichever one happened to finish first,
the close is marked "refresh pending" synchronously when it is published (``on_close_observed``, an
inline handler: before any decision can start), and ``snapshot`` waits for the pending refreshes.
The wait is bounded on the injected clock (``refresh_wait_secs``); past it the previous regime is
used and the snapshot's notes say why.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Protocol

from core.clock import Clock
from core.clock_wait import wait_for
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

#: how long (clock time) a snapshot waits for the regime refresh of a 4h close already observed
DEFAULT_REFRESH_WAIT_SECS = 300.0


class MacroSource(Protocol):
    async def current(self) -> MacroRegime: ...


class FitHolder(Protocol):
    """Where the fits run (``regime.fit_pool.FitPool``): held while fits are expected one after
    another, so that a pool whose process leaves when idle starts one process for them, not one
    per ticker."""

    def hold(self) -> None: ...

    def release(self) -> None: ...


class RegimeView:
    def __init__(
        self,
        tracker: CryptoRegimeTracker,
        macro: MacroSource,
        history: OhlcvHistory,
        tickers: Sequence[str],
        *,
        clock: Clock,
        refresh_wait_secs: float = DEFAULT_REFRESH_WAIT_SECS,
        fits: FitHolder | None = None,
    ) -> None:
        self._tracker = tracker
        self._macro = macro
        self._history = history
        self._tickers = tuple(sorted(dict.fromkeys(tickers)))
        self._anchor = ANCHOR if ANCHOR in self._tickers else self._tickers[0]
        self._clock = clock
        self._refresh_wait_secs = refresh_wait_secs
        # per ticker: open time of the newest 4h close observed / whose refresh has finished
        self._observed: dict[str, int] = {}
        self._refreshed: dict[str, int] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._fits = fits  # held while a refresh is pending (a 4h close observed, not refreshed)

    def on_close_observed(self, event: Event) -> None:
        """Inline bus handler (synchronous, so before any decision the close triggers can start):
        a 4h close's regime refresh is pending from now until ``on_candle_closed`` has done it."""
        if self._is_regime_close(event):
            assert isinstance(event, CandleClosed)
            open_ms = event.candle.open_time_ms
            was_pending = self.refresh_pending
            self._observed[event.ticker] = max(self._observed.get(event.ticker, open_ms), open_ms)
            if self._fits is not None and not was_pending and self.refresh_pending:
                self._fits.hold()  # the other tickers' closes come with this one

    async def on_candle_closed(self, event: Event) -> None:
        """Queued bus handler: refresh the history on every close it cares about, then the regime."""
        if not isinstance(event, CandleClosed):
            return
        try:
            await self._history.on_candle_closed(event)
            if self._is_regime_close(event):
                await self._tracker.on_4h_close(event.ticker, self._history.frame(event.ticker))
        finally:
            if self._is_regime_close(event):  # done, or failed (logged by the bus): not pending
                self._note_refreshed(event.ticker, event.candle.open_time_ms)

    def _is_regime_close(self, event: Event) -> bool:
        return (
            isinstance(event, CandleClosed)
            and event.timeframe == self._history.timeframe
            and event.ticker in self._tickers
        )

    def _note_refreshed(self, ticker: str, open_ms: int) -> None:
        was_pending = self.refresh_pending
        self._refreshed[ticker] = max(self._refreshed.get(ticker, open_ms), open_ms)
        if self._fits is not None and was_pending and not self.refresh_pending:
            self._fits.release()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def refresh_pending(self) -> bool:
        """A 4h close was observed whose regime refresh has not finished."""
        return bool(self._pending(self._observed))

    def _pending(self, due: Mapping[str, int]) -> dict[str, int]:
        """Of ``due`` (ticker -> close open time), the refreshes not finished yet."""
        return {t: at for t, at in due.items() if self._refreshed.get(t, at - 1) < at}

    async def _until_refreshed(self, due: Mapping[str, int]) -> None:
        while self._pending(due):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    async def wait_for_refreshes(self) -> dict[str, str]:
        """Wait for the regime refresh of every 4h close observed so far (bounded on the clock).
        Returns, per ticker whose refresh did not finish in time, why its previous regime is used."""
        due = self._pending(self._observed)
        if not due:
            return {}
        try:
            await wait_for(self._clock, self._until_refreshed(due), self._refresh_wait_secs)
        except TimeoutError:
            late = self._pending(due)
            for ticker, open_ms in sorted(late.items()):
                log.warning(
                    "%s regime refresh of the 4h close (open %d) still running after %.0f s; "
                    "the snapshot uses the previous regime",
                    ticker,
                    open_ms,
                    self._refresh_wait_secs,
                )
            return {
                ticker: (
                    f"regime refresh of the 4h candle opened at {open_ms} not done after "
                    f"{self._refresh_wait_secs:.0f} s; previous regime used"
                )
                for ticker, open_ms in late.items()
            }
        return {}

    async def refresh_all(self) -> None:
        """Fit and predict every ticker from the cached history (start-up)."""
        if self._fits is not None:
            self._fits.hold()
        try:
            for ticker in self._tickers:
                frame = self._history.frame(ticker)
                if len(frame):
                    await self._tracker.on_4h_close(ticker, frame)
        finally:
            if self._fits is not None:
                self._fits.release()

    def crypto(self, ticker: str) -> CryptoRegime:
        return self._tracker.current(ticker)

    async def snapshot(self) -> RegimeSnapshot:
        """The regimes as of every 4h close observed so far (see the module docstring)."""
        late = await self.wait_for_refreshes()
        macro = await self._macro.current()
        crypto = {t: self._tracker.current(t) for t in self._tickers}
        combined = combine(crypto[self._anchor], macro)
        notes = [f"{t}: {r.reason}" for t, r in crypto.items() if r.reason is not None]
        notes += [f"{t}: {why}" for t, why in sorted(late.items())]
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

"""``TrackedBook``: the tracker's record of what it guards, and its copy in ``runner_state.json``.

Per ticker: the ``TrackedPosition``, the exit order in flight (client order id and reason, saved
BEFORE the SELL is sent), and the prices the last safety checks saw (the fallback score's momentum).
Every change of a position or an exit in flight is persisted at once (``persist``); the samples are
memory only. ``reconcile`` makes the tracked set follow the broker's positions.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence

from broker.port import PositionDetail
from core.errors import RetryableError
from core.failure_streak import FailureStreak
from tracker.positions import (
    UNKNOWN_REGIME,
    StateStore,
    TrackedPosition,
    pending_exits_from_state,
    positions_from_state,
    state_fields,
)
from tracker.safety import ExitReason

# the tracker's log lines keep the logger they always had
log = logging.getLogger("tracker.tracker")


class TrackedBook:
    def __init__(
        self,
        store: StateStore,
        *,
        momentum_samples: int,
        on_save_failed: Callable[[str], None] = lambda _why: None,
    ) -> None:
        """``store`` must be loaded; the positions it holds are tracked again (a restart), with
        the exit orders that were in flight. ``on_save_failed(why)``: a save that could not be
        written (the tracker halts trading)."""
        self._store = store
        self._on_save_failed = on_save_failed
        self._unsaved = FailureStreak()
        self._momentum_samples = momentum_samples
        self.positions: dict[str, TrackedPosition] = positions_from_state(store.current)
        self.samples: dict[str, deque[float]] = {}
        #: ticker -> (client order id of the exit's SELL, why)
        self.pending_exits: dict[str, tuple[str, ExitReason]] = {
            t: (order_id, ExitReason(reason))
            for t, (order_id, reason) in pending_exits_from_state(store.current).items()
            if t in self.positions
        }

    # ---- tracking

    def track(
        self,
        ticker: str,
        entry_price: float,
        quantity: float,
        at_ms: int,
        signals: Mapping[str, float],
        regime: str,
    ) -> TrackedPosition:
        if ticker in self.positions:
            log.warning("tracker: %s was already tracked; the new entry replaces it", ticker)
        position = TrackedPosition(
            ticker=ticker,
            entry_price=entry_price,
            quantity=quantity,
            entry_time_ms=at_ms,
            signals=dict(signals),
            regime=regime,
            trailing_high=entry_price,
        )
        self.positions[ticker] = position
        self.samples.pop(ticker, None)
        self.persist()
        log.info("tracker: tracking %s: %s @ %s (regime %s)", ticker, quantity, entry_price, regime)
        return position

    def untrack(self, ticker: str) -> TrackedPosition | None:
        position = self.positions.pop(ticker, None)
        self.samples.pop(ticker, None)
        self.pending_exits.pop(ticker, None)
        if position is not None:
            self.persist()
            log.info("tracker: no longer tracking %s", ticker)
        return position

    # ---- exits in flight

    def expect_exit(self, ticker: str, order_id: str, reason: ExitReason) -> None:
        """Save the exit order's id with the position before it is sent."""
        self.pending_exits[ticker] = (order_id, reason)
        self.persist()

    def is_exiting(self, ticker: str) -> bool:
        """An exit order for ``ticker`` is open at the broker."""
        return ticker in self.pending_exits

    # ---- price samples

    def sample(self, ticker: str, price: float) -> None:
        samples = self.samples.get(ticker)
        if samples is None:
            samples = self.samples[ticker] = deque(maxlen=self._momentum_samples)
        samples.append(price)

    def recent_prices(self, ticker: str) -> list[float]:
        """The prices the last safety checks saw for ``ticker``, oldest first."""
        return list(self.samples.get(ticker, ()))

    # ---- the broker's view

    def reconcile(self, held: Sequence[PositionDetail]) -> None:
        """Make the tracked set match what the broker holds (each difference is logged)."""
        held_by_ticker = {p.ticker: p for p in held}
        for ticker in sorted(set(self.positions) - set(held_by_ticker)):
            if ticker in self.pending_exits:
                log.info(
                    "tracker: %s is no longer held and its exit order %s is in flight; the next "
                    "check settles it",
                    ticker,
                    self.pending_exits[ticker][0],
                )
                continue
            log.warning(
                "tracker: %s was tracked but the broker holds no position; untracked", ticker
            )
            self.untrack(ticker)
        for ticker, detail in sorted(held_by_ticker.items()):
            if ticker in self.positions:
                self.reconcile_one(detail)
                continue
            log.warning(
                "tracker: the broker holds %s %s that was not tracked; tracking it "
                "(entry %s, regime at entry %s, signals %s, as the broker's order recorded)",
                detail.quantity,
                ticker,
                detail.entry_price,
                detail.regime or "unknown",
                detail.signals or "unknown",
            )
            self.track(
                ticker,
                detail.entry_price,
                detail.quantity,
                detail.opened_at_ms,
                detail.signals,
                detail.regime or UNKNOWN_REGIME,
            )

    def reconcile_one(self, detail: PositionDetail) -> None:
        """Follow the broker when a tracked position's quantity changed (an ADD filled, a partial
        SELL): its quantity and average entry become the position's. The trailing high (never
        below the entry) and the armed flag stay the tracker's."""
        position = self.positions.get(detail.ticker)
        if position is None or position.quantity == detail.quantity:
            return
        log.info(
            "tracker: %s now %s @ %s (was %s @ %s, per the broker)",
            detail.ticker,
            detail.quantity,
            detail.entry_price,
            position.quantity,
            position.entry_price,
        )
        self.positions[detail.ticker] = position.model_copy(
            update={
                "quantity": detail.quantity,
                "entry_price": detail.entry_price,
                "trailing_high": max(position.trailing_high, detail.entry_price),
            }
        )
        self.persist()

    # ---- persistence

    def persist(self) -> None:
        """Record the tracked set in the state store and save it. A failed save is logged; the
        state stays in memory and the next change (or the daemon's shutdown save) writes it."""
        pending = {t: (cid, why.value) for t, (cid, why) in self.pending_exits.items()}
        self._store.replace(**state_fields(self._store.current, self.positions, pending))
        try:
            self._store.save()
        except OSError as exc:
            # a full disk fails every save: one traceback and a halt, not one per safety check
            if self._unsaved.failed():
                log.exception("tracker: could not save runner state; kept in memory")
                self._on_save_failed(f"runner state could not be saved: {exc}")
            return
        except RetryableError as exc:
            # the file kept changing under a person's editor: the next save merges it and writes
            if self._unsaved.failed():
                log.warning("tracker: runner state not saved yet (%s); kept in memory", exc)
            return
        except Exception:
            log.exception("tracker: could not save runner state; kept in memory")
            return
        if failures := self._unsaved.ended():
            log.warning("tracker: runner state saved again after %d failed saves", failures)

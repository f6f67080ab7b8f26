"""``TradingSwitch``: ACTIVE / HALTED, the one place that changes the daemon's trading state.

``HaltTradingError`` (a broker disagreement, a state that cannot be saved, a short on a long-only
account) halts trading instead of being logged and forgotten. While HALTED the decision routine and
the tracker's agent layer open nothing (no BUY, no ADD); exits and stops still run. The state is
stored in ``runner_state.json`` (``state.trading.TradingState``), so a restart stays halted, and a
person resumes with ``vigil trading resume`` or by editing the file: the store merges the edit and
``observe`` (run after each poll) journals it. Every change is one ``{"type": "trading_state"}``
line in ``decisions.jsonl``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from core.clock import Clock
from state.line_text import as_one_line
from state.models import RunnerState
from state.trading import ACTIVE, HALTED, REASON_MAX_CHARS, TradingState

log = logging.getLogger(__name__)

#: ``by`` of a change made by editing runner_state.json without saying who
STATE_EDIT = "state edit"


class TradingStore(Protocol):
    @property
    def current(self) -> RunnerState: ...

    def set_trading(self, trading: TradingState) -> TradingState: ...

    def save(self) -> object: ...


class TradingSwitch:
    def __init__(
        self, clock: Clock, store: TradingStore, journal: Callable[[Mapping[str, Any]], None]
    ) -> None:
        self._clock = clock
        self._store = store
        self._journal = journal
        self._seen = store.current.trading
        if self._seen.halted:
            log.warning(
                "trading is %s; no new entries until `vigil trading resume`", self._seen.describe()
            )

    @property
    def state(self) -> TradingState:
        return self._store.current.trading

    @property
    def halted(self) -> bool:
        return self.state.halted

    def status(self) -> str:
        """The status line's figure: ``active`` or ``HALTED(<reason>)``."""
        state = self.state
        return f"HALTED({state.reason or 'no reason given'})" if state.halted else ACTIVE

    def halt(self, reason: str, *, by: str = "daemon") -> bool:
        """Halt trading; True if it was active. A second cause while halted is logged only: the
        first one is what a person must look at.

        The daemon's own reasons quote an error's message, which may hold line breaks or run
        long: written as one line and cut to what the state keeps, since a halt must not fail
        (a person's reason is refused before it gets here: CLI, API, file edit)."""
        reason = as_one_line(reason)[:REASON_MAX_CHARS]
        if self.halted:
            log.error("trading already halted (%s); also: %s", self.state.reason, reason)
            return False
        log.error("HALTING TRADING (no new entries; exits and stops still run): %s", reason)
        self._change(TradingState(mode=HALTED, reason=reason, since_ms=self._now_ms(), by=by))
        return True

    def resume(self, *, by: str = "daemon") -> bool:
        """Resume trading; True if it was halted."""
        if not self.halted:
            return False
        self._change(TradingState(mode=ACTIVE, since_ms=self._now_ms(), by=by))
        return True

    def observe(self) -> None:
        """Journal a change the store merged from a person's edit (CLI or editor)."""
        current = self.state
        if current == self._seen:
            return
        if current.mode != self._seen.mode and current.since_ms == self._seen.since_ms:
            # a hand edit that changed only the mode: stamp when and how it happened
            current = current.model_copy(update={"since_ms": self._now_ms(), "by": STATE_EDIT})
            self._store.set_trading(current)
        log.warning("trading state changed by %s: %s", current.by or STATE_EDIT, current.describe())
        self._record(current)

    def _change(self, new: TradingState) -> None:
        self._store.set_trading(new)
        try:
            self._store.save()
        except OSError as exc:  # the file's own condition (a full disk, a FIFO): no traceback
            log.error(
                "could not save the trading state (%s); kept in memory for the next save", exc
            )
        except Exception:
            log.exception("could not save the trading state; kept in memory for the next save")
        self._record(new)

    def _record(self, new: TradingState) -> None:
        previous, self._seen = self._seen, new
        try:
            self._journal(
                {
                    "type": "trading_state",
                    "at_ms": self._clock.now_ms(),
                    "previous": previous.mode,
                    **new.model_dump(mode="json"),
                }
            )
        except Exception:
            log.exception("could not journal the trading state change to %s", new.mode)

    def _now_ms(self) -> int:
        return self._clock.now_ms()

"""Circuit breaker for the model calls: stop asking a failing service, try again later.

closed --(``failure_threshold`` consecutive failures)--> open --(``open_secs``)--> half_open.
In half_open exactly one trial call is let through: success closes, failure opens again. Every
transition is kept with its timestamp so the journal can say when and why Claude was bypassed.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict

from agent.claude_client import ModelGone
from core.clock import Clock


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class BreakerTransition(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    at_ms: int
    from_state: BreakerState
    to_state: BreakerState
    reason: str


class CircuitBreaker:
    def __init__(self, clock: Clock, failure_threshold: int = 3, open_secs: float = 900.0) -> None:
        if failure_threshold < 1:
            raise ValueError(f"failure_threshold must be >= 1, got {failure_threshold}")
        if open_secs <= 0:
            raise ValueError(f"open_secs must be > 0, got {open_secs}")
        self._clock = clock
        self.failure_threshold = failure_threshold
        self.open_secs = open_secs
        self._state = BreakerState.CLOSED
        self._consecutive_failures = 0
        self._opened_at_secs = 0.0
        self._trial_in_flight = False
        self._verdicts = 0  # success or failure records so far: tells guard() one was given
        self.transitions: list[BreakerTransition] = []

    @property
    def state(self) -> BreakerState:
        """The state now (an open breaker whose time is up reads as half_open)."""
        self._expire_open()
        return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._consecutive_failures

    def reopens_in_secs(self) -> float:
        """Seconds until an open breaker lets a trial through (0 when not open)."""
        if self.state is not BreakerState.OPEN:
            return 0.0
        return max(0.0, self._opened_at_secs + self.open_secs - self._clock.monotonic_secs())

    def allow(self) -> bool:
        """May a call go out now? In half_open this takes the single trial slot."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        return False

    def release_trial(self) -> None:
        """The trial call was abandoned (e.g. cancelled at shutdown): let the next call try."""
        self._trial_in_flight = False

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Around one call that ``allow()`` let out: every way out gives a verdict.

        An exception that leaves before ``record_success``/``record_failure`` (a validation error
        nobody expected, a bug) counts as a failure; a cancellation, a retired model not asked
        again (``ModelGone``) or a silent exit without a verdict frees the half-open slot. Without
        this, a trial ending in a foreign exception kept the slot forever: "next trial in 0 s" and
        Claude off until restart.
        """
        before = self._verdicts
        try:
            yield
        except (asyncio.CancelledError, ModelGone):  # ModelGone: no call went out, no verdict
            if self._verdicts == before:
                self.release_trial()
            raise
        except BaseException as exc:
            if self._verdicts == before:
                self.record_failure(type(exc).__name__)
            raise
        if self._verdicts == before:
            self.release_trial()

    def record_success(self) -> None:
        """Only a success in half_open closes the breaker. One in open is a call let out while it
        was still closed and answered after it opened (a position review in flight while the
        decisions' calls failed): it resets the count, and the breaker stays open until its trial,
        as its open time promised, rather than closing hours early on a call made before."""
        self._verdicts += 1
        self._consecutive_failures = 0
        self._trial_in_flight = False
        if self.state is BreakerState.HALF_OPEN:
            self._move(BreakerState.CLOSED, "trial call succeeded")

    def record_failure(self, reason: str = "") -> None:
        self._verdicts += 1
        self._consecutive_failures += 1
        trial_failed = self._state is BreakerState.HALF_OPEN
        self._trial_in_flight = False
        if trial_failed:
            self._open(f"trial call failed: {reason}".rstrip(": "))
        elif (
            self._state is BreakerState.CLOSED
            and self._consecutive_failures >= self.failure_threshold
        ):
            self._open(f"{self._consecutive_failures} consecutive failures, last: {reason}")

    def _open(self, reason: str) -> None:
        self._opened_at_secs = self._clock.monotonic_secs()
        self._move(BreakerState.OPEN, reason)

    def _expire_open(self) -> None:
        if (
            self._state is BreakerState.OPEN
            and self._clock.monotonic_secs() - self._opened_at_secs >= self.open_secs
        ):
            self._move(BreakerState.HALF_OPEN, f"open for {self.open_secs:g} s")

    def _move(self, to_state: BreakerState, reason: str) -> None:
        self.transitions.append(
            BreakerTransition(
                at_ms=self._clock.now_ms(), from_state=self._state, to_state=to_state, reason=reason
            )
        )
        self._state = to_state

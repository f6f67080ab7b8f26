"""The one retry policy of the codebase: capped, jittered exponential backoff on the injected Clock.

``Backoff`` is the policy type every caller configures (a reconnecting loop, a ccxt call, a Claude
call, a cached source, the supervisor's restarts). Loops that retry forever ask it for the next delay
and sleep on their clock; calls that retry a bounded number of times run under ``retrying()``, which
is tenacity's ``AsyncRetrying`` with the clock's ``sleep``, so retries inside a decision wait on the
same clock as everything else and make progress under the virtual clock of replay.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Protocol

import tenacity
from pydantic import BaseModel, ConfigDict, Field


def backoff_delay_secs(
    attempt: int, base_secs: float, cap_secs: float, jitter_fraction: float, rand: float
) -> float:
    """Delay before retry number ``attempt`` (0-based).

    The exponential ``base * 2**attempt`` is capped at ``cap_secs``; then up to ``jitter_fraction`` of it
    is taken off at random (``rand`` in [0, 1]), so restarts of many loops spread out and the delay never
    exceeds the cap.
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if not (base_secs >= 0.0 and cap_secs >= 0.0):  # also refuses NaN, which min() would hide
        raise ValueError(f"base_secs and cap_secs must be >= 0, got {base_secs}, {cap_secs}")
    if not 0.0 <= jitter_fraction <= 1.0:
        raise ValueError(f"jitter_fraction must be in [0, 1], got {jitter_fraction}")
    if not 0.0 <= rand <= 1.0:
        raise ValueError(f"rand must be in [0, 1], got {rand}")
    # 2.0**1023 is the largest finite power of two; base * it may overflow to inf, which min() caps
    exponent = min(attempt, 1023)
    capped = min(cap_secs, base_secs * 2.0**exponent)
    return capped * (1.0 - jitter_fraction * rand)


class Backoff(BaseModel):
    """Capped, jittered exponential backoff: the policy type every retrying caller configures.

    ``max_attempts`` bounds a call's tries (``retrying``); loops that retry forever ignore it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_secs: float = Field(1.0, ge=0)
    cap_secs: float = Field(60.0, ge=0)
    jitter_fraction: float = Field(0.5, ge=0, le=1)
    max_attempts: int = Field(6, ge=1)

    def delay_secs(self, attempt: int, rand: float) -> float:
        """Delay before retry ``attempt`` (0-based), ``rand`` in [0, 1] choosing the jitter."""
        return backoff_delay_secs(
            attempt, self.base_secs, self.cap_secs, self.jitter_fraction, rand
        )


class Sleeper(Protocol):
    """The part of the Clock port retries need."""

    async def sleep(self, seconds: float) -> None: ...


def retrying(
    policy: Backoff,
    clock: Sleeper,
    *,
    retry_on: Callable[[BaseException], bool],
    rng: random.Random | None = None,
    wait_hint: Callable[[BaseException], float | None] | None = None,
    before_sleep: Callable[[tenacity.RetryCallState], Awaitable[None] | None] | None = None,
) -> tenacity.AsyncRetrying:
    """tenacity's ``AsyncRetrying`` under ``policy``, sleeping on ``clock``.

    ``retry_on`` says which exceptions are worth another try; the last one is re-raised as is.
    ``wait_hint`` may read a server's own wait (Retry-After) from the exception: the delay is then
    at least that.
    """
    draw = (rng or random.Random()).random

    def wait(state: tenacity.RetryCallState) -> float:
        delay = policy.delay_secs(state.attempt_number - 1, draw())
        outcome = state.outcome
        if wait_hint is not None and outcome is not None and outcome.failed:
            exc = outcome.exception()
            hint = wait_hint(exc) if exc is not None else None
            if hint is not None:
                delay = max(delay, hint)
        return delay

    return tenacity.AsyncRetrying(
        sleep=clock.sleep,
        wait=wait,
        stop=tenacity.stop_after_attempt(policy.max_attempts),
        retry=tenacity.retry_if_exception(retry_on),
        reraise=True,
        before_sleep=before_sleep,
    )


__all__ = ["Backoff", "Sleeper", "backoff_delay_secs", "retrying"]

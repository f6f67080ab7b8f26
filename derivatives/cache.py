"""CachedSource: one outside value with its own timeout, cache TTL, backoff and reasons.

``read()`` never raises for the provider's problems; it answers a ``Cached`` (value or None, and a
reason whenever the value is missing). The rules, all on the injected ``Clock``:

- a value younger than ``ttl_secs`` is served without asking the provider;
- otherwise the provider is asked (at most one request at a time; the request's timeout is REAL
  seconds because the socket is real, as in ``regime.fred``);
- after a failure the provider is not asked again before a capped, jittered backoff has passed
  (at least the provider's ``Retry-After``); a ``SourceNotAvailableError`` (the provider has no
  such data, or none is configured) waits a full TTL instead: retrying sooner cannot help;
- meanwhile the last good value is served until it is ``ttl_secs * stale_factor`` old; after that
  the answer is unavailable "stale since <when>" with the last failure, never an old number
  passed off as current.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Generic, TypeVar

from core.backoff import Backoff
from core.clock import Clock
from core.errors import RetryableError, VigilError

log = logging.getLogger(__name__)

T = TypeVar("T")
#: a source's Retry-After is obeyed up to this: a garbled or hostile one ("inf", "1e400", a year)
#: must not switch the source off for good
MAX_RETRY_AFTER_SECS: Final = 3600.0


class SourceNotAvailableError(VigilError):
    """The provider does not have this data (or none is configured): retrying soon cannot help."""


class SourceNeverAvailableError(SourceNotAvailableError):
    """The provider can never have this data (the recording lacks it): asking again can only
    repeat this reason, so the source stops asking. The fetch must raise it with the same reason
    every time, as the re-asks it saves would have."""


class SourceFailedError(RetryableError):
    """This attempt failed (timeout, 429/418, 5xx, malformed body): back off and try again."""

    def __init__(self, message: str, *, retry_after_secs: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_secs = retry_after_secs


@dataclass(frozen=True)
class Cached(Generic[T]):
    """What a source knows now: a value (maybe past its TTL but within the stale limit) or a reason."""

    value: T | None
    reason: str | None
    fetched_at_ms: int | None = None
    stale: bool = False  # past its TTL, still served because the refresh is failing


@dataclass(frozen=True)
class CachePolicy:
    ttl_secs: float
    #: None: the fetch is in-process (a recording) and cannot hang, so no timer is armed (arming
    #: and cancelling one per fetch was a tenth of a replay's context reads)
    timeout_secs: float | None = 10.0
    stale_factor: float = 3.0
    backoff_base_secs: float = 5.0
    backoff_cap_secs: float = 600.0
    jitter_fraction: float = 0.5

    @property
    def backoff(self) -> Backoff:
        return Backoff(
            base_secs=self.backoff_base_secs,
            cap_secs=self.backoff_cap_secs,
            jitter_fraction=self.jitter_fraction,
        )

    def __post_init__(self) -> None:
        if self.ttl_secs <= 0 or (self.timeout_secs is not None and self.timeout_secs <= 0):
            raise ValueError("ttl_secs and timeout_secs must be > 0")
        if self.stale_factor < 1.0:
            raise ValueError(f"stale_factor must be >= 1, got {self.stale_factor}")


class CachedSource(Generic[T]):
    def __init__(
        self,
        name: str,
        fetch: Callable[[], Awaitable[T]],
        clock: Clock,
        policy: CachePolicy,
        *,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.name = name
        self._fetch = fetch
        self._clock = clock
        self.policy = policy
        self._rand = rand
        self._lock = asyncio.Lock()
        self._value: T | None = None
        self._fetched_mono: float | None = None
        self._fetched_ms: int | None = None
        self._failures = 0
        self._next_attempt_mono = float("-inf")
        self._last_error: str | None = None
        #: provider requests made (for tests and the status line)
        self.requests = 0
        #: the answer for good once the provider said it can never answer (before any value)
        self._refused: Cached[T] | None = None
        #: the "stale since" reason last written and what it was written of (stale-since ms,
        #: last error): a source past its stale limit gives it at every read until it recovers
        self._stale_reason: tuple[int, str | None, str] | None = None

    @property
    def settled(self) -> Cached[T] | None:
        """The answer every ``read`` gives from now on (the provider said it can never have the
        data), or None: a reader holding it need not read (``DerivativesMonitor`` does not)."""
        return self._refused

    def answer_now(self) -> Cached[T] | None:
        """What ``read`` answers now without asking the provider, suspending or changing
        anything: the settled answer, or a value still within its TTL while no request is in
        flight (no request is made for it, so it need not queue behind the lock). None when
        ``read`` would ask the provider or wait for the request in flight."""
        refused = self._refused
        if refused is not None:  # what ``_served`` would build again at every read
            return refused
        now = self._clock.monotonic_secs()
        if self._is_fresh(now) and not self._lock.locked():
            return self._served(now)
        return None

    async def read(self) -> Cached[T]:
        answer = self.answer_now()
        if answer is not None:
            return answer
        async with self._lock:
            now = self._clock.monotonic_secs()
            if self._is_fresh(now):
                return self._served(now)
            if now >= self._next_attempt_mono:
                await self._refresh(now)
            return self._served(self._clock.monotonic_secs())

    def _is_fresh(self, now: float) -> bool:
        return self._fetched_mono is not None and now - self._fetched_mono < self.policy.ttl_secs

    async def _refresh(self, now: float) -> None:
        self.requests += 1
        try:
            value = await self._fetch_bounded()
        except asyncio.CancelledError:
            raise
        except SourceNeverAvailableError as exc:
            self._note_failure(now, str(exc), delay_secs=math.inf)
            if self._fetched_mono is None:
                self._refused = Cached(None, self._last_error)
            return
        except SourceNotAvailableError as exc:
            self._note_failure(now, str(exc), delay_secs=self.policy.ttl_secs)
            return
        except TimeoutError:
            limit = self.policy.timeout_secs
            reason = "timed out" if limit is None else f"no answer within {limit:g} s"
            self._note_backoff(now, reason, None)
            return
        except SourceFailedError as exc:
            self._note_backoff(now, str(exc), exc.retry_after_secs)
            return
        except Exception as exc:  # a bug or an unexpected shape: logged loudly, still a reason
            log.exception("%s: unexpected error", self.name)
            self._note_backoff(now, f"unexpected error: {type(exc).__name__}: {exc}", None)
            return
        self._value = value
        # aged from the answer, not the request: under a fast scaled clock a slow answer would
        # otherwise arrive already stale (the timeout above is in real seconds, for sockets)
        self._fetched_mono, self._fetched_ms = self._clock.monotonic_secs(), self._clock.now_ms()
        self._failures, self._last_error = 0, None
        self._next_attempt_mono = float("-inf")

    async def _fetch_bounded(self) -> T:
        if self.policy.timeout_secs is None:
            return await self._fetch()
        async with asyncio.timeout(self.policy.timeout_secs):
            return await self._fetch()

    def _note_backoff(self, now: float, reason: str, retry_after_secs: float | None) -> None:
        delay = self.policy.backoff.delay_secs(self._failures, self._rand())
        if retry_after_secs is not None and not math.isnan(retry_after_secs):
            delay = max(delay, min(retry_after_secs, MAX_RETRY_AFTER_SECS))
        self._failures += 1
        self._note_failure(now, reason, delay_secs=delay)

    def _note_failure(self, now: float, reason: str, *, delay_secs: float) -> None:
        # The same reason again (a source that is off, or data the recording lacks) is news once;
        # repeating it every poll would bury the log. A new reason is logged at WARNING again.
        level = logging.DEBUG if reason == self._last_error else logging.WARNING
        self._last_error = reason
        self._next_attempt_mono = now + delay_secs
        if math.isinf(delay_secs):
            log.log(level, "%s unavailable: %s (never asked again)", self.name, reason)
        else:
            log.log(level, "%s unavailable: %s (next try in %.0f s)", self.name, reason, delay_secs)

    def _served(self, now: float) -> Cached[T]:
        if self._fetched_mono is None or self._fetched_ms is None:
            return Cached(None, self._last_error or "not fetched yet")
        age = now - self._fetched_mono
        if age < self.policy.ttl_secs:
            return Cached(self._value, None, self._fetched_ms)
        if age < self.policy.ttl_secs * self.policy.stale_factor:
            return Cached(self._value, None, self._fetched_ms, stale=True)
        stale_since_ms = self._fetched_ms + int(self.policy.ttl_secs * 1000)
        error, known = self._last_error, self._stale_reason
        if known is None or known[0] != stale_since_ms or known[1] != error:
            last = f"; last error: {error}" if error else ""
            known = self._stale_reason = (
                stale_since_ms,
                error,
                f"stale since {_iso(stale_since_ms)}{last}",
            )
        return Cached(None, known[2], self._fetched_ms)


def _iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = [
    "CachePolicy",
    "Cached",
    "CachedSource",
    "SourceFailedError",
    "SourceNeverAvailableError",
    "SourceNotAvailableError",
]

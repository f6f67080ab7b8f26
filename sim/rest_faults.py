"""How the simulator's REST server refuses requests: Binance's weight limits and injected faults.

``WeightLimiter`` reproduces Binance's IP request-weight rules on SIMULATED time: every request
adds its weight to the current 1-minute window (windows align to the sim clock's minutes, like
``X-MBX-USED-WEIGHT-1M``); once the window's budget is exceeded the server answers 429 with a
``Retry-After`` of the seconds left in the window; a client that keeps sending during that window
(more than ``requests_after_429_before_ban`` further requests) is banned: 418 with ``Retry-After``
until the ban ends. Bans grow for repeat offenders (2 minutes doubling, capped at 3 days), as Binance
documents. Budgets are per remote address, like Binance's per-IP limits.

``RestFaults`` lets a test or an operator make the server misbehave on demand: answer the next N
requests (optionally only those for one path) with 429 / 418 / 500 / 502 / 503, or delay them by
a number of REAL seconds (a slow server, to exercise client timeouts), or serve them and then rewrite
the answer's body (``rewrite_next``: a garbled, hostile or truncated answer, with the request's
effect, such as an order placed, kept). Everything injected is counted.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

MINUTE_MS: Final = 60_000
DEFAULT_WEIGHT_LIMIT_1M: Final = 2400
FIRST_BAN_SECS: Final = 120
MAX_BAN_SECS: Final = 3 * 86_400

#: statuses ``RestFaults.fail_next`` can inject
INJECTABLE_STATUSES: Final = frozenset({418, 429, 500, 502, 503})


@dataclass(frozen=True)
class Verdict:
    """The limiter's answer for one request: allowed, or refused with a status and Retry-After."""

    used_weight: int
    status: int | None = None  # None: serve it; 429 or 418: refuse
    retry_after_secs: int = 0
    banned_until_ms: int = 0


@dataclass
class _Budget:
    window: int = -1
    used: int = 0
    requests_after_429: int = 0
    banned_until_ms: int = 0
    bans: int = 0


class WeightLimiter:
    """Binance's per-IP 1-minute request-weight budget, on the simulated clock's minutes."""

    def __init__(
        self,
        limit_1m: int = DEFAULT_WEIGHT_LIMIT_1M,
        *,
        requests_after_429_before_ban: int = 3,
    ) -> None:
        if limit_1m < 1:
            raise ValueError(f"limit_1m must be >= 1, got {limit_1m}")
        if requests_after_429_before_ban < 0:
            raise ValueError("requests_after_429_before_ban must be >= 0")
        self.limit_1m = limit_1m
        self.requests_after_429_before_ban = requests_after_429_before_ban
        self._budgets: dict[str, _Budget] = {}
        self.rate_limited = 0  # 429s answered
        self.banned = 0  # 418s answered

    def used_weight(self, client: str, now_ms: int) -> int:
        budget = self._budgets.get(client)
        if budget is None or budget.window != now_ms // MINUTE_MS:
            return 0
        return budget.used

    def admit(self, client: str, weight: int, now_ms: int) -> Verdict:
        """Count a request of ``weight`` from ``client`` at sim time ``now_ms`` and judge it."""
        budget = self._budgets.setdefault(client, _Budget())
        if budget.banned_until_ms > now_ms:
            return self._ban_verdict(budget, now_ms)
        window = now_ms // MINUTE_MS
        if budget.window != window:
            budget.window, budget.used, budget.requests_after_429 = window, 0, 0
        window_left_secs = max(1, math.ceil(((window + 1) * MINUTE_MS - now_ms) / 1000))
        if budget.used > self.limit_1m:
            # the client was already told 429 in this window and did not wait
            budget.requests_after_429 += 1
            if budget.requests_after_429 > self.requests_after_429_before_ban:
                ban_secs = min(MAX_BAN_SECS, FIRST_BAN_SECS * 2**budget.bans)
                budget.bans += 1
                budget.banned_until_ms = now_ms + ban_secs * 1000
                return self._ban_verdict(budget, now_ms)
            self.rate_limited += 1
            return Verdict(budget.used, 429, window_left_secs)
        budget.used += weight
        if budget.used > self.limit_1m:
            self.rate_limited += 1
            return Verdict(budget.used, 429, window_left_secs)
        return Verdict(budget.used)

    def _ban_verdict(self, budget: _Budget, now_ms: int) -> Verdict:
        self.banned += 1
        left_secs = max(1, math.ceil((budget.banned_until_ms - now_ms) / 1000))
        return Verdict(budget.used, 418, left_secs, budget.banned_until_ms)


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour for one request."""

    status: int | None  # None: no error status, only the delay (and the rewrite)
    delay_secs: float
    retry_after_secs: int
    #: served, then its JSON body replaced by ``rewrite(body)``: a JSON value, or bytes sent as
    #: they are (not JSON at all)
    rewrite: Callable[[Any], Any] | None = None


@dataclass
class _Rule:
    fault: Fault
    remaining: int
    path: str | None


@dataclass
class RestFaults:
    """Faults to inject into the next requests, first armed first served, with counters."""

    _rules: list[_Rule] = field(default_factory=list)
    #: injected faults by kind: "429", "418", "500", "502", "503", "delay", "rewrite"
    injected: Counter[str] = field(default_factory=Counter)

    def fail_next(
        self, status: int, count: int = 1, *, path: str | None = None, retry_after_secs: int = 1
    ) -> None:
        """Answer the next ``count`` requests (for ``path`` only, when given) with ``status``."""
        if status not in INJECTABLE_STATUSES:
            raise ValueError(f"status must be one of {sorted(INJECTABLE_STATUSES)}, got {status}")
        self._arm(Fault(status, 0.0, retry_after_secs), count, path)

    def delay_next(self, delay_secs: float, count: int = 1, *, path: str | None = None) -> None:
        """Hold the next ``count`` requests for ``delay_secs`` real seconds, then answer normally."""
        if delay_secs <= 0:
            raise ValueError(f"delay_secs must be > 0, got {delay_secs}")
        self._arm(Fault(None, delay_secs, 0), count, path)

    def rewrite_next(
        self, rewrite: Callable[[Any], Any], count: int = 1, *, path: str | None = None
    ) -> None:
        """Serve the next ``count`` requests, then answer ``rewrite(body)`` (200) instead."""
        self._arm(Fault(None, 0.0, 0, rewrite), count, path)

    def clear(self) -> None:
        self._rules.clear()

    @property
    def pending(self) -> int:
        """Requests still to be faulted by the armed rules."""
        return sum(rule.remaining for rule in self._rules)

    def take(self, path: str) -> Fault | None:
        """The fault for a request to ``path``, consuming it; None when no rule matches."""
        for rule in self._rules:
            if rule.path is None or rule.path == path:
                rule.remaining -= 1
                if rule.remaining == 0:
                    self._rules.remove(rule)
                fault = rule.fault
                kind = (
                    "rewrite"
                    if fault.rewrite is not None
                    else "delay"
                    if fault.status is None
                    else str(fault.status)
                )
                self.injected[kind] += 1
                return rule.fault
        return None

    def _arm(self, fault: Fault, count: int, path: str | None) -> None:
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count}")
        self._rules.append(_Rule(fault, count, path))


__all__ = [
    "DEFAULT_WEIGHT_LIMIT_1M",
    "INJECTABLE_STATUSES",
    "Fault",
    "RestFaults",
    "Verdict",
    "WeightLimiter",
]

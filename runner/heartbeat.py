"""Heartbeat loop and the health check the container's HEALTHCHECK runs (``vigil health``).

The loop rewrites ``<state>/heartbeat`` every ``interval_secs`` of the daemon's clock with a small
JSON object: the daemon's instant (``at_ms``), its pid, when watching started, the last valid market
frame per stream, the trading state and the journal's write fault. ``check_health`` judges it:

- the file's modification time against real time (Docker judges liveness in real seconds);
- every configured stream must have had a valid frame within ``market_stale_secs`` (a cut network or
  a feed that only sends garbage leaves the daemon alive but blind);
- the journal must be writable; trading must not be HALTED.

Each failing check is one reason line.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.clock import Clock

log = logging.getLogger(__name__)

#: what the daemon adds to each beat: {"market": {stream: ms | None}, "trading": {...},
#: "journal_error": str | None}
Facts = Callable[[], Mapping[str, Any]]


class Heartbeat:
    def __init__(
        self,
        clock: Clock,
        path: Path,
        interval_secs: float,
        *,
        on_beat: Callable[[], None] | None = None,
        facts: Facts | None = None,
    ) -> None:
        self._clock = clock
        self._path = path
        self._interval_secs = interval_secs
        self._on_beat = on_beat
        self._facts = facts
        self._started_ms: int | None = None
        self.beats = 0

    def beat(self) -> None:
        now_ms = self._clock.now_ms()
        if self._started_ms is None:
            self._started_ms = now_ms
        document: dict[str, Any] = {"at_ms": now_ms, "pid": os.getpid()}
        document["started_ms"] = self._started_ms
        if self._facts is not None:
            document.update(self._facts())
        # tmp + rename: `vigil health` never reads half a beat
        tmp = self._path.with_name(self._path.name + ".tmp")
        tmp.write_text(json.dumps(document, sort_keys=True) + "\n")
        os.replace(tmp, self._path)
        self.beats += 1

    async def run(self) -> None:
        while True:
            self.beat()
            if self._on_beat is not None:
                self._on_beat()
            await self._clock.sleep(self._interval_secs)


@dataclass(frozen=True)
class HealthStatus:
    healthy: bool
    reason: str
    age_secs: float | None
    reasons: tuple[str, ...] = ()  # one per failing check (``reason`` when only liveness failed)


def check_health(
    path: Path,
    stale_secs: float,
    now_wall_secs: float,
    *,
    market_stale_secs: float | None = None,
) -> HealthStatus:
    """Healthy when the heartbeat is fresh and (if it carries them) the market, the journal and
    trading are fine. ``market_stale_secs=None`` skips the market check."""
    try:
        mtime_secs = path.stat().st_mtime
        text = path.read_text()
    except FileNotFoundError:
        return _unhealthy(f"no heartbeat file at {path}", None)
    except OSError as exc:
        return _unhealthy(f"cannot read heartbeat {path}: {exc}", None)
    age_secs = now_wall_secs - mtime_secs
    if age_secs > stale_secs:
        return _unhealthy(
            f"heartbeat is stale: {age_secs:.0f} s old (limit {stale_secs:.0f} s)", age_secs
        )
    try:
        document = json.loads(text)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return HealthStatus(True, f"heartbeat {age_secs:.1f} s old (no details)", age_secs)
    reasons = [
        *_market_reasons(document, age_secs, market_stale_secs),
        *_journal_reasons(document),
        *_trading_reasons(document),
    ]
    if reasons:
        return HealthStatus(False, "; ".join(reasons), age_secs, tuple(reasons))
    return HealthStatus(
        True, f"heartbeat {age_secs:.1f} s old; market, journal, trading ok", age_secs
    )


def _unhealthy(reason: str, age_secs: float | None) -> HealthStatus:
    return HealthStatus(False, reason, age_secs, (reason,))


def _market_reasons(
    document: Mapping[str, Any], age_secs: float, limit_secs: float | None
) -> list[str]:
    market = document.get("market")
    if limit_secs is None or not isinstance(market, dict):
        return []
    at_ms, started_ms = document.get("at_ms"), document.get("started_ms")
    if not isinstance(at_ms, int) or not market:
        return []
    silent: list[tuple[str, float]] = []
    for stream, last_ms in sorted(market.items()):
        since_ms = last_ms if isinstance(last_ms, int) else started_ms
        if not isinstance(since_ms, int):
            continue
        # the silence as of the beat, plus the beat's own age
        silence_secs = (at_ms - since_ms) / 1000 + age_secs
        if silence_secs > limit_secs:
            silent.append((stream, silence_secs))
    if not silent:
        return []
    shown = ", ".join(
        f"{stream} {secs:.0f} s" + ("" if isinstance(market[stream], int) else " (never)")
        for stream, secs in silent
    )
    return [
        f"market: no valid frame within {limit_secs:.0f} s on {len(silent)} of {len(market)} "
        f"streams ({shown})"
    ]


def _journal_reasons(document: Mapping[str, Any]) -> list[str]:
    error = document.get("journal_error")
    return [f"journal: cannot be written ({error})"] if error else []


def _trading_reasons(document: Mapping[str, Any]) -> list[str]:
    trading = document.get("trading")
    if not isinstance(trading, dict) or trading.get("mode") != "halted":
        return []
    return [
        f"trading: HALTED by {trading.get('by') or 'unknown'}: "
        f"{trading.get('reason') or 'no reason given'} (resume with `vigil trading resume`)"
    ]

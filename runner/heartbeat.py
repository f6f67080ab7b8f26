"""Heartbeat loop and the health check the container's HEALTHCHECK runs (``vigil health``).

The loop rewrites ``<state>/heartbeat`` every ``interval_secs`` of the daemon's clock with a small
JSON object: the daemon's instant (``at_ms``), its pid, when watching started, the last valid market
frame per stream, the trading state and the journal's write fault. ``check_health`` judges it:

- the file's modification time against real time (Docker judges liveness in real seconds); one
  dated in the future is not fresh (``state.heartbeat_age``);
- the file must be a beat: a JSON object with the instant and pid every beat carries (anything
  else there, fresh, says nothing of the daemon);
- some stream must have had a valid frame within ``market_stale_secs`` real seconds (a cut network
  or a feed that only sends garbage leaves the daemon alive but blind);
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
from typing import Any, Final, TypeGuard

from core.clock import Clock
from core.failure_streak import FailureStreak
from core.jsonread import loads_json
from core.regular_file import read_regular_file
from state.atomic import atomic_write_bytes, overwrite_bytes, remove_stale_tmp_files
from state.heartbeat_age import FutureHeartbeatError, heartbeat_age_secs

log = logging.getLogger(__name__)

#: the most of the heartbeat file that is read: a beat is about a kilobyte
HEARTBEAT_MAX_BYTES: Final = 1 << 20

#: 9999-12-31T23:59:59.999Z, the last instant a date shows; a beat's at_ms past it is no time
LAST_INSTANT_MS: Final = 253_402_300_799_999

#: how much of a bad value a reason shows
SHOWN_MAX_CHARS: Final = 40

#: what the daemon adds to each beat: {"market": {stream: {"last_frame_ms": ms | None,
#: "silent_real_secs": s}}, "trading": {...}, "journal_error": str | None}
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
        atomic: bool = True,
    ) -> None:
        """``atomic=False`` (replay: nobody health-checks a run folder) writes the beat over the
        old one instead of renaming a new file onto it: ext4 flushes a file renamed over another
        at once, about 0.15 ms a beat against 0.01 ms; the bytes left are the same."""
        self._clock = clock
        self._atomic = atomic
        self._path = path
        self._interval_secs = interval_secs
        self._on_beat = on_beat
        self._facts = facts
        self._started_ms: int | None = None
        self._unwritten = FailureStreak()
        self.beats = 0

    def beat(self) -> None:
        now_ms = self._clock.now_ms()
        if self._started_ms is None:
            self._started_ms = now_ms
        document: dict[str, Any] = {"at_ms": now_ms, "pid": os.getpid()}
        document["started_ms"] = self._started_ms
        if self._facts is not None:
            document.update(self._facts())
        data = (json.dumps(document, sort_keys=True) + "\n").encode()
        if self._atomic:  # tmp + rename: `vigil health` never reads half a beat
            # a fresh name made with O_EXCL: a fixed one (heartbeat.tmp) was opened through a
            # symlink planted there, so each beat overwrote the file it pointed at
            atomic_write_bytes(self._path, data, durable=False)
        else:
            overwrite_bytes(self._path, data)  # a symlink or a FIFO there is an OSError
        self.beats += 1

    def _beat_or_say_why(self) -> None:
        """A beat that cannot be written (a full disk) must not end the loop: the status line
        rides on it, and a restarting loop would log a traceback every beat. The stale file is
        what ``vigil health`` reports meanwhile; the log says why, once, and when it ends."""
        try:
            self.beat()
        except OSError as exc:
            if self._unwritten.failed():
                log.error("cannot write the heartbeat %s: %s; retrying every beat", self._path, exc)
            return
        if self._unwritten.ended():
            log.warning("the heartbeat %s is written again", self._path)

    async def run(self) -> None:
        if self._atomic:  # a beat torn by a crash (the daemon lock keeps out another writer)
            remove_stale_tmp_files(self._path)
        while True:
            self._beat_or_say_why()
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
        # a FIFO there hung the check (the HEALTHCHECK, vigil status); a sparse file of gigabytes
        # was read whole. A beat is a kilobyte or so
        st, raw = read_regular_file(path, max_bytes=HEARTBEAT_MAX_BYTES)
        mtime_secs = st.st_mtime
    except FileNotFoundError:
        return _unhealthy(f"no heartbeat file at {path}", None)
    except OSError as exc:
        return _unhealthy(f"cannot read heartbeat {path}: {exc}", None)
    try:
        age_secs = heartbeat_age_secs(mtime_secs, now_wall_secs)
    except FutureHeartbeatError as exc:
        return _unhealthy(f"{exc} ({path})", None)
    if age_secs > stale_secs:
        return _unhealthy(
            f"heartbeat is stale: {age_secs:.0f} s old (limit {stale_secs:.0f} s)", age_secs
        )
    try:
        document = loads_json(raw)
    except ValueError as exc:  # UnreadableJsonError: not UTF-8, bad syntax, past json's limits
        return _unhealthy(f"heartbeat {path} is not a heartbeat: {exc}", age_secs)
    problem = _not_a_beat(document)
    if problem is not None:
        # a fresh file the daemon did not write (a person's edit, a restored junk file) says
        # nothing of the daemon: read as fresh, it kept a dead daemon's container healthy
        return _unhealthy(f"heartbeat {path} is not a heartbeat: {problem}", age_secs)
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


def _not_a_beat(document: object) -> str | None:
    """Why ``document`` is not a beat ``Heartbeat.beat`` writes, or None. Only what every beat
    carries is required: its instant on the daemon's clock and its pid. The instant is not judged
    against real time: under ``--sim`` it is the simulated clock's (the file's age is what tells
    liveness), but it must be a time a calendar holds."""
    if not isinstance(document, dict):
        return f"a JSON {_JSON_KINDS.get(type(document), 'value')}, not an object"
    at_ms = document.get("at_ms")
    if not _is_int(at_ms) or not 0 <= at_ms <= LAST_INSTANT_MS:
        return f"at_ms is {_shown(document, 'at_ms')}, not a time in milliseconds (up to year 9999)"
    pid = document.get("pid")
    if not _is_int(pid) or pid <= 0:
        return f"pid is {_shown(document, 'pid')}, not a process id"
    return None


_JSON_KINDS: Final[Mapping[type, str]] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "true or false",
    type(None): "null",
}


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON's true is no number


def _shown(document: Mapping[str, Any], key: str) -> str:
    """The key's value as JSON, cut: a value of a megabyte makes one line of the HEALTHCHECK's
    log."""
    if key not in document:
        return "missing"
    text = json.dumps(document[key])
    return text if len(text) <= SHOWN_MAX_CHARS else f"{text[:SHOWN_MAX_CHARS]}... (cut)"


def _market_reasons(
    document: Mapping[str, Any], age_secs: float, limit_secs: float | None
) -> list[str]:
    """Unhealthy when no stream had a valid frame within ``limit_secs`` real seconds (as of the
    beat, plus the beat's age): the daemon is alive but blind. A single quiet stream is the
    listener's business (it reconnects it); its silence is named only when the whole market is."""
    market = document.get("market")
    if limit_secs is None or not isinstance(market, dict) or not market:
        return []
    silences: dict[str, float] = {}
    for stream, report in market.items():
        silent = report.get("silent_real_secs") if isinstance(report, dict) else None
        if isinstance(silent, (int, float)):
            silences[stream] = silent + age_secs
    if not silences or min(silences.values()) <= limit_secs:
        return []
    never = [s for s in silences if not market[s].get("last_frame_ms")]
    what = (
        "since the daemon started watching"
        if len(never) == len(silences)
        else f"for {min(silences.values()):.0f} s"
    )
    return [
        f"market: no valid frame on any of {len(silences)} streams {what} "
        f"(limit {limit_secs:.0f} s; network cut or every frame rejected?)"
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

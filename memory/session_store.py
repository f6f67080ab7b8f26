"""The session tier: the working context between decisions, in L1 (memory) and L2 (files).

Write-through: ``set`` writes both; ``get`` reads L1, then L2 (and back-fills L1). Every entry has a
TTL; an expired entry is evicted lazily, from both levels, when it is read. L2 lives in
``sessions/`` in the state dir, one JSON file per key, so the working context (the last decision's
reasoning per ticker, the open thesis per position) survives a restart.

Keys are ``ticker:{name}:{phase}[:{sub}]`` with normalised names: ``BTC/USDT``, ``btc-usdt`` and
``BTCUSDT`` are all ``btc_usdt``; phases are signals, analysis, decision, review, reflection.
"""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path
from typing import Any, Literal, get_args

import orjson
from pydantic import BaseModel, ConfigDict

from core.clock import Clock
from core.failure_streak import FailureStreak
from core.regular_file import read_regular_file
from core.unvalidated import require_plain, unvalidated
from state.atomic import atomic_write_bytes, overwrite_bytes
from state.line_text import terminal_safe_json_bytes

log = logging.getLogger(__name__)

Phase = Literal["signals", "analysis", "decision", "review", "reflection"]
PHASES: tuple[str, ...] = get_args(Phase)
_QUOTES = ("USDT", "USDC", "BUSD", "USD")
_NAME_PART = re.compile(r"[^a-z0-9]+")
#: sets a non-durable store (replay) holds back at most before writing their files
SESSION_WRITE_BEHIND = 256
#: the largest session file read: an entry is a few hundred bytes
SESSION_FILE_MAX_BYTES = 1 << 20


@functools.lru_cache(maxsize=1024)  # every decision names its tickers again
def normalise_name(name: str) -> str:
    """``BTC/USDT`` -> ``btc_usdt``; a bare Binance symbol is split at its quote currency."""
    raw = name.strip()
    if not re.search(r"[^A-Za-z0-9]", raw):
        upper = raw.upper()
        for quote in _QUOTES:
            if upper.endswith(quote) and len(upper) > len(quote):
                raw = f"{upper[: -len(quote)]}/{quote}"
                break
    normal = _NAME_PART.sub("_", raw.lower()).strip("_")
    if not normal:
        raise ValueError(f"not a name: {name!r}")
    return normal


def session_key(name: str, phase: str, sub: str | None = None) -> str:
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r} (one of {', '.join(PHASES)})")
    key = f"ticker:{normalise_name(name)}:{phase}"
    return key if sub is None else f"{key}:{normalise_name(sub)}"


class SessionEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    value: Any
    written_at_ms: int
    expires_at_ms: int


require_plain(SessionEntry, frozenset({"key", "value", "written_at_ms", "expires_at_ms"}))
#: the leaves of a value whose JSON dump is an equal copy that orjson writes alike
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _entry_and_bytes(key: str, value: Any, now: int, expires: int) -> tuple[SessionEntry, bytes]:
    """``SessionEntry(...)`` and ``orjson.dumps(entry.model_dump(mode="json"))``. A decision sets
    each ticker's entry with a text or a flat dict of plain values: then validation would change
    nothing and the dump would be the fields as they are (validating and dumping the ``Any`` value
    was three quarters of a set). Anything else is validated and dumped as before."""
    kind = type(value)
    if (
        type(key) is str
        and type(now) is int
        and type(expires) is int
        and (
            kind is str
            or (
                kind is dict
                and all(type(k) is str for k in value)
                and set(map(type, value.values())) <= _LEAVES
            )
        )
    ):
        fields = {"key": key, "value": value, "written_at_ms": now, "expires_at_ms": expires}
        return unvalidated(SessionEntry, fields), orjson.dumps(fields)
    entry = SessionEntry(key=key, value=value, written_at_ms=now, expires_at_ms=expires)
    return entry, orjson.dumps(entry.model_dump(mode="json"))


class SessionStore:
    def __init__(
        self,
        directory: Path,
        clock: Clock,
        *,
        default_ttl_secs: float = 86_400.0,
        durable: bool = True,
        write_behind: int = 0,
        remove_files: bool = True,
    ) -> None:
        """``write_behind``: at most this many sets held back before their files are written
        (0: each set writes its file). Each decision sets every ticker's key with new bytes
        (the time is in them), and a file write was most of a set; held back, a key set again
        is written once. ``flush`` writes what is held back; another process sees a set only
        then (replay: at most ``write_behind`` sets late, and at shutdown), a crash loses it.
        ``remove_files`` False: an expired or unreadable entry is left out, its file left in
        place (a reader that changes nothing: `vigil prompt`)."""
        self._remove_files = remove_files
        self.directory = directory
        self._clock = clock
        self.default_ttl_secs = default_ttl_secs
        self._durable = durable
        self._l1: dict[str, SessionEntry] = {}
        self._l2_keys: set[str] | None = None  # listed once, then kept by set / delete
        self._files: dict[str, Path] = {}  # key -> its file (a decision sets the same keys)
        self._sorted: list[str] | None = None  # both levels' keys, until one is added or removed
        self.l2_reads = 0  # how often L1 missed (for tests and the status)
        self._write_behind = write_behind
        self._held: dict[str, bytes] = {}  # key -> its file's bytes, not yet written
        self._held_sets = 0  # sets since the last flush
        self._unwritten = FailureStreak()  # held files that could not be written

    def _file(self, key: str) -> Path:
        path = self._files.get(key)
        if path is None:
            path = self._files[key] = self.directory / (key.replace(":", "__") + ".json")
        return path

    def set(self, key: str, value: Any, ttl_secs: float | None = None) -> SessionEntry:
        now = self._clock.now_ms()
        ttl = self.default_ttl_secs if ttl_secs is None else ttl_secs
        entry, data = _entry_and_bytes(key, value, now, now + int(ttl * 1000))
        self._known(key)
        self._held[key] = data
        self._held_sets += 1
        self._l1[key] = entry
        if self._l2_keys is not None:
            self._l2_keys.add(key)
        if self._held_sets >= max(self._write_behind, 1):
            self._flush_or_say_why()
        return entry

    def _flush_or_say_why(self) -> None:
        """A file that cannot be written (a full disk) stays held, its entry in L1 for the
        prompts, and is written by the next set that can: a set must not fail the decision's
        write-back (its MEMORY.md line, the other tickers' entries) with a traceback each
        time. Logged when it starts and when it ends; a crash meanwhile loses what is held."""
        try:
            self.flush()
        except OSError as exc:
            if self._unwritten.failed():
                log.error(
                    "session: %s; %d entries kept in memory, written when it can",
                    exc,
                    len(self._held),
                )
            return
        if self._unwritten.ended():
            log.warning("session: files in %s written again", self.directory)

    def flush(self) -> None:
        """Write the files of the sets held back (write-behind); a file that cannot be written
        keeps its key held, the others are written all the same (stopped at it, a folder in
        place of one key's file kept every later key in memory only), and its error is raised."""
        failed: OSError | None = None
        for key in list(self._held):
            try:
                self._write(self._file(key), self._held[key])
            except OSError as exc:
                failed = failed or exc
                continue
            del self._held[key]
        if failed is not None:
            raise failed
        self._held_sets = 0

    def _write(self, path: Path, data: bytes) -> None:
        data = terminal_safe_json_bytes(data)  # a model's reasoning may hold DEL or C1 (U+009B)
        write = atomic_write_bytes if self._durable else overwrite_bytes
        try:
            write(path, data)
        except FileNotFoundError:  # no directory: the first write, or it was removed since
            self.directory.mkdir(parents=True, exist_ok=True)
            write(path, data)

    def _known(self, key: str) -> None:
        """``key`` is about to be in L1: the sorted keys are made again if it is new to both."""
        if key not in self._l1 and (self._l2_keys is None or key not in self._l2_keys):
            self._sorted = None

    def entry(self, key: str) -> SessionEntry | None:
        entry = self._l1.get(key)
        if entry is None:
            entry = self._read_l2(key)
            if entry is None:
                return None
            self._known(key)
            self._l1[key] = entry  # back-fill
        if entry.expires_at_ms <= self._clock.now_ms():
            self.delete(key)  # lazy eviction
            return None
        return entry

    def get(self, key: str, default: Any = None) -> Any:
        entry = self.entry(key)
        return default if entry is None else entry.value

    def delete(self, key: str) -> None:
        error = self._drop(key)
        if error is not None:
            log.warning("session entry %s dropped; its file cannot be removed: %s", key, error)

    def _drop(self, key: str) -> OSError | None:
        """Gone from both levels, even when its file cannot be removed (a folder in its place,
        left to whoever made it): raised, a read left out every key of the session tier and a
        sell the rest of its decision's write-back."""
        self._sorted = None
        self._held.pop(key, None)
        self._l1.pop(key, None)
        if self._l2_keys is not None:
            self._l2_keys.discard(key)
        if not self._remove_files:
            return None
        try:
            self._file(key).unlink(missing_ok=True)
        except OSError as exc:
            return exc
        return None

    def _read_l2(self, key: str) -> SessionEntry | None:
        self.l2_reads += 1
        try:
            # a FIFO blocked read_bytes (the event loop with it), a link to /dev/zero read on
            # until memory ran out: only a regular file is read, and only so much of it
            _, data = read_regular_file(self._file(key), max_bytes=SESSION_FILE_MAX_BYTES)
            entry = SessionEntry.model_validate(orjson.loads(data))
            if entry.key != key:  # taken as true, "policy" replaced the organisation's text
                raise ValueError(f"it holds the entry of another key, {entry.key[:80]!r}")
            return entry
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # a torn or hand-edited file: report, drop it
            kept = self._drop(key)
            log.warning(
                "session entry %s unreadable, dropped: %s%s",
                key,
                exc,
                "" if kept is None else " (the path is left as it is)",
            )
            return None

    def keys(self, prefix: str = "") -> list[str]:
        """Keys with ``prefix`` in either level (expired ones included until read)."""
        if self._l2_keys is None:
            found = self.directory.glob("*.json") if self.directory.is_dir() else ()
            self._l2_keys = {p.stem.replace("__", ":") for p in found}
            self._sorted = None
        if self._sorted is None:
            self._sorted = sorted(self._l2_keys | set(self._l1))
        return [k for k in self._sorted if k.startswith(prefix)]

    def live(self, prefix: str = "") -> list[SessionEntry]:
        """The unexpired entries under ``prefix``, by key (reading evicts the expired)."""
        found = (self.entry(key) for key in self.keys(prefix))
        return [e for e in found if e is not None]

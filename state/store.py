"""``RunnerStateStore``: ``runner_state.json`` on disk, shared between the daemon and a person.

The daemon owns the bookkeeping fields and writes the file atomically; a person may edit the
editable fields (``agent_memory``, ``notes``) at any time, with any editor. The store:

- refuses to start on a file it cannot trust (not JSON, invalid, from a newer vigil), and never
  overwrites or deletes such a file;
- notices edits (``poll``, cheap: compares (mtime_ns, size, inode), so both in-place writes and
  editors that write a new file and rename it are seen; the bytes are compared too until a stamp
  has been confirmed, because file times are coarse) and merges a valid edit's editable fields
  into the live state;
- keeps the last good state on an invalid edit and, before it next writes the file, copies the
  rejected text to ``runner_state.json.rejected-<timestamp>`` so a person's words are never lost;
- re-checks the file before every write (``save``), so an edit made since the last poll is merged
  rather than overwritten; and writes by atomic exchange (``atomic_swap_bytes``), getting back
  exactly what it replaced, so even an edit that lands between that check and the write is seen
  and merged (or kept aside). Where the file system cannot exchange files, the store falls back
  to checking once more right before a plain rename (logged once); an edit landing in the
  microseconds between that check and the rename is then lost. An in-place editor still writing
  into the old file after the exchange writes into a file that is gone; what it had written by
  then is judged (and kept aside if incomplete).

Each edit is logged here (never a silent failure) and returned as a ``StateEditReport`` for
callers that act on it (e.g. the agent's memory changed).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NamedTuple

from core.backoff import Backoff
from core.clock import Clock
from core.errors import RefuseToStartError, RetryableError
from core.redact import Redactor
from state.atomic import (
    SwapUnsupportedError,
    atomic_swap_bytes,
    atomic_write_bytes,
    remove_stale_tmp_files,
    tmp_path_for,
)
from state.edits import FieldChange, StateEditReport
from state.last_good import last_good_path, read_last_good, write_last_good
from state.memory_clip import clip_memory
from state.memory_history import Author, MemoryVersion, find_version, memory_history, with_version
from state.models import (
    DAEMON_FIELDS,
    EDITABLE_FIELDS,
    SCHEMA_VERSION,
    InvalidStateFileError,
    NewerSchemaError,
    RunnerState,
    parse_state_bytes,
    render_state,
)
from state.naming import unused_sibling
from state.trading import TradingState

log = logging.getLogger(__name__)

#: a save retries this many times when a person keeps changing the file under it
MAX_SAVE_ATTEMPTS: Final = 5
#: reads of a file that changes while being read are retried this many times
MAX_READ_ATTEMPTS: Final = 3
WATCH_BACKOFF_CAP_SECS: Final = 60.0
WATCH_BACKOFF_JITTER_FRACTION: Final = 0.5
#: daemon-owned fields a person's edit is compared on, to report the ones it ignored
_COMPARED_DAEMON_FIELDS: Final = (*DAEMON_FIELDS, "updated_at_ms")


class FileStamp(NamedTuple):
    """What ``poll`` compares: any write, in place or by rename, changes at least one of these."""

    mtime_ns: int
    size: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileStamp:
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True)
class _FileView:
    """What the store knows the file holds. ``data is None``: there is no file.

    File times are coarse (a kernel tick, a few ms), so an in-place edit of the same size right
    after the store read or wrote the file can keep the same stamp. Until a later poll has re-read
    the bytes under an unchanged stamp (``confirmed``), the stamp alone is not trusted.
    """

    stamp: FileStamp | None
    data: bytes | None
    confirmed: bool = False


@dataclass(frozen=True)
class _RejectedEdit:
    data: bytes
    report: StateEditReport


class StateSaveConflictError(RetryableError):
    """``save`` gave up because the file kept changing; ``reports`` are the edits it merged."""

    def __init__(self, message: str, reports: tuple[StateEditReport, ...]) -> None:
        super().__init__(message)
        self.reports = reports


class _ChangedWhileSavingError(Exception):
    """(check-then-rename mode) The file changed between the check and the rename: look again."""


class _FileInFluxError(Exception):
    """The file kept changing while it was read; read it again later."""


class RunnerStateStore:
    """The daemon's persistent state (see the module docstring). Not thread-safe: one owner."""

    def __init__(self, path: Path, clock: Clock, redactor: Redactor | None = None) -> None:
        self._path = Path(path)
        self._clock = clock
        self._redactor = redactor or Redactor()  # memory notes are re-sent: no secret in them
        self._current: RunnerState | None = None
        # the daemon-owned values the file had when last written or loaded: a person's edit that
        # differs from them changed daemon-owned fields, which is reported as ignored
        self._baseline = RunnerState()
        self._file = _FileView(None, None)
        self._rejected: _RejectedEdit | None = None
        self._last_report: StateEditReport | None = None
        self._swap_supported = True
        self._last_good_path = last_good_path(self._path)
        self._last_good_data: bytes | None = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def current(self) -> RunnerState:
        """The last good state (frozen). Raises ``RuntimeError`` before ``load``."""
        return self._require_loaded()

    @property
    def last_report(self) -> StateEditReport | None:
        """The most recent edit report (also returned by ``poll``/``save`` and logged)."""
        return self._last_report

    # --- startup ---------------------------------------------------------------------------

    def load(self) -> RunnerState:
        """Read the state at startup; defaults when there is no file yet.

        Raises ``RefuseToStartError`` when the state dir cannot be created or written, or when
        the file is unreadable, not JSON, invalid or from a newer schema. The file is then left
        exactly as it is.
        """
        self._prepare_state_dir()
        for stale in remove_stale_tmp_files(self._path):
            log.warning("removed %s, left by a write that was interrupted", stale)
        try:
            stamp_and_data = self._read_settled()
        except (OSError, _FileInFluxError) as exc:
            raise RefuseToStartError(
                f"cannot read the state file {self._path}: {exc}. Fix its permissions or move "
                "it aside (without it the daemon starts with empty state)."
            ) from None
        last_good = read_last_good(self._last_good_path)
        if last_good is not None:
            return self._load_over_last_good(stamp_and_data, *last_good)
        if stamp_and_data is None:
            log.info("no state file at %s yet: starting with empty state", self._path)
            self._current = RunnerState()
            self._file = _FileView(None, None)
            return self._current
        stamp, data = stamp_and_data
        try:
            state, found_version = parse_state_bytes(data)
        except InvalidStateFileError as exc:
            raise RefuseToStartError(
                f"the state file {self._path} cannot be used: {exc.problem}. Fix the file, or "
                "move it aside to start with empty state (or run the vigil version that wrote "
                "it). Nothing was changed or deleted."
            ) from None
        if found_version < SCHEMA_VERSION:
            log.info(
                "state file %s is schema version %d; migrated to %d (rewritten on the next save)",
                self._path,
                found_version,
                SCHEMA_VERSION,
            )
        self._current = state
        self._baseline = state
        self._file = _FileView(stamp, data)
        return state

    def _load_over_last_good(
        self, shared: tuple[FileStamp, bytes] | None, good: RunnerState, good_data: bytes
    ) -> RunnerState:
        """Start from the daemon's own copy (``state.last_good``): its daemon-owned fields always,
        the shared file's editable fields when it is valid; a broken edit is reported, kept aside
        before the next write, and the last good notes stay."""
        self._current = good
        self._baseline = good
        self._last_good_data = good_data
        if shared is None:
            log.warning(
                "%s is missing; restored from the daemon's copy %s (delete both to start empty)",
                self._path,
                self._last_good_path,
            )
            self._file = _FileView(None, None)
            return good
        stamp, data = shared
        self._file = _FileView(stamp, data)
        if data == good_data:
            return good
        now_ms = self._clock.now_ms()
        try:
            edited, _ = parse_state_bytes(data)
        except NewerSchemaError as exc:
            raise RefuseToStartError(
                f"the state file {self._path} cannot be used: {exc.problem}. Run the vigil "
                "version that wrote it. Nothing was changed or deleted."
            ) from None
        except InvalidStateFileError as exc:
            report = StateEditReport(
                path=self._path, detected_at_ms=now_ms, accepted=False, error=exc.problem
            )
            self._rejected = _RejectedEdit(data, report)
            self._record(report)
            log.warning(
                "started from the daemon's copy %s: its own fields and the last good notes",
                self._last_good_path,
            )
            return good
        self._record(self._merge(edited, now_ms))
        return self.current

    def _prepare_state_dir(self) -> None:
        directory = self._path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
            probe = tmp_path_for(self._path)  # named like a tmp file: a crash here is cleaned up
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            probe.unlink()
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise RefuseToStartError(
                f"the state dir {directory} cannot be created or written ({reason}). Point "
                "VIGIL_STATE_DIR at a writable directory, or fix its ownership/permissions."
            ) from None

    # --- daemon-owned changes --------------------------------------------------------------

    def update(self, fn: Callable[[RunnerState], RunnerState]) -> RunnerState:
        """Apply ``fn`` to the current state; it may change only daemon-owned fields."""
        current = self.current
        proposed = fn(current)
        touched = [f for f in EDITABLE_FIELDS if getattr(proposed, f) != getattr(current, f)]
        if touched:
            raise ValueError(
                f"update() may not change {', '.join(touched)}: a person edits those "
                "(the daemon sets agent_memory through set_agent_memory())"
            )
        return self._commit(proposed.model_dump())

    def replace(self, **daemon_fields: Any) -> RunnerState:
        """Set daemon-owned fields, e.g. ``replace(entry_prices={"BTC/USDT": 97000.0})``."""
        not_daemon_owned = sorted(set(daemon_fields) - set(DAEMON_FIELDS))
        if not_daemon_owned:
            raise ValueError(
                f"replace() takes only daemon-owned fields {', '.join(DAEMON_FIELDS)}; "
                f"got {', '.join(not_daemon_owned)}"
            )
        return self._commit({**self.current.model_dump(), **daemon_fields})

    def set_agent_memory(self, text: str, author: Author = "model", note: str = "") -> str:
        """Store the agent's memory, secrets redacted, clipped to the limit at a sentence
        boundary, and kept as a new version with its author; returns what was stored."""
        redacted, redactions = self._redactor.redact(text)
        if redactions:
            log.warning("agent memory from the %s: %d secret(s) redacted", author, redactions)
        clipped = clip_memory(redacted)
        if len(clipped) < len(redacted):
            log.info("agent memory clipped from %d to %d characters", len(redacted), len(clipped))
        current = self.current
        extra = with_version(
            current.extra,
            clipped,
            author=author,
            at_ms=self._clock.now_ms(),
            redactions=redactions,
            note=note,
        )
        self._commit({**current.model_dump(), "agent_memory": clipped, "extra": extra})
        return clipped

    def memory_history(self) -> list[MemoryVersion]:
        return memory_history(self.current.extra)

    def rollback_memory(self, version: int) -> str:
        """A person restores version ``version`` (``KeyError`` if it is not kept)."""
        found = find_version(self.current.extra, version)
        return self.set_agent_memory(found.text, author="person", note=f"rollback to {version}")

    def set_trading(self, trading: TradingState) -> TradingState:
        """Set the trading state (ACTIVE / HALTED); a person may change it too (an editable field)."""
        self._commit({**self.current.model_dump(), "trading": trading.model_dump()})
        return trading

    def _commit(self, values: dict[str, Any]) -> RunnerState:
        # validate again: model_copy(update=...) and fn results may bypass validation
        values["updated_at_ms"] = self._clock.now_ms()
        self._current = RunnerState.model_validate(values)
        return self._current

    # --- a person's edits --------------------------------------------------------------------

    def poll(self) -> StateEditReport | None:
        """Check the file for an external change; merge or reject it. None when nothing changed.

        Costs one ``stat`` when the file is unchanged.
        """
        self._require_loaded()
        try:
            stamp: FileStamp | None = FileStamp.of(os.stat(self._path))
        except FileNotFoundError:
            stamp = None
        if stamp == self._file.stamp and (self._file.confirmed or stamp is None):
            return None
        try:
            return self._examine_file()
        except _FileInFluxError:
            log.debug("%s is being written; looking again on the next poll", self._path)
            return None

    def save(self) -> tuple[StateEditReport, ...]:
        """Write the current state atomically, after merging (or keeping aside) any pending edit.

        Returns the reports of the edits met while saving, oldest first: an edit made since the
        last poll, one that landed during the write, a rejected edit copied aside now. Writes
        nothing when the file already holds this state. If the file keeps changing under the
        save, raises ``StateSaveConflictError`` (a ``RetryableError``) carrying the reports; what
        was merged stays in memory for the next save.
        """
        self._require_loaded()
        reports: list[StateEditReport] = []
        for _ in range(MAX_SAVE_ATTEMPTS):
            try:
                reports += _some(self._examine_file())
            except _FileInFluxError:
                continue
            reports += _some(self._preserve_rejected_edit())
            to_write = self.current
            data = render_state(to_write)
            if data == self._file.data:
                return tuple(reports)
            expected = self._file.data
            if data != self._last_good_data:  # the daemon's copy first: see state.last_good
                write_last_good(self._last_good_path, data)
                self._last_good_data = data
            try:
                written, replaced = self._put(data, expected)
            except _ChangedWhileSavingError:
                continue
            if replaced != expected:
                # a person's edit landed between the check and the swap and is no longer on
                # disk: judge it now (merge, or keep it aside) and write again
                reports += self._judge_replaced(replaced)
            self._file = _FileView(FileStamp.of(written), data)
            self._baseline = to_write
            if replaced == expected:
                return tuple(reports)
        raise StateSaveConflictError(
            f"{self._path} kept changing while the state was being saved "
            f"({MAX_SAVE_ATTEMPTS} attempts); the latest state is kept in memory for the next save",
            tuple(reports),
        )

    def _put(self, data: bytes, expected: bytes | None) -> tuple[os.stat_result, bytes | None]:
        """Write ``data``; returns the written stat and what the file held just before."""
        if self._swap_supported:
            try:
                return atomic_swap_bytes(self._path, data)
            except SwapUnsupportedError as exc:
                self._swap_supported = False
                log.warning(
                    "cannot swap files atomically in %s (%s): saves fall back to check-then-"
                    "rename, where an edit landing in the microseconds between can be lost",
                    self._path.parent,
                    exc,
                )
        guard = functools.partial(self._ensure_holds, expected)
        return atomic_write_bytes(self._path, data, before_replace=guard), expected

    def _judge_replaced(self, replaced: bytes | None) -> list[StateEditReport]:
        if replaced is None:  # the file had been deleted meanwhile
            return []
        now_ms = self._clock.now_ms()
        try:
            edited, _ = parse_state_bytes(replaced)
        except InvalidStateFileError as exc:
            report = StateEditReport(
                path=self._path, detected_at_ms=now_ms, accepted=False, error=exc.problem
            )
            self._rejected = _RejectedEdit(replaced, self._record(report))
            return [report, *_some(self._preserve_rejected_edit())]
        return [self._record(self._merge(edited, now_ms))]

    async def watch(
        self, clock: Clock, interval_secs: float, *, after_poll: Callable[[], None] | None = None
    ) -> None:
        """Poll for a person's edits every ``interval_secs`` of ``clock`` time, until cancelled;
        ``after_poll`` lets an owner of an editable field act on what was merged."""
        if interval_secs <= 0:
            raise ValueError(f"interval_secs must be > 0, got {interval_secs}")
        backoff = Backoff(
            base_secs=interval_secs,
            cap_secs=max(interval_secs, WATCH_BACKOFF_CAP_SECS),
            jitter_fraction=WATCH_BACKOFF_JITTER_FRACTION,
        )
        failures = 0
        while True:
            try:
                self.poll()
                if after_poll is not None:
                    after_poll()
                failures = 0
                delay_secs = interval_secs
            except asyncio.CancelledError:
                raise
            except Exception:
                delay_secs = backoff.delay_secs(failures, random.random())
                failures += 1
                log.exception(
                    "checking %s for edits failed (%d in a row); next try in %.1f s",
                    self._path,
                    failures,
                    delay_secs,
                )
            await clock.sleep(delay_secs)

    def _examine_file(self) -> StateEditReport | None:
        """Read the file; if it differs from what the store knows, judge it as a person's edit."""
        stamp_and_data = self._read_settled()
        if stamp_and_data is None:
            if self._file.data is not None:
                log.warning("%s was deleted; the next save writes it again", self._path)
            self._file = _FileView(None, None)
            self._rejected = None
            return None
        stamp, data = stamp_and_data
        if data == self._file.data:
            self._file = _FileView(stamp, data, confirmed=stamp == self._file.stamp)
            return None
        now_ms = self._clock.now_ms()
        self._file = _FileView(stamp, data)
        try:
            edited, _ = parse_state_bytes(data)
        except InvalidStateFileError as exc:
            report = StateEditReport(
                path=self._path, detected_at_ms=now_ms, accepted=False, error=exc.problem
            )
            self._rejected = _RejectedEdit(data, report)
            return self._record(report)
        self._rejected = None  # the person replaced any rejected text with a valid edit
        return self._record(self._merge(edited, now_ms))

    def _merge(self, edited: RunnerState, now_ms: int) -> StateEditReport:
        current = self.current
        changed = [f for f in EDITABLE_FIELDS if getattr(edited, f) != getattr(current, f)]
        changes = tuple(
            FieldChange(
                field=f, old=_as_text(getattr(current, f)), new=_as_text(getattr(edited, f))
            )
            for f in changed
        )
        ignored = tuple(
            f for f in _COMPARED_DAEMON_FIELDS if getattr(edited, f) != getattr(self._baseline, f)
        )
        if changes:
            merged = {f: getattr(edited, f) for f in changed}
            self._current = current.model_copy(update={**merged, "updated_at_ms": now_ms})
            if "agent_memory" in merged:  # a person's note: redacted and versioned like any
                self.set_agent_memory(merged["agent_memory"], author="person")
        return StateEditReport(
            path=self._path,
            detected_at_ms=now_ms,
            accepted=True,
            changes=changes,
            ignored_fields=ignored,
        )

    def _preserve_rejected_edit(self) -> StateEditReport | None:
        """Copy the rejected text aside (the file is about to be overwritten); its report."""
        rejected = self._rejected
        if rejected is None:
            return None
        if not rejected.data.strip():
            # an emptied file (or one caught between an editor's truncate and write) holds no
            # words to keep; the daemon simply writes the last good state back
            self._rejected = None
            log.warning("%s was empty; writing the last good state back", self._path)
            return None
        copy_path = unused_sibling(self._path, "rejected", rejected.report.detected_at_ms)
        atomic_write_bytes(copy_path, rejected.data)
        self._rejected = None
        report = rejected.report.model_copy(update={"preserved_as": copy_path})
        log.warning(
            "the rejected edit of %s (%s) was saved as %s before the daemon rewrote the file",
            self._path,
            report.error,
            copy_path,
        )
        self._last_report = report
        return report

    def _require_loaded(self) -> RunnerState:
        if self._current is None:
            raise RuntimeError("RunnerStateStore.load() must run before the state is used")
        return self._current

    def _record(self, report: StateEditReport) -> StateEditReport:
        self._last_report = report
        if not report.accepted:
            log.error("%s", report.summary())
        elif report.ignored_fields:
            log.warning("%s", report.summary())
        else:
            log.info("%s", report.summary())
        return report

    def _ensure_holds(self, expected: bytes | None, _tmp: Path) -> None:
        """Raise if the file no longer holds ``expected`` (runs right before the rename)."""
        try:
            actual: bytes | None = _read_all(self._path)[1]
        except FileNotFoundError:
            actual = None
        if actual != expected:
            raise _ChangedWhileSavingError

    def _read_settled(self) -> tuple[FileStamp, bytes] | None:
        """The file's stamp and bytes, re-read while it changes under us; None if missing."""
        for _ in range(MAX_READ_ATTEMPTS):
            try:
                stamp, data = _read_all(self._path)
                after = FileStamp.of(os.stat(self._path))
            except FileNotFoundError:
                return None
            if after == stamp:
                return stamp, data
        raise _FileInFluxError(f"{self._path} kept changing while being read")


def _as_text(value: str | TradingState) -> str:
    """An editable field as a report shows it (the trading state as its one-line description)."""
    return value if isinstance(value, str) else value.describe()


def _some(report: StateEditReport | None) -> list[StateEditReport]:
    return [] if report is None else [report]


def _read_all(path: Path) -> tuple[FileStamp, bytes]:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return FileStamp.of(st), b"".join(chunks)

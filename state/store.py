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
  then is judged (and kept aside if incomplete). The file's reads and writes: ``state.state_file``.

Each edit is logged here (never a silent failure) and returned as a ``StateEditReport`` for
callers that act on it (e.g. the agent's memory changed).

Load, the daemon's changes, poll and save share one live state, one view of the file and one
pending rejected edit, so they stay in this class; what startup reads (``state.store_load``), the
file's bytes (``state.state_file``), the edit comparison (``state.edits``) and the watch loop
(``state.store_watch``) live apart.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from core.clock import Clock
from core.errors import RetryableError
from core.redact import Redactor
from core.regular_file import FileTooLargeError
from state.atomic import atomic_write_bytes
from state.edit_checks import parse_edit
from state.edits import StateEditReport, compare_edit
from state.last_good import last_good_path, write_last_good
from state.memory_clip import clip_memory
from state.memory_history import Author, MemoryVersion, find_version, memory_history, with_version
from state.models import (
    DAEMON_FIELDS,
    EDITABLE_FIELDS,
    InvalidStateFileError,
    RunnerState,
    render_state,
)
from state.naming import unused_sibling
from state.state_file import (
    ChangedWhileSavingError,
    FileInFluxError,
    FileStamp,
    FileView,
    StateFile,
)
from state.store_load import RejectedEdit, read_starting_point
from state.store_watch import watch_for_edits
from state.trading import TradingState

log = logging.getLogger(__name__)

#: a save retries this many times when a person keeps changing the file under it
MAX_SAVE_ATTEMPTS: Final = 5


class StateSaveConflictError(RetryableError):
    """``save`` gave up because the file kept changing; ``reports`` are the edits it merged."""

    def __init__(self, message: str, reports: tuple[StateEditReport, ...]) -> None:
        super().__init__(message)
        self.reports = reports


class RunnerStateStore:
    """The daemon's persistent state (see the module docstring). Not thread-safe: one owner."""

    def __init__(
        self,
        path: Path,
        clock: Clock,
        redactor: Redactor | None = None,
        *,
        edits: bool = True,
        durable: bool = True,
    ) -> None:
        """``edits=False`` (replay: nobody edits the file mid-run, and nothing watches it) makes
        ``save`` trust what the store last read or wrote instead of reading the file first; the
        atomic exchange still hands back an edit made anyway, which is then merged as ever.
        ``durable=False`` (replay: rerun, never recovered) writes both files without fsync: the
        same bytes, still through a temporary file renamed into place."""
        self._path = Path(path)
        self._edits = edits
        self._clock = clock
        self._redactor = redactor or Redactor()  # memory notes are re-sent: no secret in them
        self._current: RunnerState | None = None
        # the daemon-owned values the file had when last written or loaded: a person's edit that
        # differs from them changed daemon-owned fields, which is reported as ignored
        self._baseline = RunnerState()
        self._file = FileView(None, None)
        self._rejected: RejectedEdit | None = None
        self._last_report: StateEditReport | None = None
        self._durable = durable
        self._disk = StateFile(self._path, durable=durable)
        self._last_good_path = last_good_path(self._path)
        self._last_good_data: bytes | None = None
        self._rendered: tuple[RunnerState, bytes] | None = None
        self._not_a_file: FileStamp | None = None  # what poll last found there, said once

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
        """Read the state at startup (``state.store_load``); defaults when there is no file yet.

        Raises ``RefuseToStartError`` when the state dir cannot be created or written, or when
        the file is unreadable, not JSON, invalid or from a newer schema. The file is then left
        exactly as it is.
        """
        start = read_starting_point(self._disk, self._path, self._last_good_path, self._clock)
        self._current = start.state
        self._baseline = start.state
        self._file = start.file
        self._last_good_data = start.last_good_data
        if start.rejected is not None:
            self._rejected = start.rejected
            self._record(start.rejected.report)
            log.warning(
                "started from the daemon's copy %s: its own fields and the last good notes",
                self._last_good_path,
            )
        elif start.edited is not None:
            self._record(self._merge(start.edited, start.detected_at_ms))
        return self.current

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
        if stamp is not None and stamp == self._not_a_file:
            return None
        try:
            report = self._examine_file()
        except FileInFluxError:
            log.debug("%s is being written; looking again on the next poll", self._path)
            return None
        except IsADirectoryError as exc:
            # a FIFO or a folder put there: a condition to say once, not a failed look to retry
            # and log at every poll for as long as it stays (saves fail meanwhile: see save)
            self._not_a_file = stamp
            log.error(
                "%s: the daemon keeps its state in memory and cannot save it until that is "
                "removed (its next save writes the file)",
                exc,
            )
            return None
        self._not_a_file = None
        return report

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
                reports += _some(self._examine_file()) if self._edits else []
            except FileInFluxError:
                continue
            reports += _some(self._preserve_rejected_edit())
            to_write = self.current
            data = self._render(to_write)
            if data == self._file.data:
                return tuple(reports)
            expected = self._file.data
            if data != self._last_good_data:  # the daemon's copy first: see state.last_good
                write_last_good(self._last_good_path, data, durable=self._durable)
                self._last_good_data = data
            try:
                written, replaced = self._disk.put(data, expected)
            except ChangedWhileSavingError:
                continue
            if replaced != expected:
                # a person's edit landed between the check and the swap and is no longer on
                # disk: judge it now (merge, or keep it aside) and write again
                reports += self._judge_replaced(replaced)
            self._file = FileView(FileStamp.of(written), data)
            self._baseline = to_write
            if replaced == expected:
                return tuple(reports)
        raise StateSaveConflictError(
            f"{self._path} kept changing while the state was being saved "
            f"({MAX_SAVE_ATTEMPTS} attempts); the latest state is kept in memory for the next save",
            tuple(reports),
        )

    def _render(self, state: RunnerState) -> bytes:
        """``render_state``, once per state: the state is frozen all the way down, and most saves
        (one after every decision) find it unchanged."""
        rendered = self._rendered
        if rendered is None or rendered[0] is not state:
            rendered = self._rendered = (state, render_state(state))
        return rendered[1]

    def _judge_replaced(self, replaced: bytes | None) -> list[StateEditReport]:
        if replaced is None:  # the file had been deleted meanwhile
            return []
        now_ms = self._clock.now_ms()
        try:
            edited = parse_edit(replaced, self.current)
        except InvalidStateFileError as exc:
            report = StateEditReport(
                path=self._path, detected_at_ms=now_ms, accepted=False, error=exc.problem
            )
            self._rejected = RejectedEdit(replaced, self._record(report))
            return [report, *_some(self._preserve_rejected_edit())]
        return [self._record(self._merge(edited, now_ms))]

    async def watch(
        self, clock: Clock, interval_secs: float, *, after_poll: Callable[[], None] | None = None
    ) -> None:
        """Poll for a person's edits every ``interval_secs`` of ``clock`` time, until cancelled;
        ``after_poll`` lets an owner of an editable field act on what was merged."""
        await watch_for_edits(self.poll, self._path, clock, interval_secs, after_poll=after_poll)

    def _examine_file(self) -> StateEditReport | None:
        """Read the file; if it differs from what the store knows, judge it as a person's edit."""
        try:
            stamp_and_data = self._disk.read_settled()
        except FileTooLargeError as exc:
            return self._too_large(exc)
        if stamp_and_data is None:
            if self._file.data is not None:
                log.warning("%s was deleted; the next save writes it again", self._path)
            self._file = FileView(None, None)
            self._rejected = None
            return None
        stamp, data = stamp_and_data
        if data == self._file.data:
            self._file = FileView(stamp, data, confirmed=stamp == self._file.stamp)
            return None
        now_ms = self._clock.now_ms()
        self._file = FileView(stamp, data)
        try:
            edited = parse_edit(data, self.current)
        except InvalidStateFileError as exc:
            report = StateEditReport(
                path=self._path, detected_at_ms=now_ms, accepted=False, error=exc.problem
            )
            self._rejected = RejectedEdit(data, report)
            return self._record(report)
        self._rejected = None  # the person replaced any rejected text with a valid edit
        return self._record(self._merge(edited, now_ms))

    def _too_large(self, exc: FileTooLargeError) -> StateEditReport | None:
        """A file too large to be a state: rejected unread, said once while it stays as it is,
        and moved aside whole at the next save (copying it meant holding it whole)."""
        try:
            stamp = FileStamp.of(os.stat(self._path))
        except FileNotFoundError:  # gone since: the next look sees no file
            return None
        rejected = self._rejected
        if rejected is not None and rejected.too_large == stamp:
            return None
        # no bytes in hand; confirmed, so that a poll costs one stat while it stays
        self._file = FileView(stamp, None, confirmed=True)
        report = StateEditReport(
            path=self._path, detected_at_ms=self._clock.now_ms(), accepted=False, error=str(exc)
        )
        self._rejected = RejectedEdit(b"", report, too_large=stamp)
        return self._record(report)

    def _merge(self, edited: RunnerState, now_ms: int) -> StateEditReport:
        current = self.current
        changes, ignored = compare_edit(current, self._baseline, edited)
        if changes:
            merged = {c.field: getattr(edited, c.field) for c in changes}
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
        if rejected.too_large is not None:
            return self._move_aside(rejected)
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

    def _move_aside(self, rejected: RejectedEdit) -> StateEditReport | None:
        """The too large file renamed beside the state, as it is; its report."""
        self._rejected = None
        self._file = FileView(None, None)
        copy_path = unused_sibling(self._path, "rejected", rejected.report.detected_at_ms)
        try:
            os.rename(self._path, copy_path)
        except FileNotFoundError:  # deleted meanwhile: nothing left to keep
            return None
        report = rejected.report.model_copy(update={"preserved_as": copy_path})
        log.warning(
            "the rejected %s (%s) was moved to %s before the daemon wrote the file",
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


def _some(report: StateEditReport | None) -> list[StateEditReport]:
    return [] if report is None else [report]

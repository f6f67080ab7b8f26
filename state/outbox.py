"""``Outbox``: a durable hand-off from the daemon to the consumers of what happened (exits).

An entry is appended (one JSON line, fsynced) BEFORE anyone acts on it, under a stable ``key``
(an exit's key is the client order id of the SELL that closed the position), so appending the same
key again, e.g. when a restart settles an exit whose entry was already written, adds nothing.

Each consumer has a name and its own acknowledgement cursor (``<outbox>.<name>.ack``, the sequence
number of the last entry it took, written atomically). ``deliver`` hands every consumer the entries
after its cursor, in order, and moves the cursor after each one it took; a consumer that raises
keeps its cursor and gets the same entry again on the next ``deliver`` (later entries wait behind
it). Entries are delivered on start too, so a kill anywhere loses nothing: at worst the entry being
delivered when the kill came is delivered again, which a consumer that must act exactly once
recognises by its key (the learner keeps the keys of its recent trades). A consumer added later
(the trading-memory store) starts from the beginning of the outbox with its own cursor; one that
drains at its own pace uses ``pending`` and ``ack`` instead of ``subscribe``.

A torn LAST line (a kill mid-append) is dropped with a warning: whoever appended it had not acted
yet. A bad line anywhere else means the file was damaged or edited: refuse to start.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import RefuseToStartError
from state.atomic import atomic_write_bytes, fsync_dir, remove_stale_tmp_files

log = logging.getLogger(__name__)

_CONSUMER_NAME: Final = re.compile(r"^[a-z0-9_-]{1,40}$")


class OutboxEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = Field(ge=1)
    key: str = Field(min_length=1)
    kind: str
    at_ms: int
    payload: dict[str, Any]


Consumer = Callable[[OutboxEntry], None]


class Outbox:
    """Append-only JSON lines plus one cursor file per consumer. One owner; not thread-safe."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._entries: list[OutboxEntry] = []
        self._keys: dict[str, OutboxEntry] = {}
        self._consumers: dict[str, Consumer] = {}
        self._cursors: dict[str, int] = {}
        self._loaded = False

    @property
    def path(self) -> Path:
        return self._path

    def load(self) -> None:
        """Read the outbox (if any). Idempotent. Raises ``RefuseToStartError`` on a damaged file."""
        if self._loaded:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        lines = self._path.read_bytes().split(b"\n") if self._path.exists() else []
        if lines and lines[-1] == b"":
            lines.pop()
        for number, line in enumerate(lines, start=1):
            try:
                entry = OutboxEntry.model_validate(orjson.loads(line))
                if entry.seq != len(self._entries) + 1:
                    raise ValueError(f"sequence {entry.seq} after {len(self._entries)}")
            except (orjson.JSONDecodeError, ValidationError, ValueError) as exc:
                if number == len(lines):
                    log.warning("outbox %s: dropping torn last line: %s", self._path, exc)
                    self._truncate_to(lines[:-1])
                    break
                raise RefuseToStartError(
                    f"outbox {self._path} line {number} is damaged ({exc}); it was left "
                    "untouched: fix it or move it aside (its consumers then miss what it held)"
                ) from exc
            self._entries.append(entry)
            self._keys.setdefault(entry.key, entry)
        self._loaded = True

    # -- producing ------------------------------------------------------------------------------

    def append(self, key: str, kind: str, at_ms: int, payload: dict[str, Any]) -> OutboxEntry:
        """Durable before returning. A key already in the outbox returns its entry unchanged."""
        self._require_loaded()
        existing = self._keys.get(key)
        if existing is not None:
            log.info("outbox: %s %s is already recorded (seq %d)", kind, key, existing.seq)
            return existing
        entry = OutboxEntry(
            seq=len(self._entries) + 1, key=key, kind=kind, at_ms=at_ms, payload=payload
        )
        created = not self._path.exists()
        _append_line(self._path, orjson.dumps(entry.model_dump(mode="json")) + b"\n")
        if created:
            fsync_dir(self._path.parent)
        self._entries.append(entry)
        self._keys[key] = entry
        return entry

    # -- consuming ------------------------------------------------------------------------------

    def subscribe(self, name: str, handler: Consumer) -> None:
        """Register a consumer (its cursor file is read now); ``deliver`` feeds it."""
        self._require_loaded()
        if name in self._consumers:
            raise ValueError(f"outbox consumer {name!r} is already subscribed")
        self._consumers[name] = handler
        self._cursor(name)

    def deliver(self) -> int:
        """Hand each subscribed consumer what it has not acknowledged; returns how many taken."""
        taken = 0
        for name, handler in self._consumers.items():
            for entry in self.pending(name):
                try:
                    handler(entry)
                except Exception:
                    log.exception(
                        "outbox: consumer %s failed on %s %s; it is offered again on the next "
                        "delivery",
                        name,
                        entry.kind,
                        entry.key,
                    )
                    break
                self.ack(name, entry.seq)
                taken += 1
        return taken

    def pending(self, name: str) -> list[OutboxEntry]:
        """The entries after ``name``'s cursor, oldest first."""
        return self._entries[self._cursor(name) :]

    def ack(self, name: str, seq: int) -> None:
        """``name`` took every entry up to ``seq`` (durable; a cursor never moves back)."""
        if seq <= self._cursor(name):
            return
        if seq > len(self._entries):
            raise ValueError(f"ack of seq {seq}, but the outbox holds {len(self._entries)}")
        atomic_write_bytes(self._cursor_path(name), f"{seq}\n".encode())
        self._cursors[name] = seq

    def entries(self) -> list[OutboxEntry]:
        return list(self._entries)

    # -- helpers --------------------------------------------------------------------------------

    def _cursor(self, name: str) -> int:
        if name in self._cursors:
            return self._cursors[name]
        if not _CONSUMER_NAME.fullmatch(name):
            raise ValueError(f"outbox consumer name {name!r} must match {_CONSUMER_NAME.pattern}")
        path = self._cursor_path(name)
        remove_stale_tmp_files(path)
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            text = "0"
        if not text.isdigit() or int(text) > len(self._entries):
            raise RefuseToStartError(
                f"outbox cursor {path} holds {text!r}, not a sequence number of {self._path} "
                f"(1..{len(self._entries)}); fix it, or delete it to deliver everything again"
            )
        self._cursors[name] = int(text)
        return self._cursors[name]

    def _cursor_path(self, name: str) -> Path:
        return self._path.with_name(f"{self._path.name}.{name}.ack")

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise RuntimeError(f"outbox {self._path} used before load()")

    def _truncate_to(self, good: list[bytes]) -> None:
        size = sum(len(line) + 1 for line in good)
        with self._path.open("r+b") as handle:
            handle.truncate(size)
            handle.flush()
            os.fsync(handle.fileno())


def _append_line(path: Path, line: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        written = 0
        while written < len(line):
            written += os.write(fd, line[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["Consumer", "Outbox", "OutboxEntry"]

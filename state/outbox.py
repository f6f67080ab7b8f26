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
yet. A bad line anywhere else means the file was damaged or edited: refuse to start (the reader and
the fsynced append are ``state.fsynced_lines``, shared with the broker's order journal).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field

from core.errors import RefuseToStartError
from core.regular_file import read_bytes_or_none
from state.atomic import atomic_write_bytes, fsync_dir, remove_stale_tmp_files
from state.fsynced_lines import append_line, read_lines
from state.line_text import terminal_safe_json_bytes

log = logging.getLogger(__name__)

_CONSUMER_NAME: Final = re.compile(r"^[a-z0-9_-]{1,40}$")
_SEQ: Final = re.compile(rb"[0-9]{1,18}")
#: a sequence number and its line break, with room for a person's spaces: read whole, a cursor
#: file of a gigabyte (a crash's zeros) took that gigabyte before it was found to be none
_CURSOR_MAX_BYTES: Final = 64 * 1024


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
        self._unsaved_cursors: set[str] = set()
        self._loaded = False

    @property
    def path(self) -> Path:
        return self._path

    def load(self) -> None:
        """Read the outbox (if any). Idempotent. Raises ``RefuseToStartError`` on a damaged file."""
        if self._loaded:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        read_lines(
            self._path,
            self._take_line,
            what="outbox",
            advice="fix it or move it aside (its consumers then miss what it held)",
        )
        self._loaded = True

    def _take_line(self, line: bytes) -> None:
        entry = OutboxEntry.model_validate(orjson.loads(line))
        if entry.seq != len(self._entries) + 1:
            raise ValueError(f"sequence {entry.seq} after {len(self._entries)}")
        self._entries.append(entry)
        self._keys.setdefault(entry.key, entry)

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
        line = terminal_safe_json_bytes(orjson.dumps(entry.model_dump(mode="json")))
        append_line(self._path, line + b"\n")  # people read it: orjson writes U+009B raw
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
        """``name`` took every entry up to ``seq`` (a cursor never moves back). A cursor that
        cannot be written (a full disk) moves on in memory and is written by the next ack: the
        consumer has the entries, and a restart before then delivers them again, which costs
        nothing (consumers know an entry by its key); failing here would make the caller act
        on the entry again, or halt, for the sake of a hint."""
        if seq <= self._cursor(name):
            return
        if seq > len(self._entries):
            raise ValueError(f"ack of seq {seq}, but the outbox holds {len(self._entries)}")
        self._cursors[name] = seq
        path = self._cursor_path(name)
        try:
            atomic_write_bytes(path, f"{seq}\n".encode())
        except OSError as exc:
            if name not in self._unsaved_cursors:
                log.error(
                    "outbox: cursor %s could not be saved (%s: %s); kept in memory, a restart "
                    "before it is saved delivers its entries again",
                    path,
                    type(exc).__name__,
                    exc,
                )
            self._unsaved_cursors.add(name)
            return
        if name in self._unsaved_cursors:
            self._unsaved_cursors.discard(name)
            log.warning("outbox: cursor %s saved again", path)

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
        fix = "fix it, or delete it to deliver everything again"
        try:  # not a bare read: a FIFO there blocked the start for good
            data = read_bytes_or_none(path, max_bytes=_CURSOR_MAX_BYTES)
        except OSError as exc:
            raise RefuseToStartError(
                f"outbox cursor {path} cannot be read ({exc.strerror or exc}); {fix}"
            ) from None
        text = (data or b"0").strip()
        # bounded: int() of 5,000 digits is a ValueError, and no outbox holds 10^18 entries
        if not _SEQ.fullmatch(text) or int(text) > len(self._entries):
            raise RefuseToStartError(
                f"outbox cursor {path} holds {text[:40]!r}, not a sequence number of "
                f"{self._path} (1..{len(self._entries)}); {fix}"
            )
        self._cursors[name] = int(text)
        return self._cursors[name]

    def _cursor_path(self, name: str) -> Path:
        return self._path.with_name(f"{self._path.name}.{name}.ack")

    def _require_loaded(self) -> None:
        if not self._loaded:
            raise RuntimeError(f"outbox {self._path} used before load()")


__all__ = ["Consumer", "Outbox", "OutboxEntry"]

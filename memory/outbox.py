"""The memory's durable outbox: exits waiting to be written to the store, and open entries.

One mechanism with the exits outbox the learner consumes: a ``state.outbox.Outbox`` (fsynced JSON
lines, a per-consumer acknowledgement cursor) of its own, ``outbox/memory.jsonl`` in the state dir.
Each record is appended (~1 ms) when the bus event is seen, before anything acts on it:

- ``entry``: a position opened, or its entry's fees grew (the whole entry, the last one wins);
- ``closed``: the position of a ticker closed (its entry is no longer open);
- ``trade``: a closed trade (exit + entry) to write to the store, keyed by its trade id, so the
  same exit seen twice is written once;
- ``answer``: the reflector's answer for a pending trade (its lesson's text, or none), once it
  is asked: a store that fails the lesson's write, or a restart before it, has the write tried
  again, never the model asked (and paid) again. The last one of a trade wins; one a person's
  edit left as no answer is left out with a warning (the model is then asked again).

The store consumer (``store``) takes the trades in order and moves its cursor only after the store
acknowledged the write, so a slow or down store (Neo4j) delays nothing and loses nothing, and a
kill -9 loses at most the line in flight. The open entries are rebuilt from the file on start, so a
Trade written after a restart still knows how its position began (price, situation, decision).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.errors import RefuseToStartError
from memory.model import Situation
from state.outbox import Outbox

log = logging.getLogger(__name__)

CONSUMER = "store"


class MemoryOutbox:
    def __init__(self, path: Path, legacy_sqlite: Path | None = None) -> None:
        """``legacy_sqlite``: the SQLite outbox of an older vigil, imported once if present."""
        self.path = path
        self._outbox = Outbox(path)
        self._outbox.load()
        self._entries: dict[str, dict[str, Any]] = {}
        self._seqs: dict[str, int] = {}
        self._answers: dict[str, dict[str, Any] | None] = {}
        records = self._outbox.entries()
        for record in records:
            self._replay(record.kind, record.key, record.seq, record.payload)
        self._count = len(records)
        # the store's cursor read now: one that cannot be is a refusal to start, not a failure
        # at every later wake-up of the writer
        pending = {r.key for r in self._outbox.pending(CONSUMER) if r.kind == "trade"}
        self._answers = {key: a for key, a in self._answers.items() if key in pending}
        if legacy_sqlite is not None and legacy_sqlite.exists():
            _import_legacy_sqlite(legacy_sqlite, self)

    def _replay(self, kind: str, key: str, seq: int, payload: dict[str, Any]) -> None:
        if kind == "trade":
            self._seqs[key] = seq
            return
        if kind == "answer":
            self._replay_answer(key, payload)
            return
        ticker, body = payload.get("ticker"), payload.get("body")
        problem = _entry_problem(body) if kind == "entry" else None
        if not isinstance(ticker, str) or problem is not None:
            # a hand edit or another program's line: it ended the start in a KeyError, and an
            # entry's field of another type the exit's trade (its handler raised, the exit was
            # never recorded); without it the trade is written as one whose entry was not seen
            log.warning(
                "memory outbox %s: %s row %s has no ticker or entry: left out (kept in the file)%s",
                self.path,
                kind,
                key,
                f": {problem}" if problem else "",
            )
            if isinstance(ticker, str):
                self._entries.pop(ticker, None)  # the last entry wins: this one is unknown
        elif isinstance(body, dict) and kind == "entry":
            self._entries[ticker] = body
        elif kind == "closed":
            self._entries.pop(ticker, None)

    def _replay_answer(self, key: str, payload: dict[str, Any]) -> None:
        trade, answer = payload.get("trade"), payload.get("answer")
        if not isinstance(trade, str) or not (answer is None or isinstance(answer, dict)):
            # a hand edit: it is no answer, and the model is asked again for its trade
            log.warning(
                "memory outbox %s: answer row %s names no trade or holds no answer: left out "
                "(kept in the file)",
                self.path,
                key,
            )
            if isinstance(trade, str):
                self._answers.pop(trade, None)  # the last one wins: this one is unknown
            return
        self._answers[trade] = answer

    def _append(self, kind: str, key: str, at_ms: int, payload: dict[str, Any]) -> None:
        record = self._outbox.append(key, kind, at_ms, payload)
        self._count = max(self._count, record.seq)
        self._replay(kind, key, record.seq, payload)

    def _next_key(self, kind: str, ticker: str) -> str:
        """Entry / closed records are never deduplicated: a unique key (the next sequence)."""
        return f"{kind}:{ticker}:{self._count + 1}"

    def add(self, key: str, body: dict[str, Any]) -> None:
        """Idempotent on ``key``: the same exit seen twice is written once."""
        self._append("trade", key, int(body.get("exit_ms") or 0), body)

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        """The trades the store has not acknowledged, oldest first."""
        return [(r.key, r.payload) for r in self._outbox.pending(CONSUMER) if r.kind == "trade"]

    def pending_count(self) -> int:
        return sum(1 for r in self._outbox.pending(CONSUMER) if r.kind == "trade")

    def ack(self, key: str) -> None:
        """The store wrote trade ``key``; every record up to it is done (trades are taken in
        order, and entry / closed records are not the store's)."""
        self._outbox.ack(CONSUMER, self._seqs[key])
        self._answers.pop(key, None)

    def put_answer(self, trade: str, answer: dict[str, Any] | None) -> None:
        """Record the reflector's ``answer`` (a ``ModelReflection``'s fields; None: it gave
        none) for pending trade ``trade``; ``OSError`` when the file cannot take it."""
        key = f"answer:{trade}:{self._count + 1}"  # the last one wins, as entries do
        self._append("answer", key, 0, {"trade": trade, "answer": answer})

    def answer(self, trade: str) -> tuple[bool, dict[str, Any] | None]:
        """Whether an answer is recorded for pending trade ``trade``, and that answer."""
        if trade not in self._answers:
            return False, None
        found = self._answers[trade]
        return True, None if found is None else dict(found)

    def put_entry(self, ticker: str, body: dict[str, Any]) -> None:
        at_ms = int(body.get("entry_ms") or 0)
        key = self._next_key("entry", ticker)
        self._append("entry", key, at_ms, {"ticker": ticker, "body": body})

    def entry(self, ticker: str) -> dict[str, Any] | None:
        body = self._entries.get(ticker)
        return None if body is None else dict(body)

    def drop_entry(self, ticker: str) -> None:
        if ticker in self._entries:
            self._append("closed", self._next_key("closed", ticker), 0, {"ticker": ticker})

    def close(self) -> None:
        """Nothing to release: every append is already durable."""


class _EntryBody(BaseModel):
    """What ``MemoryWriter.on_opened`` and its fills record (fields optional: an older vigil's
    entries hold fewer), of the types its trade is made from."""

    model_config = ConfigDict(extra="allow", strict=True)

    entry_ms: int | None = None
    entry_price: float | None = Field(None, gt=0.0, allow_inf_nan=False)
    signals: dict[str, float] | None = None
    fees_usd: float | None = Field(None, allow_inf_nan=False)  # a maker rebate is < 0
    situation: dict[str, Any] | None = None
    macro: str = "unavailable"
    confidence: float | None = Field(None, allow_inf_nan=False)
    decided_by: str | None = None
    decision_id: str | None = None


def _entry_problem(body: object) -> str | None:
    """Why ``body`` is no entry the writer can make a trade of; None: it is one."""
    if not isinstance(body, dict):
        return "no entry"
    try:
        _EntryBody.model_validate(body)
        if body.get("situation") is not None:
            Situation.model_validate(body["situation"])  # as the trade reads it
    except ValidationError as exc:
        return " ".join(str(exc).split())[:300]
    return None


def _import_legacy_sqlite(legacy: Path, outbox: MemoryOutbox) -> None:
    """A state dir from before this outbox kept its rows in ``memory_outbox.db`` (SQLite): its
    pending trades and open entries move here once (idempotent keys), then the file is renamed
    ``.migrated`` so nothing is lost and nothing is imported twice. One that cannot be read whole
    refuses the start naming it, before anything is imported: its sqlite3 or JSON error was a
    traceback at every start."""
    try:
        db = sqlite3.connect(legacy)
        try:
            pending = db.execute("SELECT key, body FROM pending ORDER BY seq").fetchall()
            entries = db.execute("SELECT ticker, body FROM entries").fetchall()
        finally:
            db.close()
        entry_bodies = [(str(ticker), _object(body)) for ticker, body in entries]
        trade_bodies = [(str(key), _object(body)) for key, body in pending]
    except (sqlite3.Error, ValueError, TypeError) as exc:
        raise RefuseToStartError(
            f"the old memory outbox {legacy} cannot be imported ({exc}); move it aside (its "
            "pending trades then never reach memory)"
        ) from None
    for ticker, body in entry_bodies:
        if outbox.entry(ticker) is None:
            outbox.put_entry(ticker, body)
    for key, body in trade_bodies:
        outbox.add(key, body)
    legacy.rename(legacy.with_name(legacy.name + ".migrated"))


def _object(body: object) -> dict[str, Any]:
    found = orjson.loads(body)  # type: ignore[arg-type]  # a blob or text; else its TypeError
    if not isinstance(found, dict):
        raise ValueError(f"a body is not an object: {str(found)[:40]!r}")
    return found

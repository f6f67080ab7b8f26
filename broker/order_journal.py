"""The ccxt broker's write-ahead journal of client order ids (JSON lines, fsynced per line).

An intent line is made durable BEFORE the order is sent, so after a crash, a timeout or a 5xx the
broker knows which client order ids may exist on the exchange and looks them up instead of placing
them again. A result line records a final outcome (filled, cancelled, rejected), which never changes
again, so replays and lookups of finished orders need no request.

A torn LAST line (a crash mid-append) is dropped with a warning: its order was never sent, because
sending waits for the fsync. A bad line anywhere else means the file was damaged or edited: refuse to
start rather than guess which orders exist. (The reader and the fsynced append are
``state.fsynced_lines``, shared with the exits outbox.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from broker.port import OrderResult
from state.fsynced_lines import append_line, read_lines
from state.line_text import terminal_safe_json_bytes


class JournalIntent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["intent"] = "intent"
    client_order_id: str
    decision_id: str
    ticker: str
    side: Literal["buy", "sell"]
    requested_notional_usd: float
    at_ms: int
    #: the entry's inputs, so a BUY that fills later (or while the daemon is down) keeps them
    signals: dict[str, float] = Field(default_factory=dict)
    regime: str = ""


class JournalResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["result"] = "result"
    result: OrderResult


class JournalEntry(BaseModel):
    """What the journal knows of one client order id."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: JournalIntent
    final: OrderResult | None = None


class OrderJournal:
    """Append-only, fsynced; the whole history is kept in memory (one line per order event)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._entries: dict[str, JournalEntry] = {}
        self._loaded = False

    def load(self) -> None:
        """Read the file (if any). Idempotent."""
        if self._loaded:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        read_lines(
            self._path,
            lambda line: self._apply(orjson.loads(line)),
            what="order journal",
            advice="fix or move it after checking the exchange's orders by hand",
        )
        self._loaded = True

    def get(self, client_order_id: str) -> JournalEntry | None:
        return self._entries.get(client_order_id)

    def entries(self) -> list[JournalEntry]:
        return list(self._entries.values())

    def pending(self) -> list[JournalEntry]:
        """Entries whose final outcome is not known yet (open, or unknown after a failure)."""
        return [e for e in self._entries.values() if e.final is None]

    def record_intent(self, intent: JournalIntent) -> None:
        """Durable before returning: call it BEFORE sending the order."""
        if intent.client_order_id in self._entries:
            return
        self._append(intent.model_dump(mode="json"))
        self._entries[intent.client_order_id] = JournalEntry(intent=intent)

    def record_final(self, result: OrderResult) -> None:
        entry = self._entries.get(result.client_order_id)
        if entry is None:
            raise KeyError(f"{result.client_order_id} was never journaled")
        if entry.final == result:
            return
        self._append(JournalResult(result=result).model_dump(mode="json"))
        self._entries[result.client_order_id] = entry.model_copy(update={"final": result})

    def _apply(self, raw: object) -> None:
        # a list or a number raised TypeError at raw["kind"], which read_lines lets through
        if not isinstance(raw, dict):
            raise ValueError(f"not a JSON object: {type(raw).__name__}")
        if raw["kind"] == "intent":
            intent = JournalIntent.model_validate(raw)
            self._entries.setdefault(intent.client_order_id, JournalEntry(intent=intent))
        else:
            result = JournalResult.model_validate(raw).result
            entry = self._entries[result.client_order_id]
            self._entries[result.client_order_id] = entry.model_copy(update={"final": result})

    def _append(self, raw: dict[str, object]) -> None:
        # people read it in a terminal: orjson writes U+009B (CSI) raw
        append_line(self._path, terminal_safe_json_bytes(orjson.dumps(raw)) + b"\n")


__all__ = ["JournalEntry", "JournalIntent", "OrderJournal"]

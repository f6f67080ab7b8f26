"""Write-back: every exit becomes a Trade (+ Situation) and a reflection Insight, off the tick path.

Bus wiring (runner/memory_wiring.py): inline handlers record entries, fills, decisions and exits into
the durable outbox (``memory.outbox``, ~1 ms, exits are rare); a queued handler, woken by exits and
decisions through a bounded bus queue, drains the outbox into the store. A store that is down keeps
rows pending (retried with ``core.backoff`` on the injected clock, then at the next wake-up); a
restart drains what a crash left. Decisions never wait for any of it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.backoff import Backoff, retrying
from core.clock import Clock
from core.events import DecisionMade, Event, OrderFilled, PositionExit, PositionOpened
from core.failure_streak import FailureStreak
from memory.config import MemoryConfig
from memory.embeddings import TextEmbedder, cosine
from memory.insights import (
    MAX_TEXT_CHARS,
    apply_summary_policy,
    deterministic_reflection,
    deterministic_rollup,
    deterministic_salience,
)
from memory.model import VECTOR_DIM, Insight, Situation, Trade, time_problem
from memory.outbox import MemoryOutbox
from memory.port import MemoryStore, StoreUnavailableError
from state.line_text import as_one_line

log = logging.getLogger(__name__)

STORE_RETRY = Backoff(base_secs=0.5, cap_secs=5.0, max_attempts=3)


class ModelReflection(BaseModel):
    """What a model answers for one trade (schema of the structured call)."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    insight: str
    summary: str | None = None
    salience: float = Field(0.5, ge=0.0, le=1.0)
    applies_to: list[str] = Field(default_factory=list)


class Reflector(Protocol):
    """A model that writes a trade's lesson (Claude); ``None`` when it cannot (budget, failure)."""

    async def reflect(self, trade: Trade, numbers: str) -> ModelReflection | None: ...


class WriteStats(BaseModel):
    model_config = ConfigDict(extra="forbid")
    trades_written: int = 0
    insights_written: int = 0
    rollups_written: int = 0
    skipped_short: int = 0
    skipped_duplicate: int = 0
    store_failures: int = 0
    by_summary_source: dict[str, int] = Field(default_factory=dict)


@dataclass(frozen=True)
class _Entry:
    """An open position's entry, as ``MemoryOutbox.put_entry`` records it."""

    ticker: str
    body: dict[str, Any]


class MemoryWriter:
    def __init__(
        self,
        clock: Clock,
        store: MemoryStore,
        outbox: MemoryOutbox,
        config: MemoryConfig,
        embedder: TextEmbedder,
        reflector: Reflector | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        """``rng`` draws the jitter of a store write's retries (a replay's is seeded)."""
        self._clock = clock
        self._rng = rng or random.Random()
        self._store = store
        self._outbox = outbox
        self._config = config
        self._embedder = embedder
        self._reflector = reflector
        self._situations: dict[str, Situation] = {}
        self._macro = "unavailable"
        self._decisions: dict[str, dict[str, Any]] = {}
        self._fees: dict[str, float] = {}
        # entries and exits the outbox could not take yet, in the order seen
        self._unrecorded: list[_Entry | Trade] = []
        self._record_failing = FailureStreak()
        #: the reflector's answer per trade not yet written: a store that fails after the answer
        #: (the lesson's put) has the write tried again, not the model asked (and paid) again
        self._answers: dict[str, ModelReflection | None] = {}
        self.stats = WriteStats()

    # ---- inline bus handlers (cheap; the outbox commit is the only I/O)

    def note_situation(self, ticker: str, situation: Situation, macro: str) -> None:
        """The snapshot side tells the writer the market state it just saw (entries copy it)."""
        self._situations[ticker] = situation
        self._macro = macro

    def on_decision(self, event: Event) -> None:
        if isinstance(event, DecisionMade):
            for d in event.decisions:
                if d.get("action") == "BUY" and isinstance(d.get("ticker"), str):
                    self._decisions[d["ticker"]] = {
                        "decision_id": event.decision_id,
                        "decided_by": event.decided_by,
                        "confidence": d.get("confidence"),
                    }

    def on_fill(self, event: Event) -> None:
        """Fees of a position: its entry's fills and its exit's (a fill before the entry is
        recorded waits in memory and joins the entry)."""
        if isinstance(event, OrderFilled):
            entry = self._entry(event.ticker)
            if entry is None:
                self._fees[event.ticker] = self._fees.get(event.ticker, 0.0) + event.fee
            else:
                entry["fees_usd"] = (entry.get("fees_usd") or 0.0) + event.fee
                self._put_entry(event.ticker, entry)

    def on_opened(self, event: Event) -> None:
        if not isinstance(event, PositionOpened):
            return
        situation = self._situations.get(event.ticker)
        entry = {
            "entry_ms": event.at_ms,
            "entry_price": event.entry_price,
            "signals": event.signals,
            "fees_usd": self._fees.pop(event.ticker, 0.0),
            "situation": situation.model_dump(mode="json") if situation else None,
            "macro": self._macro,
            **self._decisions.get(event.ticker, {}),
        }
        self._put_entry(event.ticker, entry)

    def on_exit(self, event: Event) -> None:
        if not isinstance(event, PositionExit):
            return
        trade = self.trade_from_exit(event, self._entry(event.ticker))
        self._unrecorded.append(trade)
        self._record()

    def _entry(self, ticker: str) -> dict[str, Any] | None:
        """The open entry of ``ticker``: the last one seen, recorded or not (an exit not yet
        recorded closed it)."""
        for record in reversed(self._unrecorded):
            if record.ticker == ticker:
                return dict(record.body) if isinstance(record, _Entry) else None
        return self._outbox.entry(ticker)

    def _put_entry(self, ticker: str, body: dict[str, Any]) -> None:
        """An entry not yet recorded is replaced (the last one wins, as in the outbox), so a
        long full disk keeps one per open position."""
        for i in range(len(self._unrecorded) - 1, -1, -1):
            if self._unrecorded[i].ticker == ticker:
                if isinstance(self._unrecorded[i], _Entry):
                    self._unrecorded[i] = _Entry(ticker, body)
                    self._record()
                    return
                break
        self._unrecorded.append(_Entry(ticker, body))
        self._record()

    def _record(self) -> None:
        """Put the entries and exits seen into the outbox, oldest first. An outbox that cannot be
        written (a full disk) keeps them in memory, said once, and the next fill, entry, exit or
        wake-up tries again: raised into the bus, an entry was lost (its trade then said 'not
        seen') and an exit never reached memory, each with a traceback."""
        while self._unrecorded:
            record = self._unrecorded[0]
            try:
                if isinstance(record, _Entry):
                    self._outbox.put_entry(record.ticker, record.body)
                else:
                    self._outbox.add(record.trade_id, record.model_dump(mode="json"))
                    self._outbox.drop_entry(record.ticker)
            except OSError as exc:
                if self._record_failing.failed():
                    log.error(
                        "memory: %s could not be recorded in %s (%s); %d entries and exits "
                        "kept in memory until they can be written",
                        f"the entry of {record.ticker}"
                        if isinstance(record, _Entry)
                        else f"exit {record.trade_id}",
                        self._outbox.path,
                        exc,
                        len(self._unrecorded),
                    )
                return
            self._unrecorded.pop(0)
        if self._record_failing.ended():
            log.warning("memory: entries and exits recorded in %s again", self._outbox.path)

    def trade_from_exit(self, exit_: PositionExit, entry: Mapping[str, Any] | None) -> Trade:
        unavailable: dict[str, str] = {}
        entry_ms = exit_.at_ms - round(exit_.holding_secs * 1000)
        if entry is None:
            entry = {}
            unavailable["entry"] = "the entry was not seen by this memory (opened before it ran)"
        elif entry.get("situation") is None:
            unavailable["situation"] = "no snapshot of this ticker before the entry"
        entry_price = entry.get("entry_price")
        leftover = self._fees.pop(exit_.ticker, 0.0)
        fees = (entry.get("fees_usd") or 0.0) + leftover if entry else None
        situation = entry.get("situation")
        return Trade(
            trade_id=Trade.make_id(exit_.ticker, entry_ms, exit_.at_ms),
            ticker=exit_.ticker,
            entry_ms=entry_ms,
            exit_ms=exit_.at_ms,
            entry_price=entry_price,
            # exact: the tracker's pnl_pct is (exit / entry - 1) * 100 of the fill prices
            exit_price=entry_price * (1 + exit_.pnl_pct / 100) if entry_price else None,
            pnl_pct=exit_.pnl_pct,
            fees_usd=fees,
            holding_secs=exit_.holding_secs,
            exit_reason=exit_.reason,
            signals=dict(exit_.signals) or dict(entry.get("signals") or {}),
            confidence=entry.get("confidence"),
            decided_by=entry.get("decided_by"),
            decision_id=entry.get("decision_id"),
            regime=exit_.regime,
            macro=entry.get("macro", "unavailable"),
            situation=Situation.model_validate(situation) if situation else None,
            unavailable=unavailable,
        )

    # ---- queued: drain the outbox into the store

    async def on_wake(self, _event: Event) -> None:
        await self.flush()

    def pending(self) -> int:
        return self._outbox.pending_count()

    async def flush(self) -> int:
        """Write every pending exit; returns how many were written. Rows whose store write fails
        stay pending for the next wake-up."""
        self._record()
        written = 0
        for key, body in self._outbox.pending():
            try:
                trade = Trade.model_validate(body)
                # its lesson is dated at its exit: a day past year 9999 was datetime's
                # ValueError below, and past 2100 a lesson every read leaves out
                dated = time_problem("exit_ms", trade.exit_ms)
                if dated is not None:
                    raise ValueError(dated)
            except ValueError as exc:  # a ValidationError too
                # a hand edit or another program's line: raised, it stopped every later trade
                # here at each wake-up; passed, it stays in the file for a person to read
                log.warning(
                    "memory: %s in %s is not a trade, passed: %s",
                    key,
                    self._outbox.path,
                    " ".join(str(exc).split())[:300],
                )
                self._outbox.ack(key)
                continue
            try:
                async for attempt in retrying(
                    STORE_RETRY,
                    self._clock,
                    retry_on=lambda exc: isinstance(exc, StoreUnavailableError),
                    rng=self._rng,
                ):
                    with attempt:
                        await self.write_trade(trade)
            except StoreUnavailableError:
                self.stats.store_failures += 1
                log.warning("memory: store %s unavailable; %s stays pending", self._store.name, key)
                return written
            self._outbox.ack(key)
            self._answers.pop(trade.trade_id, None)
            written += 1
        return written

    async def write_trade(self, trade: Trade) -> None:
        """Idempotent: the Trade and its reflection have ids from natural keys."""
        if await self._store.put_trade(trade):
            self.stats.trades_written += 1
        await self._reflect(trade)

    async def _reflect(self, trade: Trade) -> None:
        numbers = deterministic_reflection(trade)
        text, source, salience = numbers, "rules", deterministic_salience(trade)
        author = "rules"
        if self._reflector is not None:
            answer = await self._answer(self._reflector, trade, numbers)
            if answer is not None:
                # one line, as a MEMORY.md line: a lesson is a line of every later prompt's
                # fenced context and of the listings, where a line break or an ESC is not data
                summary = None if answer.summary is None else _one_line(answer.summary)
                text, source = apply_summary_policy(
                    _one_line(answer.insight), summary, budget=MAX_TEXT_CHARS, kind="reflection"
                )
                salience, author = answer.salience, "model"
                # a text the write filter refuses as too short ('ok', a NUL) left the trade
                # without any lesson: the rules' one is there for an answer without one
                if source == "default" or len(text) < self._config.write.min_text_chars:
                    text, source, author = numbers, "rules", "rules"
                    salience = deterministic_salience(trade)
        self.stats.by_summary_source[source] = self.stats.by_summary_source.get(source, 0) + 1
        (embedding,) = await self._embedder.embed([text])
        insight = Insight(
            insight_id=Insight.make_id("reflection", trade.exit_ms, trade.ticker, trade.trade_id),
            text=text,
            kind="reflection",
            salience=salience,
            author=author,
            summary_source=source,
            created_ms=trade.exit_ms,
            ticker=trade.ticker,
            regime=trade.regime,
            trade_id=trade.trade_id,
            situation_vector=trade.situation.vector if trade.situation else None,
            embedding=embedding,
        )
        if await self.accept(insight) and await self._store.put_insight(insight):
            self.stats.insights_written += 1
            await self._rotate(trade.ticker, trade.regime)

    async def _answer(
        self, reflector: Reflector, trade: Trade, numbers: str
    ) -> ModelReflection | None:
        """The reflector's answer for ``trade``: the one recorded with it in the outbox (a
        restart between the answer and the lesson's write asked, and paid, again), or kept in
        memory when the outbox could not take it; else asked now and recorded."""
        recorded, body = self._outbox.answer(trade.trade_id)
        if recorded:
            try:
                return None if body is None else ModelReflection.model_validate(body)
            except ValidationError as exc:  # a person's edit: no answer, so asked again
                log.warning(
                    "memory: the answer recorded for %s in %s is no reflection, asked again: %s",
                    trade.trade_id,
                    self._outbox.path,
                    " ".join(str(exc).split())[:300],
                )
        elif trade.trade_id in self._answers:
            return self._answers[trade.trade_id]
        answer = await reflector.reflect(trade, numbers)
        self._answers[trade.trade_id] = answer
        try:
            dumped = None if answer is None else answer.model_dump(mode="json")
            self._outbox.put_answer(trade.trade_id, dumped)
        except OSError as exc:  # a full disk: kept in memory (a restart meanwhile asks again)
            log.warning(
                "memory: the reflector's answer for %s could not be recorded in %s (%s); kept "
                "in memory until its lesson is written",
                trade.trade_id,
                self._outbox.path,
                exc,
            )
        return answer

    async def accept(self, insight: Insight) -> bool:
        """Write filters: too short; the same text the same UTC day for the same ticker + kind; or
        (model / person text) cosine >= dedupe_cosine to one of the last N of that ticker + kind."""
        if len(insight.text) < self._config.write.min_text_chars:
            self.stats.skipped_short += 1
            return False
        if await self._store.get_insight(insight.insight_id) is not None:
            return False  # the same write retried
        recent = await self._store.list_insights(
            ticker=insight.ticker, kind=insight.kind, limit=self._config.write.dedupe_last_n
        )
        day = _utc_day(insight.created_ms)
        for other in recent:
            same_text = other.text == insight.text and _utc_day(other.created_ms) == day
            # rule-written texts of different trades differ only in their numbers, which a
            # character n-gram embedding barely sees: for them only the same text the same day
            # is a duplicate
            similar = (
                insight.author != "rules"
                and insight.embedding is not None
                and other.embedding is not None
                and cosine(insight.embedding, other.embedding) >= self._config.write.dedupe_cosine
            )
            if same_text or similar:
                self.stats.skipped_duplicate += 1
                return False
        return True

    async def _rotate(self, ticker: str, regime: str) -> None:
        """Past ``max_per_ticker_regime`` live reflections, the oldest ``rollup_count`` become one
        rollup that SUMMARISES them (and archives them: kept, no longer retrieved)."""
        write = self._config.write
        live = await self._store.list_insights(
            ticker=ticker, regime=regime, kind="reflection", limit=write.max_per_ticker_regime + 1
        )
        if len(live) <= write.max_per_ticker_regime:
            return
        everything = await self._store.list_insights(
            ticker=ticker, regime=regime, kind="reflection", limit=100_000
        )
        oldest = sorted(everything, key=lambda i: (i.created_ms, i.insight_id))[
            : write.rollup_count
        ]
        await self.write_rollup(ticker, regime, oldest)

    async def write_rollup(self, ticker: str, regime: str, children: Sequence[Insight]) -> Insight:
        trades = [
            t for c in children if c.trade_id and (t := await self._store.get_trade(c.trade_id))
        ]
        text = deterministic_rollup(ticker, regime, trades, len(children))
        (embedding,) = await self._embedder.embed([text])
        created = max(c.created_ms for c in children)
        # of the snapshot's features only: another length (an import, another vigil's lesson)
        # was zip's ValueError out of the flush at every roll, the later trades never written
        vectors = [
            c.situation_vector
            for c in children
            if c.situation_vector is not None and len(c.situation_vector) == VECTOR_DIM
        ]
        mean_vector = (
            tuple(sum(col) / len(vectors) for col in zip(*vectors, strict=True))
            if vectors
            else None
        )
        rollup = Insight(
            insight_id=Insight.make_id("rollup", created, ticker, text),
            text=text,
            kind="rollup",
            salience=round(max(c.salience for c in children), 3),
            author="rules",
            summary_source="rules",
            created_ms=created,
            ticker=ticker,
            regime=regime,
            summarises=tuple(c.insight_id for c in children),
            situation_vector=mean_vector,
            embedding=embedding,
        )
        if await self._store.put_insight(rollup):
            self.stats.rollups_written += 1
        return rollup


def _utc_day(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d")


def _one_line(text: str) -> str:
    """Model text as one line: its whitespace runs one space, every other control character
    written as its escape (``state.line_text.as_one_line``)."""
    return as_one_line(" ".join(text.split()))

"""Builds the trading memory for the daemon and replay: store, outbox, writer, snapshot view.

The store is SQLite in the state dir (``memory.db``) unless ``memory.neo4j_uri`` is set. Writes are
behind the bus (rows in runner.subscriptions): inline handlers commit exits to the durable outbox;
a queued, coalescing handler (one pending wake-up at most) drains it into the store, so a slow
store never delays a decision.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agent.claude import UsageLedger
from agent.claude_client import ClaudeClient
from agent.claude_reflector import ClaudeReflector
from agent.debate_memory import InProcessMemory, LongTermMemory
from agent.debate_store import GraphDebateMemory
from agent.memory_view import MemoryInsights, MemoryOff
from agent.snapshot_builder import InsightsView
from core.clock import Clock
from core.redact import Redactor
from memory.context import InsightSource
from memory.embeddings import HashedNgramEmbedder, OpenAIEmbedder, TextEmbedder
from memory.insight_source import RetrieverInsights
from memory.outbox import MemoryOutbox
from memory.port import MemoryStore, StoreUnavailableError
from memory.retrieval import Retriever
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter, Reflector
from runner.config import Settings

log = logging.getLogger(__name__)


@dataclass
class MemoryParts:
    insights: InsightsView
    store: MemoryStore | None = None
    writer: MemoryWriter | None = None
    view: MemoryInsights | None = None
    retriever: Retriever | None = None
    embedder: TextEmbedder | None = None
    #: why there is no store although memory is on ("" when there is one, or memory is off)
    off_reason: str = ""

    def insight_source(self, clock: Clock) -> InsightSource | None:
        """The store's lessons for the prompt's memory block (None without a store)."""
        if self.retriever is None:
            return None
        view = self.view
        return RetrieverInsights(
            self.retriever, clock, view.situation_vector if view is not None else lambda _t: None
        )

    def debate_memory(self, *, enabled: bool) -> tuple[LongTermMemory | None, str]:
        """The debate's long-term memory and what it is: the memory graph when there is a store;
        in the process (lost at exit) when the store is off or down; none with ``--no-memory``."""
        if not enabled:
            return None, "off (--no-memory)"
        if self.store is None or self.retriever is None or self.embedder is None:
            return InProcessMemory(), f"in-process, lost at exit ({self.off_reason})"
        accept = self.writer.accept if self.writer is not None else None
        graph = GraphDebateMemory(self.store, self.retriever.config, self.embedder, accept)
        mode = "read-write" if accept is not None else "read-only: memory.write_back is off"
        return graph, f"memory graph ({self.store.name}, {mode})"


def build_reflector(
    settings: Settings,
    clock: Clock,
    client: ClaudeClient | None,
    ledger: UsageLedger | None,
    journal: Callable[[Mapping[str, Any]], None],
) -> Reflector | None:
    """Claude writes the lessons when there is a key (and a per-day cap above 0)."""
    if client is None or ledger is None or settings.memory.model_reflections_per_day == 0:
        return None
    return ClaudeReflector(
        client=client,
        config=settings.agent,
        clock=clock,
        ledger=ledger,
        max_per_day=settings.memory.model_reflections_per_day,
        journal=journal,
        redactor=Redactor(settings.secret_values()),
    )


def build_embedder(settings: Settings) -> TextEmbedder:
    cfg = settings.memory
    if cfg.embeddings == "openai":
        return OpenAIEmbedder(cfg.embeddings_url, cfg.embeddings_model)
    return HashedNgramEmbedder()


def open_store(settings: Settings, clock: Clock | None = None) -> MemoryStore:
    """``clock``: the daemon's (a store read on every decision looks for other processes' writes
    once per instant); the CLI's stores look at every call."""
    cfg = settings.memory
    if cfg.neo4j_uri:
        from memory.neo4j_store import Neo4jMemoryStore

        password = cfg.neo4j_password.get_secret_value() if cfg.neo4j_password else None
        return Neo4jMemoryStore(
            cfg.neo4j_uri, cfg.neo4j_user, password, database=cfg.neo4j_database
        )
    return SqliteMemoryStore(settings.state_dir / cfg.db_filename, clock)


def build_memory(
    settings: Settings,
    clock: Clock,
    *,
    enabled: bool,
    reflector: Reflector | None = None,
    jitter: random.Random | None = None,
) -> MemoryParts:
    """The parts; their bus rows are in runner.subscriptions (``memory_subscriptions``).
    ``jitter`` draws the writer's store-retry jitter."""
    cfg = settings.memory
    if not enabled:
        return MemoryParts(insights=MemoryOff())
    if not cfg.enabled:
        return MemoryParts(
            insights=MemoryOff("memory is off (memory.enabled = false)"),
            off_reason="memory.enabled is false",
        )
    try:
        store = open_store(settings, clock)
    except StoreUnavailableError as exc:
        log.error("memory: store unavailable, snapshots will say so: %s", exc)
        reason = f"memory store unavailable: {exc}"
        return MemoryParts(insights=MemoryOff(reason), off_reason=reason)
    embedder = build_embedder(settings)
    retriever = Retriever(store, cfg.retrieval, embedder)
    writer = None
    if cfg.write_back:
        outbox = MemoryOutbox(
            settings.state_dir / cfg.outbox_filename,
            legacy_sqlite=settings.state_dir / "memory_outbox.db",  # before the JSONL outbox
        )
        writer = MemoryWriter(clock, store, outbox, cfg, embedder, reflector, rng=jitter)
    view = MemoryInsights(
        store, retriever, cfg, writer.note_situation if writer is not None else None, clock=clock
    )
    return MemoryParts(
        insights=view,
        store=store,
        writer=writer,
        view=view,
        retriever=retriever,
        embedder=embedder,
    )

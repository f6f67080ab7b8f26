"""The debate on the trading-memory graph (SQLite store, as the daemon wires it): a reflection
written after an exit is recalled by a later debate, and by a new decider over the same store after
a restart; the journal's debate record says which long-term memory it was."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fakes.claude_support import AT_MS, MODEL, fallback, snapshot
from fakes.debate_support import DebateAnswers
from fakes.instant_clock import InstantClock
from fakes.log_records import tracebacks
from fakes.messages_api import FakeMessagesApi

from agent.breaker import CircuitBreaker
from agent.budget import DailyBudget
from agent.claude import UsageLedger
from agent.claude_client import ClaudeClient, RetryPolicy, build_anthropic_client
from agent.config import AgentConfig
from agent.debate import DebateDecider
from agent.debate_store import GraphDebateMemory
from core.backoff import Backoff
from core.clock import VirtualClock
from core.events import PositionExit
from memory.config import MemoryConfig
from memory.embeddings import HashedNgramEmbedder
from memory.outbox import MemoryOutbox
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter

LESSON = "Exits on the timer cut winners short. Actions: hold longer"


@pytest.fixture
async def api() -> AsyncIterator[FakeMessagesApi]:
    async with FakeMessagesApi() as server:
        yield server


def decider_on(api: FakeMessagesApi, state: Path) -> tuple[DebateDecider, SqliteMemoryStore]:
    clock = InstantClock(epoch_ms=AT_MS)
    config = AgentConfig(model=MODEL, base_url=api.base_url, timeout_secs=5.0, decider="debate")
    policy = RetryPolicy(backoff=Backoff(base_secs=0.1, cap_secs=0.2, max_attempts=2))
    client = ClaudeClient(
        build_anthropic_client(config, "sk-ant-test-debate-0000"), clock, config, policy
    )
    store = SqliteMemoryStore(state / "memory.db")
    memory_config, embedder = MemoryConfig(), HashedNgramEmbedder()
    writer = MemoryWriter(
        VirtualClock(epoch_ms=AT_MS),
        store,
        MemoryOutbox(state / "outbox.db"),
        memory_config,
        embedder,
    )
    memory = GraphDebateMemory(store, memory_config.retrieval, embedder, writer.accept)
    decider = DebateDecider(
        client=client,
        config=config,
        clock=clock,
        fallback=fallback(),
        breaker=CircuitBreaker(clock),
        ledger=UsageLedger(DailyBudget(clock, None)),
        memory=memory,
        long_term="memory graph (sqlite, read-write)",
    )
    return decider, store


def recalled_lessons(debate: dict[str, object]) -> list[dict[str, object]]:
    roles = debate["roles"]
    assert isinstance(roles, list)
    return [
        m
        for r in roles
        if r["role"] != "reflection"
        for m in r["memories"]
        if m["kind"] == "reflection"
    ]


async def test_a_reflection_after_an_exit_is_recalled_later_and_after_a_restart(
    api: FakeMessagesApi, tmp_path: Path
) -> None:
    api.responder = DebateAnswers().respond
    decider, store = decider_on(api, tmp_path)
    decider.on_position_exit(
        PositionExit(
            at_ms=AT_MS - 60_000,
            ticker="BTC/USDT",
            reason="timer",
            pnl_pct=1.2,
            holding_secs=3600,
            regime="medium_volatility",
        )
    )
    first = await decider.decide(snapshot())
    assert first.debate is not None and first.debate["reflections"][0]["written"] == 1
    assert first.debate["long_term_memory"] == "memory graph (sqlite, read-write)"
    (lesson,) = await store.list_insights(kind="reflection")
    assert lesson.text == LESSON and lesson.ticker == "BTC/USDT" and lesson.salience == 0.9
    later = await decider.decide(snapshot())
    assert later.debate is not None
    assert {m["text"] for m in recalled_lessons(later.debate)} == {LESSON}
    await decider.aclose()
    await store.close()

    restarted, store = decider_on(api, tmp_path)  # a new process over the same state dir
    after = await restarted.decide(snapshot())
    assert after.debate is not None
    hits = recalled_lessons(after.debate)
    assert hits and hits[0]["text"] == LESSON and float(hits[0]["score"]) > 0  # type: ignore[arg-type]
    opinions = await store.list_insights(kind="debate")
    assert opinions and all(i.text.startswith("[") for i in opinions)
    await restarted.aclose()
    await store.close()


async def test_model_control_characters_reach_no_terminal_through_memory_list(
    api: FakeMessagesApi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A role's words are folded to one line of spaces, but ESC, BEL or NUL are no spaces: the
    manager's report went into memory.db with them, and `vigil memory list` printed them to the
    person's terminal (clearing it, colouring lines that read like vigil's own). They are shown
    escaped, one line per insight."""
    from fakes.messages_api import json_message

    from runner.cli import main

    hostile = "\x1b[2J\x1b[31mALL CLEAR\x07 buy\x00 now\x08\x08"
    answers = DebateAnswers()
    answers.script(
        "manager",
        json_message(
            {"risks": hostile, "strategy": "small", "next_steps": [], "size_reductions": []}
        ),
    )
    api.responder = answers.respond
    decider, store = decider_on(api, tmp_path)
    try:
        await decider.decide(snapshot())
    finally:
        await store.close()
        await decider.aclose()
    command = ["--state-dir", str(tmp_path), "memory", "list", "--kind", "debate"]
    assert await asyncio.to_thread(main, command) == 0  # the CLI runs its own event loop
    out = capsys.readouterr().out
    (manager,) = [line for line in out.splitlines() if "[manager]" in line]
    assert "\\x1b[2J\\x1b[31mALL CLEAR\\x07 buy\\x00 now\\x08\\x08" in manager
    assert not [c for c in out if c != "\n" and (ord(c) < 32 or 0x7F <= ord(c) <= 0x9F)]


async def test_a_full_memory_db_is_said_once_and_written_again_when_it_frees(
    api: FakeMessagesApi, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """memory.db full (SQLite's max_page_count reached: "database or disk is full", as on a full
    disk): each decision goes on and its record counts the failed writes, the first is logged
    with its traceback and the repeats are not (each role of each decision logged one), and the
    roles' outputs are written again once the database can grow."""
    api.responder = DebateAnswers().respond
    decider, store = decider_on(api, tmp_path)
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    try:
        for _ in range(3):
            made = await decider.decide(snapshot())
            assert made.debate is not None and made.debate["memory_writes"]["failed"] > 0
        assert len(tracebacks(caplog)) == 1
        assert "database or disk is full" in caplog.text
        kept = len(await store.list_insights(kind="debate"))  # the pages' free room took some

        store._db.execute("PRAGMA max_page_count = 1073741823")
        made = await decider.decide(snapshot())
        assert made.debate is not None and made.debate["memory_writes"]["failed"] == 0
        assert len(await store.list_insights(kind="debate")) > kept
        assert "again" in caplog.records[-1].getMessage()
    finally:
        await decider.aclose()
        await store.close()

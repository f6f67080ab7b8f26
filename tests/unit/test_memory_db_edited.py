"""A ``memory.db`` a person edited: SQLite keeps any value in any column, so one row may hold a
text in ``pnl_pct``, three bytes in ``vector`` or a body that is not JSON. That row is left out of
every read (kept in the file, one warning naming it); the other rows, the snapshot's memory and
the ``vigil memory`` commands go on. Before, each such row failed every decision with a traceback
(the snapshot's memory view lets only ``StoreUnavailableError`` through) and every command."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_memory_snapshot import NOW, snapshot, view

from agent.debate_memory import RecallQuery
from agent.debate_store import GraphDebateMemory
from agent.memory_view import MemoryOff
from contract.memory_contract import make_insight, make_trade
from core.clock import VirtualClock
from memory.config import MemoryConfig
from memory.embeddings import HashedNgramEmbedder
from memory.port import StoreUnavailableError
from memory.sqlite_store import SqliteMemoryStore
from runner.cli import main
from runner.config import Settings
from runner.memory_wiring import build_memory

NAN_VECTOR = "x'" + "0000c07f" * 12 + "'"

#: (what a person did, the SQL, the table the row is in)
EDITS = [
    ("trade pnl text", "UPDATE trades SET pnl_pct='abc' WHERE rowid=1", "trades"),
    ("trade pnl infinite", "UPDATE trades SET pnl_pct=9e999 WHERE rowid=1", "trades"),
    ("trade holding text", "UPDATE trades SET holding_secs='x' WHERE rowid=1", "trades"),
    ("trade vector 1 value", "UPDATE trades SET vector=x'00000000' WHERE rowid=1", "trades"),
    ("trade vector 3 bytes", "UPDATE trades SET vector=x'000000' WHERE rowid=1", "trades"),
    ("trade vector text", "UPDATE trades SET vector='hello' WHERE rowid=1", "trades"),
    ("trade body not JSON", "UPDATE trades SET body='{' WHERE rowid=1", "trades"),
    ("insight body not JSON", "UPDATE insights SET body='not json' WHERE rowid=1", "insights"),
    ("insight body a list", "UPDATE insights SET body='[1,2]' WHERE rowid=1", "insights"),
    (
        "insight salience -1",
        "UPDATE insights SET body=json_set(body,'$.salience',-1) WHERE rowid=1",
        "insights",
    ),
    (
        "insight text 5000 chars",
        "UPDATE insights SET body=json_set(body,'$.text',printf('%.5000c','x')) WHERE rowid=1",
        "insights",
    ),
    (
        "insight ttl text",
        "UPDATE insights SET body=json_set(body,'$.ttl_days','x') WHERE rowid=1",
        "insights",
    ),
    ("insight created text", "UPDATE insights SET created_ms='soon' WHERE rowid=1", "insights"),
    ("insight vector 3 bytes", "UPDATE insights SET vector=x'000000' WHERE rowid=1", "insights"),
    ("insight vector text", "UPDATE insights SET vector='abc' WHERE rowid=1", "insights"),
    (
        "insight embedding 3 bytes",
        "UPDATE insights SET embedding=x'000000' WHERE rowid=1",
        "insights",
    ),
    (
        "insight embedding 1 value",
        "UPDATE insights SET embedding=x'0000803f' WHERE rowid=1",
        "insights",
    ),
    ("insight vector NaN", f"UPDATE insights SET vector={NAN_VECTOR} WHERE rowid=1", "insights"),
]


async def fill(path: Path) -> None:
    store = SqliteMemoryStore(path)
    for n, pnl in enumerate((-4.0, -3.0, -2.0, 5.0)):
        trade = make_trade(n, pnl=pnl)
        await store.put_trade(trade)
        vector = trade.situation.vector if trade.situation else None
        text = f"lesson {n} from a SOL trade"
        (embedding,) = await HashedNgramEmbedder().embed([text])
        insight = make_insight(text, created_ms=trade.exit_ms, vector=vector)
        await store.put_insight(insight.model_copy(update={"embedding": embedding}))
    await store.close()


def edit(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()


@pytest.mark.parametrize(("sql", "table"), [pytest.param(s, t, id=i) for i, s, t in EDITS])
async def test_the_snapshot_reads_memory_past_an_edited_row(
    tmp_path: Path, sql: str, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "memory.db"
    await fill(path)
    edit(path, sql)
    store = SqliteMemoryStore(path)
    try:
        snap = await view(store).attach(snapshot())
        items = snap.historical_insights or []
        stats = [i for i in items if i["kind"] == "regime_stats"]
        assert stats and stats[0]["n"] >= 3  # the other trades still count
        assert [i for i in items if i["kind"] == "insight"]  # and the other lessons are read
        snap.to_json_bytes()  # and the snapshot is one the journal can write
        recalled = await GraphDebateMemory(
            store, MemoryConfig().retrieval, HashedNgramEmbedder(), accept=None
        ).recall(
            RecallQuery(role="trader", role_weight=1.0, text="SOL", ticker=None, now_ms=NOW, k=5)
        )
        assert all(r.text for r in recalled)  # the debate's text recall too
        export = await store.export()
        assert len([e for e in export if e["type"] == table[:-1]]) >= 3
    finally:
        await store.close()
    # the row is kept as the person left it
    db = sqlite3.connect(path)
    assert db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 4
    db.close()


@pytest.mark.parametrize("command", [["list"], ["search", "SOL trade"], ["export"], ["stats"]])
@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE insights SET body='not json' WHERE rowid=1",
        "UPDATE insights SET body=json_set(body,'$.salience',5) WHERE rowid=1",
        "UPDATE insights SET embedding='abc' WHERE rowid=1",
        "UPDATE trades SET body='[]' WHERE rowid=1",
    ],
)
def test_memory_commands_show_the_rows_they_can_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sql: str, command: list[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    asyncio.run(fill(state / "memory.db"))
    edit(state / "memory.db", sql)
    assert main(["--state-dir", str(state), "memory", *command]) == 0
    assert "lesson 3 from a SOL trade" in capsys.readouterr().out or command == ["stats"]


_VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),  # SQLite stores a NaN as NULL
    st.text(max_size=40),
    st.binary(max_size=60),
)
_COLUMNS = {
    "trades": ("ticker", "regime", "pnl_pct", "holding_secs", "body", "vector", "exit_ms"),
    "insights": (
        "ticker",
        "regime",
        "kind",
        "created_ms",
        "salience",
        "body",
        "vector",
        "embedding",
    ),
}


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    table=st.sampled_from(sorted(_COLUMNS)),
    data=st.data(),
)
def test_any_value_in_any_column_of_one_row_is_read_past(
    tmp_path_factory: pytest.TempPathFactory, table: str, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("edited") / "memory.db"
    asyncio.run(fill(path))
    column = data.draw(st.sampled_from(_COLUMNS[table]))
    value: Any = data.draw(_VALUES)
    db = sqlite3.connect(path)
    try:
        db.execute(f"UPDATE {table} SET {column}=? WHERE rowid=1", (value,))
        db.commit()
    except sqlite3.IntegrityError:  # NOT NULL: no person can store that
        return
    finally:
        db.close()

    async def read() -> None:
        store = SqliteMemoryStore(path)
        try:
            snap = await view(store).attach(snapshot())
            snap.to_json_bytes()
            await store.list_insights(limit=10)
            await store.export()
        finally:
            await store.close()

    asyncio.run(read())


@pytest.mark.parametrize("damage", ["not a database", "truncated"])
@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["search", "SOL"],
        ["show", "x"],
        ["add", "A lesson long enough."],
        ["stats"],
        ["export"],
    ],
)
def test_memory_commands_on_a_damaged_file_say_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, command: list[str]
) -> None:
    """As the daemon turns memory off with the reason, the commands print it (exit 1), and the
    file is left as it is; a StoreUnavailableError traceback before."""
    state = tmp_path / "state"
    state.mkdir()
    path = state / "memory.db"
    asyncio.run(fill(path))
    whole = path.read_bytes()
    damaged = b"these bytes are no database " * 200 if damage == "not a database" else whole[:5000]
    for leftover in state.glob("memory.db-*"):
        leftover.unlink()
    path.write_bytes(damaged)
    assert main(["--state-dir", str(state), "memory", *command]) == 1
    err = capsys.readouterr().err
    assert err.startswith("vigil memory: memory store unavailable: ") and str(path) in err
    assert path.read_bytes() == damaged


@pytest.mark.parametrize("value", ["x", "1.0", "-1", "", "9" * 5000])
def test_a_schema_version_that_is_no_version_is_a_store_unavailable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """meta's schema_version edited into what no vigil wrote: the start built no memory at all
    (int()'s ValueError, or a KeyError for a migration from -1, past build_memory's catch) and
    every ``vigil memory`` command was a traceback. It is the store unavailable, file kept."""
    state = tmp_path / "state"
    state.mkdir()
    path = state / "memory.db"
    asyncio.run(fill(path))
    edit(path, f"UPDATE meta SET value='{value}' WHERE key='schema_version'")
    before = path.read_bytes()
    assert main(["--state-dir", str(state), "memory", "stats"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("vigil memory: memory store unavailable: ") and "schema" in err
    parts = build_memory(Settings(state_dir=state), VirtualClock(), enabled=True)
    assert isinstance(parts.insights, MemoryOff) and "schema" in parts.insights.reason
    assert path.read_bytes() == before


@pytest.mark.parametrize("table", ["trades", "insights"])
async def test_a_file_gone_bad_under_an_open_store_is_the_store_unavailable(
    tmp_path: Path, table: str
) -> None:
    """memory.db changed under the daemon into one SQLite cannot read as the store's (a table
    another program dropped): each read's sqlite3 error went past the snapshot's memory view,
    which lets only StoreUnavailableError through (a traceback at every decision), and past the
    write-back's flush. The snapshot now says the store is unavailable and why; the file is
    left as it is."""
    path = tmp_path / "memory.db"
    await fill(path)
    store = SqliteMemoryStore(path)
    memory = view(store)
    assert (await memory.attach(snapshot())).historical_insights
    edit(path, f"DROP TABLE {table}")
    try:
        snap = await memory.attach(snapshot())
        assert snap.historical_insights is None
        why = snap.unavailable["historical_insights"]
        assert why.startswith("memory store unavailable: ") and f"no such table: {table}" in why
        reads: list[Coroutine[Any, Any, object]] = [store.export(), store.counts()]
        reads.append(store.get_trade("x") if table == "trades" else store.get_insight("x"))
        for read in reads:
            with pytest.raises(StoreUnavailableError, match=f"no such table: {table}"):
                await read
    finally:
        await store.close()

"""The SQLite store's look for other connections' writes asks ``PRAGMA data_version`` only when
the WAL-index header has changed (``memory.wal_index``); its answers are the plain look's.

- The fact it rests on: every commit, by any connection, rewrites the header; reads do not.
- Over random steps (this store's writes, another connection's writes, forgets and checkpoints of
  every mode, reads between them): after each look the store has seen every commit (its
  data_version is the one a PRAGMA reads now), and it answers what a store opened afresh answers.
- Without a header to read (not WAL, no ``-shm``) every look asks the PRAGMA, as before, and
  sees another connection's write.
- Another process's commit is seen (the ``-shm`` file is shared between processes).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from contract.memory_contract import make_insight, make_trade
from memory.port import CandidateQuery
from memory.sqlite_store import SqliteMemoryStore
from memory.wal_index import HEADER_BYTES, WalHeader

QUERY = CandidateQuery(ticker="SOL/USDT")


def test_every_commit_rewrites_the_header_and_reads_do_not(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    one, two = sqlite3.connect(path, isolation_level=None), sqlite3.connect(path)
    one.execute("PRAGMA journal_mode=WAL")
    one.execute("CREATE TABLE t (x)")
    header = WalHeader(path, one)
    seen = header.read()
    assert seen is not None and len(seen) == HEADER_BYTES
    for _ in range(3):
        one.execute("SELECT * FROM t").fetchall()
        two.execute("SELECT * FROM t").fetchall()
        assert header.read() == seen
    for writer in (two, one, two):  # another connection's commit, an own one, another's again
        with writer:
            writer.execute("INSERT INTO t VALUES (1)")
        assert header.read() != seen
        seen = header.read()
    header.close()
    one.close()
    two.close()


def test_without_wal_every_look_asks_the_pragma(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE t (x)")  # journal_mode=delete: no WAL index
    assert WalHeader(path, db).read() is None
    db.close()


_step = st.sampled_from(
    [
        "own_trade",
        "own_insight",
        "other_trade",
        "other_insight",
        "other_rollup",
        "other_forget",
        "checkpoint_passive",
        "checkpoint_restart",
        "checkpoint_truncate",
        "read",
    ]
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_step, min_size=1, max_size=14))
def test_looks_answer_as_the_plain_look(steps: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_run(Path(tmp) / "memory.db", steps))


async def _run(path: Path, steps: list[str]) -> None:
    daemon, cli = SqliteMemoryStore(path), SqliteMemoryStore(path)
    assert daemon._wal.read() is not None  # the shortcut is on
    await _check(daemon, path)  # caches built
    for n, step in enumerate(steps):
        await _do(step, n, daemon, cli)
        await _check(daemon, path)
    await daemon.close()
    await cli.close()


async def _do(step: str, n: int, daemon: SqliteMemoryStore, cli: SqliteMemoryStore) -> None:
    writer = daemon if step.startswith("own") else cli
    if step.endswith("_trade"):
        await writer.put_trade(make_trade(n, pnl=n - 3.0))
    elif step.endswith("_insight"):
        await writer.put_insight(make_insight(f"lesson {n}", created_ms=1_740_000_000_000 + n))
    elif step == "other_rollup":  # archives what it summarises: the index is rebuilt
        live = [i.insight_id for i in await cli.list_insights(ticker="SOL/USDT")]
        await cli.put_insight(make_insight(f"rollup {n}", kind="rollup", summarises=tuple(live)))
    elif step == "other_forget":
        for insight in (await cli.list_insights(ticker="SOL/USDT"))[:1]:
            await cli.forget(insight.insight_id)
    elif step.startswith("checkpoint"):
        mode = step.removeprefix("checkpoint_").upper()
        cli._db.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
    else:
        await daemon.candidates(QUERY)


async def _check(daemon: SqliteMemoryStore, path: Path) -> None:
    got_stats = await daemon.regime_stats(ticker=None, regime=None)  # one look, then the caches
    got = await daemon.candidates(QUERY)
    # the unmemoised look: the PRAGMA asked now reads the version the store last acted on
    assert daemon._version() == daemon._data_version
    fresh = SqliteMemoryStore(path)
    assert got_stats == await fresh.regime_stats(ticker=None, regime=None)
    assert got == await fresh.candidates(QUERY)
    await fresh.close()


async def test_a_store_that_cannot_read_the_header_asks_the_pragma_at_every_look(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    daemon, cli = SqliteMemoryStore(path), SqliteMemoryStore(path)
    daemon._wal.close()  # as on a file system without the shared-memory file
    assert daemon._wal.read() is None
    assert await daemon.candidates(QUERY) == []
    await cli.put_insight(make_insight("a person's lesson from the CLI", kind="person"))
    assert len(await daemon.candidates(QUERY)) == 1
    await daemon.close()
    await cli.close()


async def test_another_process_write_is_seen(tmp_path: Path) -> None:
    """The -shm file is shared between processes: a commit of another process (``vigil memory``,
    the API) rewrites the header this one reads."""
    path = tmp_path / "memory.db"
    daemon = SqliteMemoryStore(path)
    assert await daemon.regime_stats(ticker=None, regime=None) == []
    trade = make_trade(1)
    script = (
        "import asyncio, sys\n"
        "from memory.model import Trade\n"
        "from memory.sqlite_store import SqliteMemoryStore\n"
        "async def main():\n"
        "    store = SqliteMemoryStore(__import__('pathlib').Path(sys.argv[1]))\n"
        "    await store.put_trade(Trade.model_validate_json(sys.argv[2]))\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(path), trade.model_dump_json()],
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    (stats,) = await daemon.regime_stats(ticker=None, regime=None)
    assert stats.n == 1
    await daemon.close()

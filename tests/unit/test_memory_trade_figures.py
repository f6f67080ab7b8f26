"""A trade whose P&L or holding time is finite but past any trade's (1e308 %, 1e308 s: another
program's row, a unit slip, an imported file): each was summed into its regime's statistics,
whose mean passed the largest float, so the snapshot's memory and ``vigil memory stats`` showed
a mean P&L of inf (``Infinity``, not JSON) over a win rate the row made. Such a row is one that
cannot be (left out of every read, one warning, kept in the file); the import refuses it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from contract.memory_contract import make_trade
from memory.sqlite_store import SqliteMemoryStore
from runner.cli import main

#: (column, value): past a 10,000-fold gain or a loss of that size; past a century held
ODD = [
    ("pnl_pct", 1e308),
    ("pnl_pct", -1e7),
    ("holding_secs", 1e308),
    ("holding_secs", -1e300),
]


def _fill(path: Path) -> None:
    async def fill() -> None:
        store = SqliteMemoryStore(path)
        for n, pnl in enumerate((-4.0, -3.0, 5.0)):
            await store.put_trade(make_trade(n, pnl=pnl))
        await store.close()

    asyncio.run(fill())


@pytest.mark.parametrize(("column", "value"), ODD)
def test_stats_and_the_snapshot_leave_out_a_trade_of_figures_past_any(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: float
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    _fill(state / "memory.db")
    db = sqlite3.connect(state / "memory.db")
    db.execute(
        f"UPDATE trades SET {column}=?, body=json_set(body, '$.{column}', ?) WHERE rowid=3",
        (value, value),
    )
    db.commit()
    db.close()
    assert main(["--state-dir", str(state), "memory", "stats"]) == 0
    (stats,) = json.loads(capsys.readouterr().out)["per_regime"]  # JSON: no Infinity
    assert (stats["n"], stats["wins"]) == (2, 0)
    assert main(["--state-dir", str(state), "memory", "export"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


@pytest.mark.parametrize(("column", "value"), ODD)
def test_import_refuses_a_trade_of_figures_past_any(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: float
) -> None:
    row = {"type": "trade", **json.loads(make_trade(0).model_dump_json()), column: value}
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert main(["--state-dir", str(tmp_path / "state"), "memory", "import", str(path)]) == 2
    assert f"{path}:1: " in capsys.readouterr().err


@pytest.mark.parametrize("entry_ms", [-(10**16), 10**17])
async def test_a_trade_entered_where_no_clock_is_is_a_row_that_cannot_be(
    tmp_path: Path, entry_ms: int
) -> None:
    """A trade whose entry_ms is past year 9999 or before year 1 (an edit, another program's
    row) that a lesson names: rolling that lesson up dated the trade, datetime's ValueError
    out of the writer's flush at every wake-up that rolled, so the trades after it never
    reached memory. It is a row that cannot be: the rollup says its trade is not in memory."""
    from fakes.memory_support import make_writer, open_and_exit

    from contract.memory_contract import make_insight
    from memory.config import MemoryConfig, WriteConfig

    config = MemoryConfig(write=WriteConfig(max_per_ticker_regime=10, rollup_count=5))
    writer = make_writer(tmp_path, config)
    odd = make_trade(99).model_copy(update={"entry_ms": entry_ms})
    await writer._store.put_trade(odd)
    lesson = make_insight(
        "SOL: the oldest lesson, of a trade entered where no clock is",
        created_ms=1_700_000_000_000,
        trade_id=odd.trade_id,
    )
    await writer._store.put_insight(lesson)
    for n in range(11):
        open_and_exit(writer, n, pnl=-4.2 if n % 2 else 3.1)
    assert await writer.flush() == 11
    (rollup,) = await writer._store.list_insights(kind="rollup")
    assert lesson.insight_id in rollup.summarises
    assert await writer._store.get_trade(odd.trade_id) is None
    await writer._store.close()


@pytest.mark.parametrize(("column", "value"), [("entry_ms", -(10**16)), ("exit_ms", 10**17)])
def test_import_refuses_a_trade_dated_where_no_clock_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: int
) -> None:
    row = {"type": "trade", **json.loads(make_trade(0).model_dump_json()), column: value}
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert main(["--state-dir", str(tmp_path / "state"), "memory", "import", str(path)]) == 2
    assert f"{path}:1: {column} {value} is " in capsys.readouterr().err

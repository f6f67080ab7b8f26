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

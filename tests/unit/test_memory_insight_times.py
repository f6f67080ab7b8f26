"""An insight dated where no run's clock can be (a created_ms past 2100 or before 1970:
microseconds for milliseconds, a person's typo, another program's row), imported by ``vigil
memory import`` or edited into memory.db. ``vigil memory search`` took the newest as the store's
clock and ended in datetime's ValueError traceback ('year 318857 is out of range'); the import
stored it. It is now a row that cannot be (left out of every read, one warning, kept in the
file), and the import refuses it naming the line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from contract.memory_contract import make_insight
from memory.embeddings import HashedNgramEmbedder
from memory.sqlite_store import SqliteMemoryStore
from runner.cli import main

#: microseconds for milliseconds; a year of 318,000; negative
BAD_TIMES = [1_740_000_000_000_000, 10**16, -1, -(10**15)]
GOOD_MS = 1_740_000_000_000


def _row(created_ms: int, text: str) -> dict[str, object]:
    (embedding,) = HashedNgramEmbedder().embed_now([text])
    insight = make_insight(text, created_ms=created_ms).model_copy(update={"embedding": embedding})
    return {"type": "insight", **json.loads(insight.model_dump_json())}


def _put_raw(path: Path, created_ms: int) -> None:
    """The row as a person's edit of memory.db leaves it: a good row given another time."""
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE insights SET created_ms=?, body=json_set(body, '$.created_ms', ?)",
        (created_ms, created_ms),
    )
    db.commit()
    db.close()


@pytest.mark.parametrize("created_ms", BAD_TIMES)
def test_search_reads_past_an_insight_of_a_time_that_cannot_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], created_ms: int
) -> None:
    odd = tmp_path / "odd"
    odd.mkdir()
    lines = json.dumps(_row(GOOD_MS, "SOL: a lesson dated where no clock is"))
    (tmp_path / "odd.jsonl").write_text(lines + "\n")
    assert main(["--state-dir", str(odd), "memory", "import", str(tmp_path / "odd.jsonl")]) == 0
    _put_raw(odd / "memory.db", created_ms)
    good = json.dumps(_row(GOOD_MS, "SOL: stops under the 4h low saved the long"))
    (tmp_path / "good.jsonl").write_text(good + "\n")
    assert main(["--state-dir", str(odd), "memory", "import", str(tmp_path / "good.jsonl")]) == 0
    capsys.readouterr()
    assert main(["--state-dir", str(odd), "memory", "search", "SOL lesson"]) == 0
    captured = capsys.readouterr()
    assert "stops under the 4h low" in captured.out and "no clock" not in captured.out
    assert "2025-02-19" in captured.err  # the good lesson's run clock, not year 318857
    assert main(["--state-dir", str(odd), "memory", "list"]) == 0
    assert "no clock" not in capsys.readouterr().out
    db = sqlite3.connect(odd / "memory.db")
    assert db.execute("SELECT COUNT(*) FROM insights").fetchone()[0] == 2  # kept in the file
    db.close()


@pytest.mark.parametrize("created_ms", BAD_TIMES)
def test_import_refuses_an_insight_of_a_time_that_cannot_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], created_ms: int
) -> None:
    lines = [
        json.dumps(_row(GOOD_MS, "SOL: stops under the 4h low saved the long")),
        json.dumps(_row(created_ms, "SOL: a lesson dated where no clock is")),
    ]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    state = tmp_path / "state"
    assert main(["--state-dir", str(state), "memory", "import", str(tmp_path / "in.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"in.jsonl:2: created_ms {created_ms} is " in err


async def test_the_store_leaves_it_out_of_every_read(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = SqliteMemoryStore(path)
    await store.put_insight(make_insight("SOL: a lesson dated where no clock is"))
    await store.close()
    _put_raw(path, 10**16)
    store = SqliteMemoryStore(path)
    assert await store.export() == []
    assert await store.list_insights(include_archived=True) == []
    await store.close()


async def test_a_row_left_out_does_not_take_a_listed_rows_place(tmp_path: Path) -> None:
    """Listing asked SQLite for ``limit`` rows and dropped the unreadable ones after: the newest
    reflection (limit 1, the CLI's store clock) was none while a newer row could not be read."""
    path = tmp_path / "memory.db"
    store = SqliteMemoryStore(path)
    good = make_insight("SOL: stops under the 4h low saved the long", created_ms=GOOD_MS)
    await store.put_insight(good)
    await store.put_insight(make_insight("SOL: a newer lesson", created_ms=GOOD_MS + 1))
    await store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE insights SET body='not json' WHERE created_ms=?", (GOOD_MS + 1,))
    db.commit()
    db.close()
    store = SqliteMemoryStore(path)
    assert await store.list_insights(kind="reflection", limit=1) == [good]
    assert await store.list_insights(limit=5) == [good]
    await store.close()

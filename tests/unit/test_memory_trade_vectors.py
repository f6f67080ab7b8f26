"""A trade's situation vector that no snapshot makes: a value past float32's range (1e39, stored
as infinity) or a vector of another length, in an imported file. The import stored it: an
infinite vector made every neighbour cosine with it NaN, so the snapshot's posterior gave the
decider a mean similarity of NaN; one of another length was left out of every read after the
import had said it was imported. The import refuses both naming the line; the Situation model
refuses them, so such a trade body in memory.db is a row that cannot be."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from test_memory_snapshot import snapshot, view

from contract.memory_contract import make_trade
from memory.model import VECTOR_DIM
from memory.sqlite_store import SqliteMemoryStore
from runner.cli import main

BAD_VECTORS = {
    "past float32": [1e39] * VECTOR_DIM,
    "NaN-making": [-1e39] + [0.0] * (VECTOR_DIM - 1),
    "3 values": [0.1, 0.2, 0.3],
    "empty": [],
}


@pytest.mark.parametrize("vector", BAD_VECTORS.values(), ids=BAD_VECTORS.keys())
def test_import_refuses_a_trade_of_a_vector_no_snapshot_makes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], vector: list[float]
) -> None:
    state = tmp_path / "state"
    lines = []
    for n in range(3):
        row = {"type": "trade", **json.loads(make_trade(n, pnl=2.0).model_dump_json())}
        if n == 2:
            row["situation"]["vector"] = vector
        lines.append(json.dumps(row))
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["--state-dir", str(state), "memory", "import", str(path)]) == 2
    assert f"{path}:3: " in capsys.readouterr().err

    async def posterior() -> dict[str, object]:
        store = SqliteMemoryStore(state / "memory.db")
        try:
            snap = await view(store).attach(snapshot())
        finally:
            await store.close()
        (found,) = [i for i in snap.historical_insights or [] if i["kind"] == "posterior"]
        return found

    found = asyncio.run(posterior())
    assert found["similar_trades"] == 2 and math.isfinite(float(str(found["mean_sim"])))


def test_a_trade_vector_blob_of_infinities_is_a_row_that_cannot_be(tmp_path: Path) -> None:
    """memory.db's trades.vector column edited to infinities (the body's situation as made):
    the neighbours read the column, so the posterior's mean similarity was NaN."""
    import sqlite3

    path = tmp_path / "memory.db"

    async def run() -> dict[str, object]:
        store = SqliteMemoryStore(path)
        for n in range(3):
            await store.put_trade(make_trade(n, pnl=2.0))
        await store.close()
        db = sqlite3.connect(path)
        db.execute(f"UPDATE trades SET vector=x'{'0000807f' * VECTOR_DIM}' WHERE rowid=3")
        db.commit()
        db.close()
        store = SqliteMemoryStore(path)
        try:
            snap = await view(store).attach(snapshot())
        finally:
            await store.close()
        (found,) = [i for i in snap.historical_insights or [] if i["kind"] == "posterior"]
        return found

    found = asyncio.run(run())
    assert found["similar_trades"] == 2 and math.isfinite(float(str(found["mean_sim"])))

"""Trading memory in replay: two weeks write Trades and Insights that later snapshots carry, and a
memory ON run differs from a ``--no-memory`` run for a reason the compare report names.

Two in-process replays of 2025-03-01 .. 2025-03-14 (fallback decider): memory ON and OFF.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from replay_support import default_settings, replay_in_process, replay_options

from memory.outbox import MemoryOutbox
from report.compare import compare_runs
from report.html import write_report

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]


@dataclass(frozen=True)
class Runs:
    on: Path
    off: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    root = tmp_path_factory.mktemp("memory_replay")
    settings = default_settings(root)
    dirs = []
    for name, memory in (("on", True), ("off", False)):
        options = replay_options(root / name, "2025-03-01", 14, memory=memory)
        replay_in_process(settings, options)
        write_report(options.out_dir)
        dirs.append(options.out_dir)
    return Runs(*dirs)


def _decisions(run: Path) -> list[dict[str, Any]]:
    lines = (run / "logs" / "decisions.jsonl").read_bytes().splitlines()
    return [r for r in map(orjson.loads, lines) if r.get("type", "decision") == "decision"]


def test_exits_become_trades_and_insights(runs: Runs) -> None:
    with sqlite3.connect(runs.on / "memory.db") as db:
        trades = db.execute("SELECT COUNT(*) FROM trades").fetchone()[0]
        insights = db.execute("SELECT COUNT(*) FROM insights").fetchone()[0]
        situations = db.execute("SELECT COUNT(*) FROM trades WHERE vector IS NOT NULL").fetchone()[
            0
        ]
    sells = sum(
        1 for line in (runs.on / "logs" / "trades.csv").read_text().splitlines() if ",sell," in line
    )
    assert trades == sells > 0
    assert insights >= 1 and situations == trades
    outbox = MemoryOutbox(runs.on / "outbox" / "memory.jsonl")
    assert outbox.path.stat().st_size > 0 and outbox.pending_count() == 0  # all written


def test_later_snapshots_carry_what_earlier_exits_wrote(runs: Runs) -> None:
    decisions = _decisions(runs.on)
    first = decisions[0]["snapshot"]
    assert first["historical_insights"] is None
    assert first["unavailable"]["historical_insights"].startswith("memory is empty")
    carrying = [d for d in decisions if d["snapshot"]["historical_insights"]]
    assert carrying, "no snapshot carried memory"
    items = carrying[-1]["snapshot"]["historical_insights"]
    kinds = {item["kind"] for item in items}
    assert {"posterior", "regime_stats", "insight"} <= kinds
    insight = next(item for item in items if item["kind"] == "insight")
    assert {"sim", "role_weight", "age_days", "salience", "score"} <= set(insight)
    assert sum(len(orjson.dumps(item)) for item in items) <= 1500  # the character budget


def test_no_memory_neither_reads_nor_writes(runs: Runs) -> None:
    assert not (runs.off / "memory.db").exists()
    for decision in _decisions(runs.off):
        assert decision["snapshot"]["historical_insights"] is None
        assert "memory is off" in decision["snapshot"]["unavailable"]["historical_insights"]


def test_compare_says_which_decisions_memory_changed_and_why(runs: Runs) -> None:
    text = compare_runs(runs.on, runs.off)
    assert "memory rule changes" in text
    assert "the memory rule changed" in text and "posterior win rate" in text
    changed = [
        d for d in _decisions(runs.on)
        for t in d["raw_decision"]["decisions"] if "memory rule: size x" in t["reasoning"]
    ]  # fmt: skip
    assert changed

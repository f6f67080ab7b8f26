"""The report's memory section: insights read, decisions with memory or with memory off, and the
decisions the memory rule changed, counted from the one pass the report makes over the journal."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from fakes.report_support import T0, decision_line, write_run

from report.figures import build_report
from report.memory_section import CHANGES_LISTED

MINUTE_MS = 60_000


def _line(
    n: int, insights: list[Any] | None, off: bool = False, *reasonings: str
) -> dict[str, Any]:
    line = decision_line(
        T0 + n * MINUTE_MS, 10_000.0, 90_000.0, False, ["agent_timer"], "fallback", "x", None
    )
    if insights is not None:
        line["snapshot"]["historical_insights"] = insights
    if off:
        line["snapshot"]["unavailable"] = {"historical_insights": "memory is off (--no-memory)"}
    line["raw_decision"] = {
        "decisions": [{"ticker": "BTC/USDT", "reasoning": r} for r in reasonings]
    }
    return line


def _insight(kind: str = "insight") -> dict[str, Any]:
    return {"kind": kind, "ticker": "BTC/USDT"}


def test_counts_insights_read_memory_off_and_rule_changes(tmp_path: Path) -> None:
    rule = "BUY ... memory rule: size x 0.61 (posterior win rate 0.30 of 4 similar trades)"
    lines = [
        _line(0, [_insight(), _insight(), _insight("posterior")]),  # 2 insights read
        _line(1, [_insight()], False, rule, "HOLD: nothing to do"),  # 1 read, 1 change
        _line(2, []),  # memory empty: neither with memory nor off
        _line(3, None, True),  # memory off
        _line(4, None),  # a snapshot without memory fields: not counted at all
    ]
    section = build_report(write_run(tmp_path, decisions=lines, fills=[])).memory
    assert section is not None
    assert section["insights_read"] == 3
    assert section["decisions_with_memory"] == 2
    assert section["decisions_memory_off"] == 1
    assert section["memory_rule_changes"] == 1
    assert section["memory_rule_changes_listed"] == [
        {
            "decision_id": f"d{T0 + MINUTE_MS}",
            "at_ms": T0 + MINUTE_MS,
            "ticker": "BTC/USDT",
            "rule": "size x 0.61 (posterior win rate 0.30 of 4 similar trades)",
        }
    ]
    assert section["store"] is None  # no memory.db in the folder, and the reason beside it
    assert "no memory.db" in section["unavailable"]["store"]


def test_lists_at_most_the_first_changes_and_counts_them_all(tmp_path: Path) -> None:
    changes = CHANGES_LISTED + 7
    lines = [_line(n, [_insight()], False, f"memory rule: change {n}") for n in range(changes)]
    section = build_report(write_run(tmp_path, decisions=lines, fills=[])).memory
    assert section is not None
    assert section["memory_rule_changes"] == changes
    listed = section["memory_rule_changes_listed"]
    assert [c["rule"] for c in listed] == [f"change {n}" for n in range(CHANGES_LISTED)]


def test_hostile_memory_fields_are_skipped_not_fatal(tmp_path: Path) -> None:
    hostile = _line(0, ["not a dict", 7, _insight()])
    hostile["raw_decision"] = {"decisions": ["no", {"reasoning": 3}, None]}
    odd = _line(1, None)
    odd["snapshot"]["unavailable"] = {"historical_insights": ["memory is off"]}  # not a string
    section = build_report(write_run(tmp_path, decisions=[hostile, odd], fills=[])).memory
    assert section is not None
    assert (section["insights_read"], section["decisions_with_memory"]) == (1, 1)
    assert (section["decisions_memory_off"], section["memory_rule_changes"]) == (0, 0)


def test_reads_the_store_beside_the_journal(tmp_path: Path) -> None:
    run = write_run(tmp_path, decisions=[_line(0, [_insight()])], fills=[])
    with sqlite3.connect(run / "memory.db") as db:
        db.execute("CREATE TABLE trades (regime TEXT, pnl_pct REAL, holding_secs REAL)")
        db.execute("CREATE TABLE insights (kind TEXT)")
        db.execute("INSERT INTO trades VALUES ('bull', 1.5, 7200), ('bull', -0.5, 3600)")
        db.execute("INSERT INTO insights VALUES ('lesson')")
    section = build_report(run).memory
    assert section is not None
    assert section["store"] == "sqlite"
    assert section["trades_written"] == 2
    assert section["insights_written"] == {"lesson": 1}
    assert section["per_regime"] == [
        {"regime": "bull", "n": 2, "win_rate": 0.5, "mean_pnl_pct": 0.5, "mean_holding_h": 1.5}
    ]

"""The report's memory section: what the trading memory wrote, what decisions read, and which
decisions the memory rule changed (so ``--compare`` of a memory ON and OFF run says why they differ).

Reads ``logs/decisions.jsonl`` (and its rotated segments) line by line and ``memory.db``
read-only; a run without memory gives ``None`` fields with the reason, never zeros it did not count.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson

from state.segments import iter_lines, segments

MEMORY_RULE_MARK = "memory rule: "
CHANGES_LISTED = 50


def memory_section(run_dir: Path) -> dict[str, Any]:
    section: dict[str, Any] = {"unavailable": {}}
    section.update(_from_journal(run_dir / "logs" / "decisions.jsonl"))
    db = run_dir / "memory.db"
    if db.is_file():
        section.update(_from_store(db))
    else:
        section["store"] = None
        section["unavailable"]["store"] = "no memory.db in this run (--no-memory or memory off)"
    return section


def _from_journal(path: Path) -> dict[str, Any]:
    read = with_memory = off = 0
    changes: list[dict[str, Any]] = []
    total_changes = 0
    if not segments(path):
        return {"insights_read": None, "decisions_with_memory": None, "memory_rule_changes": None}
    for line in iter_lines(path):  # every segment, oldest first
        if b"historical_insights" not in line or not line.endswith(b"\n"):
            continue
        record = orjson.loads(line)
        snapshot = record.get("snapshot") or {}
        items = snapshot.get("historical_insights")
        if items:
            with_memory += 1
            read += sum(1 for item in items if item.get("kind") == "insight")
        elif "memory is off" in (snapshot.get("unavailable") or {}).get("historical_insights", ""):
            off += 1
        for decision in (record.get("raw_decision") or {}).get("decisions", []):
            reasoning = decision.get("reasoning", "")
            if MEMORY_RULE_MARK in reasoning:
                total_changes += 1
                if len(changes) < CHANGES_LISTED:
                    changes.append(
                        {
                            "decision_id": record.get("decision_id"),
                            "at_ms": record.get("at_ms"),
                            "ticker": decision.get("ticker"),
                            "rule": reasoning.split(MEMORY_RULE_MARK, 1)[1],
                        }
                    )
    return {
        "insights_read": read,
        "decisions_with_memory": with_memory,
        "decisions_memory_off": off,
        "memory_rule_changes": total_changes,
        "memory_rule_changes_listed": changes,
    }


def _from_store(db: Path) -> dict[str, Any]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            one = conn.execute
            trades = one("SELECT COUNT(*) FROM trades").fetchone()[0]
            kinds = dict(one("SELECT kind, COUNT(*) FROM insights GROUP BY kind").fetchall())
            per_regime = [
                {
                    "regime": r[0],
                    "n": r[1],
                    "win_rate": round(r[2] / r[1], 4),
                    "mean_pnl_pct": round(r[3], 4),
                    "mean_holding_h": round(r[4] / 3600, 2),
                }
                for r in one(
                    "SELECT regime, COUNT(*), SUM(pnl_pct > 0), AVG(pnl_pct), AVG(holding_secs) "
                    "FROM trades GROUP BY regime ORDER BY regime"
                ).fetchall()
            ]
    except sqlite3.Error as exc:
        return {"store": None, "unavailable": {"store": f"memory.db unreadable: {exc}"}}
    return {
        "store": "sqlite",
        "trades_written": trades,
        "insights_written": kinds,
        "per_regime": per_regime,
    }


def memory_compare_lines(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """Why two runs differ, as far as memory goes: the decisions the memory rule changed."""
    lines: list[str] = []
    for name, section in (("a", a), ("b", b)):
        if not section or not section.get("memory_rule_changes"):
            continue
        lines.append(
            f"{name}: the memory rule changed {section['memory_rule_changes']} decision(s)"
            " (the fallback's entry size x posterior win rate of similar trades):"
        )
        for change in section.get("memory_rule_changes_listed", [])[:10]:
            lines.append(f"  {change['decision_id']} {change['ticker']}: {change['rule']}")
    return lines

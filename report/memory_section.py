"""The report's memory section: what the trading memory wrote, what decisions read, and which
decisions the memory rule changed (so ``--compare`` of a memory ON and OFF run says why they differ).

Reads the report's projection of ``logs/decisions.jsonl`` (one pass for the whole report) and
``memory.db`` read-only; a run without memory gives ``None`` fields with the reason, never zeros it did not count.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

MEMORY_RULE_MARK = "memory rule: "
CHANGES_LISTED = 50


def memory_section(run_dir: Path, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``records``: the report's projection of each journal line (``report.run_files``), whose
    ``memory`` field is ``projected_memory``'s: the journal is read once for the whole report."""
    section: dict[str, Any] = {"unavailable": {}}
    section.update(_from_journal(records))
    db = run_dir / "memory.db"
    if db.is_file():
        found, unavailable = _from_store(db)
        section.update(found)
        section["unavailable"].update(unavailable)
    else:
        section["store"] = None
        section["unavailable"]["store"] = "no memory.db in this run (--no-memory or memory off)"
    return section


def projected_memory(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the memory section reads of a decision line (``snapshot``, ``raw_decision``,
    ``decision_id``, ``at_ms``): its insights read, whether memory was off, and the decisions the
    memory rule changed. None for a line whose snapshot has no memory field at all."""
    snapshot = record.get("snapshot")
    if not isinstance(snapshot, dict):
        return None
    unavailable = snapshot.get("unavailable")
    why = unavailable.get("historical_insights") if isinstance(unavailable, dict) else None
    if "historical_insights" not in snapshot and why is None:
        return None
    items = snapshot.get("historical_insights")
    kept: dict[str, Any] = {
        "insights": _insights(items) if items and isinstance(items, list) else None,
        "off": isinstance(why, str) and "memory is off" in why,
        "changes": [],
    }
    raw = record.get("raw_decision")
    decisions = raw.get("decisions") if isinstance(raw, dict) else None
    for decision in decisions if isinstance(decisions, list) else ():
        reasoning = decision.get("reasoning") if isinstance(decision, dict) else None
        if isinstance(reasoning, str) and MEMORY_RULE_MARK in reasoning:
            kept["changes"].append(
                {
                    "decision_id": record.get("decision_id"),
                    "at_ms": record.get("at_ms"),
                    "ticker": decision.get("ticker"),
                    "rule": reasoning.split(MEMORY_RULE_MARK, 1)[1],
                }
            )
    return kept


def _insights(items: list[Any]) -> int:
    count = 0
    for item in items:
        if isinstance(item, dict) and item.get("kind") == "insight":
            count += 1
    return count


def _from_journal(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    read = with_memory = off = 0
    changes: list[dict[str, Any]] = []
    total_changes = 0
    for record in records:
        memory = record.get("memory")
        if memory is None:
            continue
        if memory["insights"] is not None:
            with_memory += 1
            read += memory["insights"]
        elif memory["off"]:
            off += 1
        total_changes += len(memory["changes"])
        changes.extend(memory["changes"][: max(0, CHANGES_LISTED - len(changes))])
    return {
        "insights_read": read,
        "decisions_with_memory": with_memory,
        "decisions_memory_off": off,
        "memory_rule_changes": total_changes,
        "memory_rule_changes_listed": changes,
    }


def _from_store(db: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The store's figures over the rows it can read, and what it could not: a row of the wrong
    type is left out of them and counted, as the store itself leaves it out of every read
    (``memory.sqlite_rows``) and keeps it in the file."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            one = conn.execute
            trades, left_out_trades = one(
                f"SELECT SUM({_TRADE_READABLE}), SUM(NOT {_TRADE_READABLE}) FROM trades"
            ).fetchone()
            kinds = dict(
                one(f"SELECT kind, COUNT(*) FROM insights WHERE {_KIND_READABLE} GROUP BY kind")
            )
            (left_out_insights,) = one(
                f"SELECT COUNT(*) FROM insights WHERE NOT {_KIND_READABLE}"
            ).fetchone()
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
                    f"FROM trades WHERE {_TRADE_READABLE} GROUP BY regime ORDER BY regime"
                )
            ]
    except sqlite3.Error as exc:
        return {"store": None}, {"store": f"memory.db unreadable: {exc}"}
    found = {
        "store": "sqlite",
        "trades_written": trades or 0,
        "insights_written": kinds,
        "per_regime": per_regime,
    }
    left_out = (left_out_trades or 0) + left_out_insights
    return found, {} if not left_out else {"store_rows": _left_out(left_out)}


#: a row the store can read: the schema's NOT NULL and REAL columns rule the others out, yet
#: SQLite stores them (a damaged file, another program's, a person's edit); a NULL holding time
#: or a blob kind ended the report in a traceback. Infinities are out of the range (``abs`` of
#: the smallest integer is an error in SQLite, so no ``abs``).
_FINITE = "{0} BETWEEN -1.7976931348623157e308 AND 1.7976931348623157e308"
_TRADE_READABLE = (
    "(typeof(regime) = 'text' AND typeof(pnl_pct) IN ('real', 'integer') "
    "AND typeof(holding_secs) IN ('real', 'integer') "
    f"AND {_FINITE.format('pnl_pct')} AND {_FINITE.format('holding_secs')})"
)
_KIND_READABLE = "(typeof(kind) = 'text')"


def _left_out(count: int) -> str:
    return (
        f"{count} trade or insight row(s) of memory.db hold a value of the wrong type (a null, "
        "text, blob or infinity where the schema has a number or text): left out of these "
        "figures, as the memory store leaves them out of every read; kept in the file"
    )


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

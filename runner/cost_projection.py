"""The projection ``vigil run`` and ``vigil replay --decider claude`` print before spending: the
recent gate rate from the state dir's journal (its newest ``TAIL_BYTES``, at most the last
``RECENT_DAYS`` days), else the rate the cost benchmark measured."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

from agent.claude_schema import DEFAULT_WAKE_RULES, WakeRules
from agent.config import AgentConfig
from agent.projection import MEASURED_RATE, GateRate, Projection, project
from core.clock import DAY_MS, LATEST_TIME_MS
from state.segments import UnreadableSegmentError, recent_lines

log = logging.getLogger(__name__)

TAIL_BYTES = 32 * 1024 * 1024  # about a week of 6-8 KB decision lines
RECENT_DAYS = 7.0
MIN_DAYS = 0.5  # a shorter journal says little about a day
_ORDER = ("wake", "anomaly", "watchdog", "agent_timer", "candle_close")


def _layer(trigger: list[str]) -> str:
    found = {str(r).split(":", 1)[0] for r in trigger}
    found = {"watchdog" if f.startswith("watchdog") else f for f in found}
    return next((layer for layer in _ORDER if layer in found), "other")


def _usable(record: dict[str, Any]) -> bool:
    """A line a person's edit garbled is skipped: a time that is not a whole ms was a traceback
    at start, and one past 2100 made the rate that line's week's alone."""
    at_ms = record.get("at_ms")
    return (
        type(at_ms) is int
        and at_ms < LATEST_TIME_MS
        and isinstance(record.get("trigger"), list | None)
    )


def journal_rate(journal: Path) -> GateRate | None:
    """Passes per layer per day over the journal's recent days (None: too little journal)."""
    try:
        lines = recent_lines(journal, TAIL_BYTES)  # across rotated segments
    except UnreadableSegmentError as exc:  # a projection is advice: the start goes on
        log.warning("cost projection: %s; projecting from the measured rate", exc)
        return None
    records = []
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(record, dict) and _usable(record):
            records.append(record)
    if not records:
        return None
    end = max(r["at_ms"] for r in records)
    start = max(min(r["at_ms"] for r in records), end - int(RECENT_DAYS * DAY_MS))
    days = (end - start) / DAY_MS
    if days < MIN_DAYS:
        return None
    recent = [r for r in records if r["at_ms"] >= start]
    decisions = [r for r in recent if r.get("type", "decision") == "decision"]
    layers = Counter(_layer(r.get("trigger") or []) for r in decisions)
    routine = [
        r for r in decisions if _layer(r.get("trigger") or []) in {"candle_close", "agent_timer"}
    ]
    unchanged = sum(r.get("decided_by") == "unchanged" for r in routine)
    return GateRate(
        passes_per_day={layer: n / days for layer, n in layers.items()},
        reviews_per_day=sum(r.get("type") == "review" for r in recent) / days,
        source=f"the journal's last {days:.1f} days",
        unchanged_share=unchanged / len(routine) if unchanged and routine else None,
    )


def projection(
    config: AgentConfig, journal: Path, tickers: int, wake: WakeRules = DEFAULT_WAKE_RULES
) -> Projection:
    return project(config, journal_rate(journal) or MEASURED_RATE, tickers, wake)


def projection_text(config: AgentConfig, journal: Path, wake: WakeRules, tickers: int) -> str:
    """``wake``: the run's (its tickers' metrics are in the system prompt whose cost is counted)."""
    return projection(config, journal, tickers, wake).text(config.budget_text)

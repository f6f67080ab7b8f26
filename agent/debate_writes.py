"""What the debate writes to long-term memory, and when (the seed's write policy).

After a decision: bull, bear and trader outputs unless ``memory_store_manager_only``, the manager's
always; every ``rollup_count`` manager reports one roll-up. After an exit: the reflection, with
salience ``memory_reflection_role_weight``. A role that fell back or answered only blanks writes
nothing (a stub is no memory), and text shaped like an instruction to a model is never written (it
is counted).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from agent.debate_config import DebateConfig
from agent.debate_memory import (
    Hygiene,
    LongTermMemory,
    MemoryEntry,
    Rollup,
    salience_of,
    stores_long_term,
)
from agent.debate_prompt import fenced
from agent.debate_record import RoleResult
from core.events import PositionExit
from core.failure_streak import FailureStreak

log = logging.getLogger(__name__)


class MemoryWriter:
    def __init__(
        self, memory: LongTermMemory | None, config: DebateConfig, hygiene: Hygiene
    ) -> None:
        self._memory = memory
        self._config = config
        self._hygiene = hygiene
        self._rollup = Rollup(config.rollup_count)
        self._failing = FailureStreak()  # of the writes: said once, and per new error

    async def after_decision(self, results: Sequence[RoleResult], at_ms: int) -> dict[str, Any]:
        counts = {
            "written": 0,
            "skipped_policy": 0,
            "skipped_fallback": 0,
            "skipped_empty": 0,
            "skipped_injection": 0,
            "rollups": 0,
            "failed": 0,
        }
        if self._memory is None:
            return {"memory": "off"}
        for result in results:
            if result.role == "reflection":
                continue  # written by ``reflection`` with its own salience
            if not stores_long_term(result.role, self._config):
                counts["skipped_policy"] += 1
                continue
            entry = await self._write(result, at_ms, counts)
            if entry is not None and result.role == "manager":
                rollup = self._rollup.add(entry)
                if rollup is not None and await self._put(rollup, counts):
                    counts["rollups"] += 1
        return counts

    async def reflection(self, result: RoleResult, event: PositionExit) -> dict[str, Any]:
        counts = {
            "written": 0,
            "skipped_fallback": 0,
            "skipped_empty": 0,
            "skipped_injection": 0,
            "failed": 0,
        }
        if self._memory is not None:
            await self._write(result, event.at_ms, counts, ticker=event.ticker)
        return {"text": result.text, "fell_back": result.fell_back, **counts}

    async def _write(
        self, result: RoleResult, at_ms: int, counts: dict[str, int], ticker: str | None = None
    ) -> MemoryEntry | None:
        if result.fell_back:
            counts["skipped_fallback"] += 1
            return None
        if not result.text:  # a valid answer of blanks: nothing to remember
            counts["skipped_empty"] += 1
            return None
        if self._hygiene.injection_shaped(result.text):
            counts["skipped_injection"] += 1
            log.warning("debate: %s output looks like an instruction; not memorised", result.role)
            return None
        entry = MemoryEntry(
            text=result.text,
            role=result.role,
            kind="reflection" if result.role == "reflection" else "debate",
            ticker=ticker,
            created_ms=at_ms,
            salience=salience_of(result.role, self._config),
        )
        return entry if await self._put(entry, counts) else None

    async def _put(self, entry: MemoryEntry, counts: dict[str, int]) -> bool:
        assert self._memory is not None
        try:
            written = await self._memory.remember(entry)
        except Exception as exc:  # a store that is down never breaks a decision
            counts["failed"] += 1
            # a full memory.db fails every role of every decision the same way: its traceback
            # is logged once, not four times a decision; another error with its own
            why = f"{type(exc).__name__}: {exc}"
            if self._failing.failed(why):
                log.exception(
                    "debate: could not write a %s memory (%s); the outputs go unremembered "
                    "until the long-term memory takes them again",
                    entry.role,
                    why,
                )
            return False
        if written and self._failing.ended():  # a write refused by the filters says nothing
            log.warning("debate: the long-term memory takes the outputs again")
        counts["written"] += int(written)
        return written


def reflection_context(event: PositionExit) -> tuple[str, str]:
    """The closed trade's numbers (fenced data) and the retrieval query for its lesson."""
    numbers = {
        "ticker": event.ticker,
        "exit_reason": event.reason,
        "pnl_pct": round(event.pnl_pct, 3),
        "holding_hours": round(event.holding_secs / 3600, 2),
        "regime": event.regime,
        "signals": event.signals,
    }
    query = f"{event.ticker} {event.regime} {'win' if event.pnl_pct > 0 else 'loss'} {event.reason}"
    return fenced("trade", numbers), query

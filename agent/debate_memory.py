"""The debate's memories: the working memory (last role outputs), the long-term memory port, the
write policy and the roll-up of manager reports, and the hygiene every model text passes first.

Long-term memory is a small port (``LongTermMemory``: recall with score parts, remember) so the
debate runs on the trading-memory store or on ``InProcessMemory`` alike. Model text is data: before
it is kept anywhere it is redacted (secrets), cut to a budget, and text shaped like an instruction to
a model is never written to long-term memory (it stays in this decision's journal line, redacted).
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent.debate_config import DebateConfig, Role
from core.clock import DAY_MS
from core.redact import Redactor

MemoryKind = Literal["debate", "reflection", "rollup"]

#: instruction-shaped text: what a prompt injection looks like, whoever wrote it
_INJECTION = re.compile(
    r"(?i)(ignore|disregard|forget)\s+(all\s+|any\s+|the\s+|your\s+)?(previous|prior|above|"
    r"earlier)?\s*(instructions|rules|prompts?)|\bsystem\s*(prompt)?\s*:|</?\s*(system|snapshot|"
    r"context|memories|working_memory|arguments|model_notes)\b|\byou\s+are\s+now\b|\bnew\s+instructions\b"
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkingItem(_Frozen):
    """One role output as every later prompt sees it."""

    content: str
    role: Role
    ticker: str | None
    created_at: int  # ms


class MemoryEntry(_Frozen):
    text: str = Field(min_length=1, max_length=4000)
    role: Role
    kind: MemoryKind
    ticker: str | None
    created_ms: int
    salience: float = Field(ge=0.0, le=1.0)


class ScoreParts(_Frozen):
    sim: float
    role_weight: float
    age_days: float
    salience: float
    score: float


class Recalled(_Frozen):
    memory_id: str
    text: str
    role: str
    kind: str
    ticker: str | None
    created_ms: int
    parts: ScoreParts


class RecallQuery(_Frozen):
    role: Role
    role_weight: float
    text: str
    ticker: str | None
    now_ms: int
    k: int


class LongTermMemory(Protocol):
    async def recall(self, query: RecallQuery) -> list[Recalled]:
        """The ``k`` best memories for ``query``, best first, each with its score parts."""
        ...

    async def remember(self, entry: MemoryEntry) -> bool:
        """Write one entry; False when a filter (length, duplicate) kept it out."""
        ...


class WorkingMemory:
    """A rolling window of the last ``size`` role outputs (0: none kept)."""

    def __init__(self, size: int) -> None:
        self._items: deque[WorkingItem] = deque(maxlen=max(size, 0) or None)
        self._size = size

    def add(self, item: WorkingItem) -> None:
        if self._size > 0:
            self._items.append(item)

    def items(self) -> tuple[WorkingItem, ...]:
        return tuple(self._items)

    def __len__(self) -> int:
        return len(self._items)


class Hygiene:
    """Redaction, length cut and the injection check for model-written text."""

    def __init__(self, redactor: Redactor, max_chars: int) -> None:
        self._redactor = redactor
        self._max_chars = max_chars

    def clean(self, text: str) -> str:
        redacted, _count = self._redactor.redact(" ".join(text.split()))
        if len(redacted) > self._max_chars:
            redacted = redacted[: self._max_chars - 1].rstrip() + "…"
        return redacted

    def redact_value(self, value: object) -> object:
        """Every string inside ``value`` (a role output's JSON) without secrets."""
        if isinstance(value, str):
            return self._redactor.redact(value)[0]
        if isinstance(value, list):
            return [self.redact_value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.redact_value(v) for k, v in value.items()}
        return value

    @staticmethod
    def injection_shaped(text: str) -> bool:
        return _INJECTION.search(text) is not None


def stores_long_term(role: Role, config: DebateConfig) -> bool:
    """The seed's write policy: the manager and reflection always; bull, bear and trader unless
    ``memory_store_manager_only``."""
    if role in ("manager", "reflection"):
        return True
    return not config.memory_store_manager_only


def salience_of(role: Role, config: DebateConfig) -> float:
    return config.memory_reflection_role_weight if role == "reflection" else 0.5


class Rollup:
    """Every ``rollup_count`` manager reports become one summary entry (kind ``rollup``)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._pending: list[MemoryEntry] = []

    def add(self, report: MemoryEntry) -> MemoryEntry | None:
        self._pending.append(report)
        if len(self._pending) < self._count:
            return None
        reports, self._pending = self._pending, []
        return rollup_entry(reports)


def rollup_entry(reports: Sequence[MemoryEntry]) -> MemoryEntry:
    """One line per report's first sentence, oldest first, within 1200 characters."""
    heads = [r.text.split(". ", 1)[0][:200] for r in reports]
    text = f"Roll-up of {len(reports)} manager reports: " + " | ".join(heads)
    return MemoryEntry(
        text=text[:1200],
        role="manager",
        kind="rollup",
        ticker=None,
        created_ms=reports[-1].created_ms,
        salience=max(r.salience for r in reports),
    )


_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) > 2)


class InProcessMemory:
    """``LongTermMemory`` in the process (lost at exit): word-overlap similarity, FinMem score
    ``sim * role_weight - recency_lambda * age_days + salience_weight * salience``. Exact
    duplicates of the same role and ticker are not written twice."""

    def __init__(
        self,
        *,
        recency_lambda: float = 0.01,
        salience_weight: float = 0.3,
        score_cutoff: float = 0.0,
    ) -> None:
        self._entries: list[tuple[str, MemoryEntry, frozenset[str]]] = []
        self._keys: set[tuple[str, str, str | None]] = set()
        self._recency_lambda = recency_lambda
        self._salience_weight = salience_weight
        self._score_cutoff = score_cutoff

    @property
    def entries(self) -> tuple[MemoryEntry, ...]:
        return tuple(entry for _id, entry, _w in self._entries)

    async def remember(self, entry: MemoryEntry) -> bool:
        key = (entry.text, entry.role, entry.ticker)
        if key in self._keys:
            return False
        self._keys.add(key)
        self._entries.append((f"m{len(self._entries) + 1}", entry, _words(entry.text)))
        return True

    async def recall(self, query: RecallQuery) -> list[Recalled]:
        if query.k <= 0:
            return []
        wanted = _words(query.text)
        # scores as plain tuples, objects only for the k kept (a recall is on the decision path)
        scored: list[tuple[float, int, str, float, float, MemoryEntry]] = []
        for memory_id, entry, words in self._entries:
            if entry.created_ms > query.now_ms:
                continue
            if query.ticker is not None and entry.ticker not in (None, query.ticker):
                continue
            union = len(wanted | words)
            sim = len(wanted & words) / union if union else 0.0
            age_days = max(0.0, (query.now_ms - entry.created_ms) / DAY_MS)
            score = (
                sim * query.role_weight
                - self._recency_lambda * age_days
                + self._salience_weight * entry.salience
            )
            if score >= self._score_cutoff:
                scored.append((score, entry.created_ms, memory_id, sim, age_days, entry))
        best = heapq.nsmallest(query.k, scored, key=lambda s: (-s[0], -s[1], s[2]))
        return [
            Recalled(
                memory_id=memory_id,
                text=entry.text,
                role=entry.role,
                kind=entry.kind,
                ticker=entry.ticker,
                created_ms=entry.created_ms,
                parts=ScoreParts(
                    sim=round(sim, 4),
                    role_weight=query.role_weight,
                    age_days=round(age_days, 3),
                    salience=entry.salience,
                    score=round(score, 4),
                ),
            )
            for score, _created, memory_id, sim, age_days, entry in best
        ]

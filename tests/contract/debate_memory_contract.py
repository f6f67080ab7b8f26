"""The debate's ``LongTermMemory`` contract (agent/debate_memory.py), against the port only.

Subclass ``LongTermMemoryContract`` and provide a ``memory`` fixture yielding a FRESH, empty one.
"""

from __future__ import annotations

import pytest

from agent.debate_config import Role
from agent.debate_memory import LongTermMemory, MemoryEntry, RecallQuery

T0 = 1_740_000_000_000
DAY_MS = 86_400_000


def entry(
    text: str,
    *,
    role: Role = "manager",
    ticker: str | None = None,
    created_ms: int = T0,
    salience: float = 0.5,
) -> MemoryEntry:
    kind = "reflection" if role == "reflection" else "debate"
    return MemoryEntry(
        text=text, role=role, kind=kind, ticker=ticker, created_ms=created_ms, salience=salience
    )


def query(
    text: str, *, k: int = 3, now_ms: int = T0 + DAY_MS, ticker: str | None = None
) -> RecallQuery:
    return RecallQuery(role="trader", role_weight=1.2, text=text, ticker=ticker, now_ms=now_ms, k=k)


class LongTermMemoryContract:
    @pytest.fixture
    def memory(self) -> LongTermMemory:
        raise NotImplementedError

    async def test_what_is_remembered_is_recalled_with_its_score_parts(
        self, memory: LongTermMemory
    ) -> None:
        assert await memory.remember(entry("Funding spikes before the weekend reverse quickly."))
        (found,) = await memory.recall(query("funding spikes weekend reverse"))
        assert "Funding spikes before the weekend" in found.text and found.role == "manager"
        assert found.created_ms == T0
        assert found.parts.age_days == pytest.approx(1.0, abs=0.01)
        assert found.parts.salience == 0.5 and found.parts.role_weight > 0

    async def test_the_same_text_of_the_same_role_and_ticker_is_written_once(
        self, memory: LongTermMemory
    ) -> None:
        text = "Breakouts on thin weekend volume failed three times in a row."
        assert await memory.remember(entry(text, ticker="BTC/USDT"))
        assert not await memory.remember(entry(text, ticker="BTC/USDT"))
        assert len(await memory.recall(query("breakouts thin weekend volume failed"))) == 1

    async def test_best_first_at_most_k_and_nothing_from_the_future(
        self, memory: LongTermMemory
    ) -> None:
        texts = [  # different enough that no adapter's near-duplicate filter merges them
            "Momentum entries after a squeeze need a stop under the wick.",
            "After a squeeze, momentum entries chased the top twice this month.",
            "Squeeze momentum entries worked only with funding negative.",
            "Momentum entries after a short squeeze: take half off at 2R.",
        ]
        for n, text in enumerate(texts):
            await memory.remember(entry(text, salience=0.2 + n * 0.2, created_ms=T0 + n))
        await memory.remember(
            entry("A lesson written tomorrow about squeezes.", created_ms=T0 + 2 * DAY_MS)
        )
        found = await memory.recall(query("momentum entries after a squeeze", k=3))
        assert len(found) == 3
        scores = [f.parts.score for f in found]
        assert scores == sorted(scores, reverse=True)
        assert found[0].text.endswith(texts[3])  # the most salient first
        assert all("tomorrow" not in f.text for f in found)
        assert await memory.recall(query("squeeze", k=0)) == []

    async def test_a_ticker_query_sees_that_ticker_and_no_ticker_only(
        self, memory: LongTermMemory
    ) -> None:
        await memory.remember(
            entry(
                "SOL lesson: exits on the timer cut winners short.",
                ticker="SOL/USDT",
                role="reflection",
            )
        )
        await memory.remember(
            entry(
                "ETH lesson: exits on the timer cut winners short too.",
                ticker="ETH/USDT",
                role="reflection",
            )
        )
        await memory.remember(entry("General lesson: exits on the timer cut winners short always."))
        found = await memory.recall(
            query("exits on the timer cut winners short", ticker="SOL/USDT")
        )
        assert {f.ticker for f in found} == {"SOL/USDT", None}
        (lesson,) = [f for f in found if f.ticker == "SOL/USDT"]
        assert lesson.role == "reflection" and lesson.kind == "reflection"

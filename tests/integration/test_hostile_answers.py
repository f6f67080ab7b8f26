"""A small corpus of hostile model answers through the real SDK, decider, caps, store and journal:
no cap breached, nothing escapes, every decision journaled, no secret stored (the full >= 1,000 are
``python -m bench fuzz_answers``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.hostile_answers import CATEGORIES, hostile_corpus, run_corpus

pytestmark = pytest.mark.timeout(300)


async def test_hostile_answers_never_breach_a_cap_escape_or_leak(tmp_path: Path) -> None:
    corpus = hostile_corpus(len(CATEGORIES) * 6, seed=11)
    report = await run_corpus(corpus, tmp_path)
    assert report.violations == []
    assert report.answers == report.journaled == len(corpus)
    assert report.by_claude > 0 and report.by_fallback > 0  # both paths were taken
    assert set(report.per_category) == set(CATEGORIES)

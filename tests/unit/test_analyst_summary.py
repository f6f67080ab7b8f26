"""Summaries: representatives by cosine de-duplication, and the model -> numbers -> text chain."""

from __future__ import annotations

import pytest
from analyst_support import DAY1_MS, HOUR_MS

from memory.analyst_model import AnalystReport, utc_day
from memory.analyst_summary import (
    SECTIONS,
    SummaryRequest,
    make_summary,
    representatives,
)


def _report(
    i: int, content: str, *, figures: dict[str, float | None] | None = None, confidence: float = 0.6
) -> AnalystReport:
    at = DAY1_MS + i * HOUR_MS
    return AnalystReport(
        report_id=f"r-{i:03d}",
        analyst="market",
        ticker="BTC/USDT",
        day=utc_day(at),
        at_ms=at,
        content=content,
        confidence=confidence,
        timescale="intraday",
        figures={"price": 80_000.0 + i * 1_000, "return_zscore": 0.1 * i}
        if figures is None
        else figures,
        labels={"trend_1h": "up" if i < 5 else "down"},
    )


def _request(reports: list[AnalystReport]) -> SummaryRequest:
    return SummaryRequest(
        analyst="market",
        ticker="BTC/USDT",
        day=reports[-1].day,
        session="post_close",
        reports=tuple(reports),
    )


DISTINCT = [
    "BTC breaks out above resistance on heavy volume.",
    "Funding cools while price consolidates in a tight range.",
    "Sharp sell-off wipes out the morning gains quickly.",
    "RSI divergence hints at exhaustion of the downtrend today.",
    "Range trading resumes, volatility collapses overnight.",
    "Bids step in at the weekly low and hold firmly.",
    "Momentum flips positive across all timeframes again.",
]


def test_duplicates_collapse_and_three_to_five_kept() -> None:
    same = [_report(i, f"BTC at {86_000 + i} trend up RSI 55.") for i in range(10)]
    reps = representatives(same)
    assert len(reps) == 3  # all one picture: one distinct, topped up with the newest
    spread = [_report(i, text) for i, text in enumerate(DISTINCT)]
    reps = representatives(spread)
    assert len(reps) == 5
    assert reps[0].report_id == "r-000" and reps[-1].report_id == "r-006"  # first and last kept
    assert representatives(spread[:2]) == spread[:2]


class _Model:
    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer
        self.seen: list[SummaryRequest] = []

    async def summarise(self, request: SummaryRequest) -> str:
        self.seen.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


GOOD = "**Key trends**: up.\n**Key events**: breakout.\n**Risk factors**: funding.\n**Signal strength**: medium"


async def test_model_path_sees_only_its_reports() -> None:
    model = _Model(GOOD)
    reports = [_report(i, t) for i, t in enumerate(DISTINCT)]
    summary = await make_summary(_request(reports), now_ms=1, model=model)
    assert summary.path == "model" and summary.signal_strength == "medium"
    assert len(model.seen[0].reports) == 5
    assert {r.analyst for r in model.seen[0].reports} == {"market"}


@pytest.mark.parametrize(
    "answer",
    [
        RuntimeError("HTTP 529"),
        "no sections here",
        "**Key trends** x **Key events** x **Risk factors** x **Signal strength**: huge",
    ],
)
async def test_model_failure_falls_back_to_the_numbers(answer: str | Exception) -> None:
    reports = [_report(i, t) for i, t in enumerate(DISTINCT)]
    summary = await make_summary(_request(reports), now_ms=1, model=_Model(answer))
    assert summary.path == "deterministic"
    assert summary.detail.startswith("model:")
    for section in SECTIONS:
        assert f"**{section}**" in summary.text
    assert 500 <= len(summary.text) <= 1000
    assert "trend_1h up -> down" in summary.text  # the label change is a key event
    assert "price 80,000 -> 86,000 (+7.5 %)" in summary.text


async def test_without_a_model_and_without_figures_the_text_is_concatenated() -> None:
    reports = [_report(i, t * 8, figures={}) for i, t in enumerate(DISTINCT[:3])]
    reports = [r.model_copy(update={"labels": {}}) for r in reports]
    summary = await make_summary(_request(reports), now_ms=1, model=None)
    assert summary.path == "concatenation" and summary.signal_strength is None
    assert "no summariser" in summary.detail and "no figures" in summary.detail
    assert len(summary.text) <= 1000
    assert summary.text.endswith(".")  # a sentence boundary


async def test_signal_strength_from_confidence() -> None:
    high = [_report(i, t, confidence=0.9) for i, t in enumerate(DISTINCT)]
    low = [_report(i, t, confidence=0.2) for i, t in enumerate(DISTINCT)]
    assert (await make_summary(_request(high), now_ms=1, model=None)).signal_strength == "high"
    assert (await make_summary(_request(low), now_ms=1, model=None)).signal_strength == "low"


def test_representatives_remembered_equal_the_choice_made_again() -> None:
    from memory.analyst_summary import _representatives

    spread = [_report(i, text) for i, text in enumerate(DISTINCT)]
    first = representatives(spread)
    first.pop()  # a caller's change to its answer is not the memo's
    assert representatives(spread) == _representatives(spread)
    # equal reports, other objects: the same answer; any field changed: chosen again
    again = [r.model_copy() for r in spread]
    assert representatives(again) == _representatives(again)
    changed = [*spread[:3], spread[3].model_copy(update={"content": DISTINCT[2]}), *spread[4:]]
    assert representatives(changed) == _representatives(changed)
    assert representatives(changed) != _representatives(spread)
    fewer = spread[:2]
    assert representatives(fewer) == _representatives(fewer) == fewer

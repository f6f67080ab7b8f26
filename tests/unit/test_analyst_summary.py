"""Summaries: representatives by cosine de-duplication, and the model -> numbers -> text chain."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter

import pytest
from analyst_support import DAY1_MS, HOUR_MS, market_report
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from memory import analyst_summary
from memory.analyst_model import AnalystReport
from memory.analyst_summary import (
    _TOKEN,
    DUPLICATE_COSINE,
    MAX_REPRESENTATIVES,
    MIN_REPRESENTATIVES,
    SECTIONS,
    SummaryInvalid,
    SummaryRequest,
    check_summary,
    make_summary,
    representatives,
)


def _report(
    i: int, content: str, *, figures: dict[str, float | None] | None = None, confidence: float = 0.6
) -> AnalystReport:
    at = DAY1_MS + i * HOUR_MS
    return market_report(
        f"r-{i:03d}",
        at,
        content,
        confidence=confidence,
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


def _tokens_unremembered(text: str) -> Counter[str]:
    """The tokenising without the token memo: every number parsed."""
    out: Counter[str] = Counter()
    for token in _TOKEN.findall(text.lower()):
        if token[0].isdigit() or token[0] == "-":
            try:
                value = float(token.replace(",", ""))
            except ValueError:
                continue
            out[f"{value:.2g}"] += 1
        else:
            out[token] += 1
    return out


_words = st.lists(
    st.one_of(
        st.sampled_from(["BTC", "RSI", "%B", "n/a", "up", "z", "-", ",", ".", " "]),
        st.from_regex(r"-?\d{1,6}([.,]\d{1,3}){0,3}", fullmatch=True),
        st.floats(allow_nan=False, allow_infinity=False).map(str),
        st.text(max_size=4),
        # whitespace other than a space splits chunks too; these lower-case to ASCII letters
        st.sampled_from(["\t", "\n", "\xa0", "\u2028", "\u3000", "\u212a", "\u0130", "\u03a3"]),
    ),
    max_size=30,
).map("".join)  # words run together too: "BTC-0.1" is one chunk of two tokens


#: few characters, so that chunks recur and nearly recur ("-1" and "1", "1.5" and "1,5")
_close_texts = st.lists(
    st.sampled_from(["-1", "1", "1.5", "1,5", "15", "-", "a", "%", "a/1", "-a", "\t", "\xa0"]),
    max_size=12,
).map(" ".join)


@settings(max_examples=examples(300), deadline=None)
@given(
    texts=st.lists(st.one_of(_words, _close_texts), min_size=1, max_size=6),
    kept=st.sampled_from([1, 3, 65536]),
)
def test_tokens_remembered_equal_those_parsed_again(texts: list[str], kept: int) -> None:
    """The chunk memo (tokens of whitespace-separated chunks) against the regex over the
    whole text, every number parsed."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(analyst_summary, "_CHUNK_KEYS_KEPT", kept)
        patch.setattr(analyst_summary, "_chunk_keys", {})
        for text in texts * 2:  # the second time from the memo
            assert analyst_summary._tokens(text) == _tokens_unremembered(text)
            assert list(analyst_summary._tokens(text).items()) == list(
                _tokens_unremembered(text).items()
            )  # the same order too (a Counter's equality does not look at it)
        assert len(analyst_summary._chunk_keys) <= kept


def _plain_cosine(a: Counter[str], b: Counter[str]) -> float:
    dot = sum(a[token] * b[token] for token in a.keys() & b.keys())
    norm = math.sqrt(sum(c * c for c in a.values())) * math.sqrt(sum(c * c for c in b.values()))
    return dot / norm if norm else 0.0


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(_words, _close_texts), st.one_of(_words, _close_texts))
def test_cosine_of_bags_is_the_plain_formula_to_the_bit(one: str, two: str) -> None:
    """The dot product over one side's words (the other's missing as 0), each norm made once,
    against the formula over the shared words: the same float."""
    plain = _plain_cosine(_tokens_unremembered(one), _tokens_unremembered(two))
    assert analyst_summary._cosine(analyst_summary._bag(one), analyst_summary._bag(two)) == plain
    assert analyst_summary._cosine(analyst_summary._bag(two), analyst_summary._bag(one)) == plain


def _representatives_oldest_first(reports: list[AnalystReport]) -> list[AnalystReport]:
    """The choice with each report compared with the kept ones oldest first and every cosine
    from the plain formula: the answer without the memos and the newest-first order."""
    ordered = sorted(reports, key=lambda r: (r.at_ms, r.report_id))
    kept: list[tuple[AnalystReport, Counter[str]]] = []
    for report in ordered:
        counts = _tokens_unremembered(report.content)
        if all(_plain_cosine(counts, other) < DUPLICATE_COSINE for _r, other in kept):
            kept.append((report, counts))
    distinct = [r for r, _c in kept]
    if len(distinct) > MAX_REPRESENTATIVES:
        step = (len(distinct) - 1) / (MAX_REPRESENTATIVES - 1)
        distinct = [distinct[round(i * step)] for i in range(MAX_REPRESENTATIVES)]
    elif len(distinct) < MIN_REPRESENTATIVES:
        extra = [r for r in reversed(ordered) if r not in distinct]
        distinct += extra[: MIN_REPRESENTATIVES - len(distinct)]
    return sorted(distinct, key=lambda r: (r.at_ms, r.report_id))


_VOCABULARY = ["btc", "up", "down", "rsi", "55", "56", "80,000", "81,000", "flat", "z", "-0.5"]


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=8), max_size=25),
    st.sampled_from([2, 7, 4096]),
)
def test_representatives_compared_newest_first_choose_as_oldest_first(
    contents: list[list[str]], kept: int
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(analyst_summary, "_BAGS_KEPT", kept)
        patch.setattr(analyst_summary, "_bags", {})
        reports = [_report(i, " ".join(words) + ".") for i, words in enumerate(contents)]
        assert analyst_summary._representatives(reports) == _representatives_oldest_first(reports)
        assert analyst_summary._representatives(reports) == _representatives_oldest_first(reports)
        assert len(analyst_summary._bags) <= kept


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_VOCABULARY), min_size=1, max_size=8), max_size=25),
    st.sets(st.integers(0, 24)),
    st.sampled_from([2, 7, 4096]),
)
def test_wording_learnt_ahead_chooses_as_the_plain_formula(
    contents: list[list[str]], learnt: set[int], kept: int
) -> None:
    """``learn_wording`` (the analysts' process, between rolls) fills the memo a roll reads:
    whichever reports it saw before, the roll chooses as without any memo."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(analyst_summary, "_BAGS_KEPT", kept)
        patch.setattr(analyst_summary, "_bags", {})
        reports = [_report(i, " ".join(words) + ".") for i, words in enumerate(contents)]
        analyst_summary.learn_wording([r for i, r in enumerate(reports) if i in learnt])
        assert len(analyst_summary._bags) <= kept
        assert analyst_summary._representatives(reports) == _representatives_oldest_first(reports)


def test_a_summary_padded_with_blanks_is_checked_without_freezing_the_loop() -> None:
    """A model gone astray can answer a run of blanks after "Signal strength" (600 tokens hold
    tens of thousands): the check's pattern took time quadratic in it (8,000 blanks: seconds),
    on the event loop. Run in a child process so a hang is cut at the guard, not left running;
    the guard is far above the milliseconds the check takes."""
    script = (
        "from memory.analyst_summary import SummaryInvalid, check_summary\n"
        "text = '**Key trends** **Key events** **Risk factors** **Signal strength**'\n"
        "try:\n"
        "    check_summary(text + ' ' * 200_000 + 'x')\n"
        "except SummaryInvalid as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "signal strength is not high, medium or low"


@pytest.mark.parametrize(
    ("tail", "ok"),
    [(": high", True), ("**: Medium", True), (" -\n\tlow", True), (" — low", True), (" x", False)],
)
def test_the_signal_strength_is_read_as_before(tail: str, ok: bool) -> None:
    text = "**Key trends** a. **Key events** b. **Risk factors** c. **Signal strength**" + tail
    if ok:
        assert check_summary(text) == text
    else:
        with pytest.raises(SummaryInvalid):
            check_summary(text)

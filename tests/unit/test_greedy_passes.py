"""Greedy passes walked ahead: whatever was walked, representatives choose as from scratch."""

from __future__ import annotations

from collections import Counter

import pytest
from analyst_support import DAY1_MS, HOUR_MS, market_report
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_analyst_summary import (
    _plain_cosine,
    _representatives_oldest_first,
    _tokens_unremembered,
)

from memory import analyst_summary
from memory.analyst_model import AnalystReport
from memory.analyst_summary import DUPLICATE_COSINE
from memory.greedy_passes import GreedyPasses, sort_key

_WORDS = ["btc", "up", "down", "rsi", "55", "56", "80,000", "flat", "z", "-0.5", "eth", "sol"]

#: (at, id, words, day): few times and ids, so ties in at_ms and equal ids are common
_SPEC = st.tuples(
    st.integers(0, 3),
    st.integers(0, 5),
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5),
    st.integers(0, 1),
)


def _make(spec: tuple[int, int, list[str], int]) -> AnalystReport:
    at, ident, words, day = spec
    at_ms = DAY1_MS + day * 24 * HOUR_MS + at
    return market_report(f"r-{ident}", at_ms, " ".join(words) + ".")


#: what is walked ahead besides the call's own sorted reports: other reports
_OTHERS = st.lists(_SPEC, max_size=6)
#: the call's sorted reports walked ahead: how many, as copies or not, which one reworded
_PLAN = st.tuples(st.integers(0, 25), st.booleans(), st.integers(-1, 25))


def _greedy_from_scratch(ordered: list[AnalystReport]) -> list[int]:
    """The positions the pass keeps, with the plain formulas (no memo of any kind)."""
    kept: list[Counter[str]] = []
    positions = []
    for at, report in enumerate(ordered):
        counts = _tokens_unremembered(report.content)
        if all(_plain_cosine(counts, other) < DUPLICATE_COSINE for other in kept):
            kept.append(counts)
            positions.append(at)
    return positions


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(_SPEC, max_size=20), _PLAN, _OTHERS, st.sampled_from([1, 2, 64]), st.booleans())
def test_representatives_after_any_walk_ahead_are_the_choice_from_scratch(
    specs: list[tuple[int, int, list[str], int]],
    plan: tuple[int, bool, int],
    others: list[tuple[int, int, list[str], int]],
    kept: int,
    sort_walk: bool,
) -> None:
    reports = [_make(spec) for spec in specs]
    reports += reports[: len(reports) // 3]  # duplicates: the same object twice
    ordered = sorted(reports, key=sort_key)
    length, copied, reworded = plan
    ahead = [r.model_copy() if copied else r for r in ordered[:length]]
    if 0 <= reworded < len(ahead):  # a wrong prefix: the same ids, one other wording
        ahead[reworded] = ahead[reworded].model_copy(update={"content": "flat z 56 up rsi."})
    ahead += [_make(spec) for spec in others]
    if sort_walk:
        ahead.sort(key=sort_key)
    with pytest.MonkeyPatch.context() as patch:
        passes = GreedyPasses(analyst_summary._bag, analyst_summary._distinct, kept)
        patch.setattr(analyst_summary, "_passes", passes)
        analyst_summary.learn_wording(ahead)
        start, positions, bags = passes.resume(ordered)
        assert len(bags) == len(positions)
        for at in range(start, len(ordered)):
            if analyst_summary._distinct(bag := analyst_summary._bag(ordered[at].content), bags):
                positions.append(at)
                bags.append(bag)
        assert positions == _greedy_from_scratch(ordered)
        chosen = analyst_summary._representatives(reports)
        assert chosen == _representatives_oldest_first(reports)
        assert all(any(r is mine for mine in reports) for r in chosen)  # the call's objects
        # through the memo too: equal copies get their own objects back
        copies = [r.model_copy() for r in reports]
        for call in (reports, copies):
            again = analyst_summary.representatives(call)
            assert again == chosen
            assert all(any(r is mine for mine in call) for r in again)


def test_a_walked_day_is_resumed_whole_and_each_prefix_in_part() -> None:
    """The roll's case: a day's reports walked ahead in order, then read back as equal copies
    (and a shorter or longer list): the pass resumes at the longest shared prefix."""
    passes = GreedyPasses(analyst_summary._bag, analyst_summary._distinct)
    words = ["btc up rsi 55.", "btc up rsi 56.", "btc down flat.", "z -0.5 down.", "flat flat."]
    day = [_make((i, i, w.split(), 0)) for i, w in enumerate(words)]
    for report in day:
        passes.extend(report)
    copies = [r.model_copy() for r in day]
    assert passes.resume(copies)[0] == len(day)
    assert passes.resume(copies[:2])[0] == 2
    later = _make((3, 9, ["later"], 0)).model_copy(update={"at_ms": day[-1].at_ms + 1})
    assert passes.resume([*copies, later])[0] == len(day)
    other = copies[2].model_copy(update={"content": "other words."})
    start, kept, bags = passes.resume([*copies[:2], other, *copies[3:]])
    assert start == 2
    assert all(at < 2 for at in kept) and len(bags) == len(kept)
    assert passes.resume(copies[1:])[0] == 0  # another first report: nothing remembered


def test_passes_kept_are_bounded_and_an_evicted_pass_is_no_longer_walked() -> None:
    passes = GreedyPasses(analyst_summary._bag, analyst_summary._distinct, kept=2)
    days = [[_make((i, 10 * d + i, ["btc", str(i)], d)) for i in range(3)] for d in range(3)]
    for reports in days:  # three days: three passes
        for report in reports:
            passes.extend(report)
    assert len(passes._by_first) == len(passes._open) == 2
    assert passes.resume(days[0])[0] == 0  # the oldest went
    assert passes.resume(days[2])[0] == 3

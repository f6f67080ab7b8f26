"""ContextMemo: the stable classes done once per change, the same answer as every step done."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent.prompt_budgets import PromptBudgets
from agent.prompt_context import (
    RANK_CLASS,
    ContextMemo,
    context_parts,
    stable_key,
    summaries_key,
    within_class_budgets,
)
from agent.prompt_items import (
    _insight_item,
    _note_items,
    _session_item,
    _summary_item,
    context_items,
)
from agent.prompt_trim import Item, size, trim
from memory.context import AssembledContext, Dated, InsightItem, SummaryItem

T0 = 1_743_984_000_000

_words = st.text(alphabet="ab .\n", max_size=420)
_summary = st.builds(
    SummaryItem,
    analyst=st.sampled_from(["market", "regime"]),
    ticker=st.sampled_from(["BTC/USDT", "ETH/USDT"]),
    kind=st.sampled_from(["pre_open", "post_close"]),
    text=_words,
    made_at_ms=st.one_of(st.none(), st.integers(T0 - 10**8, T0)),
)
_insight = st.builds(
    InsightItem,
    text=_words,
    score=st.floats(-1, 2),
    ticker=st.one_of(st.none(), st.just("BTC/USDT")),
    insight_id=st.sampled_from(["", "i1", "i2", "i3"]),
)
_notes = st.lists(
    st.one_of(st.text(alphabet="ab .", max_size=80), st.just("- [auto 2025-03-01 BTC/USDT] x")),
    max_size=12,
).map("\n".join)
#: what stays the same from one decision to the next: a few of them, so sequences repeat them
_stable = st.fixed_dictionaries(
    {
        "caps": st.dictionaries(
            st.sampled_from(["max_position_pct", "max_total_exposure_pct"]),
            st.sampled_from([0.1, 0.25, 1.0, 1, -0.0, 0.0]),
        ),
        "banned_tickers": st.lists(st.sampled_from(["DOGE/USDT", "X/USDT"]), max_size=2).map(tuple),
        "values": st.fixed_dictionaries(
            {},
            optional={
                "policy": _words,
                "rubric": _words,
                "notes": _notes,
                "person_notes": _notes,
            },
        ),
        "rules": st.dictionaries(st.sampled_from(["r0", "r1"]), st.lists(_words, max_size=2)),
        "rule_tickers": st.dictionaries(
            st.sampled_from(["r0", "r1"]), st.lists(st.sampled_from(["BTC/USDT"]), max_size=2)
        ),
        "summaries": st.lists(_summary, max_size=8),
    }
)
_session = st.dictionaries(
    st.sampled_from(["ticker:btc_usdt:decision", "ticker:btc_usdt:analysis:thesis"]),
    st.one_of(_words, st.fixed_dictionaries({"action": st.just("HOLD"), "reasoning": _words})),
)
_volatile = st.tuples(st.lists(_insight, max_size=6), _session, st.integers(0, 10**7))
_budgets = st.builds(
    PromptBudgets,
    item_chars=st.sampled_from([50, 120, 300]),
    context_max_chars=st.sampled_from([100, 700, 1500, 6000]),
    class_chars=st.one_of(
        st.just({}),
        st.dictionaries(
            st.sampled_from(["policy", "summary", "notes", "insight", "session"]),
            st.integers(0, 900),
        ),
    ),
)


def _ctx(
    stable: dict[str, object], volatile: tuple[list[InsightItem], dict[str, object], int]
) -> AssembledContext:
    insights, session, written = volatile
    return AssembledContext.model_validate(
        {
            "values": {},
            **stable,
            "at_ms": T0,
            "insights": insights,
            "session": session,
            "freshness": {
                f"session:{key}": Dated(at_ms=written, age_secs=1.0, stale=False) for key in session
            },
        }
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    budgets=_budgets,
    stables=st.lists(_stable, min_size=1, max_size=3),
    steps=st.lists(st.tuples(st.integers(0, 2), _volatile), min_size=1, max_size=8),
)
def test_memo_gives_what_every_step_on_every_item_gives(
    budgets: PromptBudgets,
    stables: list[dict[str, object]],
    steps: list[tuple[int, tuple[list[InsightItem], dict[str, object], int]]],
) -> None:
    memo = ContextMemo(budgets, size_limit=2)  # small: entries are also evicted and made again
    for which, volatile in steps:
        ctx = _ctx(stables[which % len(stables)], volatile)
        assert memo.parts(ctx) == context_parts(context_items(ctx), budgets)


def test_a_stable_part_that_changed_is_done_again() -> None:
    budgets = PromptBudgets()
    memo = ContextMemo(budgets)
    base = {"values": {"notes": "Person: watch funding."}, "caps": {"max_position_pct": 0.1}}
    first = memo.parts(_ctx(base, ([], {}, 0)))
    edited = {**base, "values": {"notes": "Person: never add to a loser."}}
    second = memo.parts(_ctx(edited, ([], {}, 0)))
    assert "never add to a loser" in second.texts["memory"]
    assert "watch funding" in first.texts["memory"]
    tightened = memo.parts(_ctx({**base, "caps": {"max_position_pct": 0.05}}, ([], {}, 0)))
    assert "max_position_pct = 0.05" in tightened.texts["policy"]


def test_the_summaries_key_remembered_is_the_key_of_the_summaries_given() -> None:
    memo = ContextMemo(PromptBudgets())
    first = [SummaryItem(analyst="a", ticker="T", kind="pre_open", text="x", made_at_ms=1)]
    same_items = list(first)  # a new list of the very same (frozen) items: the key kept
    equal = [first[0].model_copy()]
    other = [first[0].model_copy(update={"text": "y"})]
    for summaries in (first, same_items, equal, other, first, [], first):
        assert memo._summaries_key(summaries) == summaries_key(summaries)


def test_the_key_tells_signed_zero_caps_apart() -> None:
    def key(cap: float) -> tuple[object, ...]:
        return stable_key(_ctx({"caps": {"max_position_pct": cap}}, ([], {}, 0)))

    assert key(0.0) != key(-0.0) and key(0.1) == key(0.1)


def _fields(items: list[Item]) -> list[tuple[object, ...]]:
    return [(i.part, i.key, i.text, i.protected, i.drop_rank) for i in items]


@settings(max_examples=examples(200), deadline=None)
@given(stables=st.lists(_stable, min_size=1, max_size=2), volatiles=st.lists(_volatile, max_size=4))
def test_items_remembered_are_the_items_made_afresh(
    stables: list[dict[str, object]],
    volatiles: list[tuple[list[InsightItem], dict[str, object], int]],
) -> None:
    """Day summaries, note lines, lessons and session entries come from caches keyed on what
    makes them; made afresh they are the same (a lesson scored -0.0 may carry 0.0 in its rank:
    equal ranks)."""
    contexts = [_ctx(s, v) for s in stables for v in volatiles or [([], {}, 0)]]
    remembered = [_fields(context_items(ctx)) for ctx in contexts]
    for ctx, items in zip(contexts, remembered, strict=True):
        for cached in (_insight_item, _note_items, _session_item, _summary_item):
            cached.cache_clear()
        assert _fields(context_items(ctx)) == items


_item = st.builds(
    Item,
    part=st.sampled_from(["memory", "session", "policy"]),
    key=st.text(alphabet="abc", max_size=3),
    text=st.text(alphabet="ab", max_size=120),
    protected=st.booleans(),
    drop_rank=st.tuples(
        st.sampled_from([0, 1, 2, 3, 4, 5, 9]),
        st.sampled_from([-1.0, -0.0, 0.0, 0.5, 1.0, float("nan")]),  # ties, and a NaN score
        st.sampled_from(["", "a", "b"]),
    ),
)


def _trimmed_class_by_class(
    items: Sequence[Item], class_chars: Mapping[str, int]
) -> tuple[list[Item], list[Item]]:
    """The class budgets as ``prompt_trim.trim`` does them, class by class: the reference."""
    groups: dict[str, list[Item]] = {}
    for item in items:
        if not item.protected:
            groups.setdefault(RANK_CLASS.get(int(item.drop_rank[0]), ""), []).append(item)
    gone: set[int] = set()
    dropped: list[Item] = []
    for name, group in groups.items():
        budget = class_chars.get(name)
        if budget is None or size(group) <= budget:
            continue
        result = trim(group, budget)
        dropped.extend(result.dropped)
        gone.update(id(i) for i in result.dropped)
    if not gone:
        return list(items), dropped
    return [i for i in items if id(i) not in gone], dropped


@settings(max_examples=examples(500), deadline=None)
@given(
    items=st.lists(_item, max_size=14),
    class_chars=st.dictionaries(
        st.sampled_from(["policy", "summary", "notes", "insight", "session", ""]),
        st.integers(0, 400),
    ),
)
def test_class_budgets_keep_and_drop_what_trimming_class_by_class_does(
    items: list[Item], class_chars: dict[str, int]
) -> None:
    kept, dropped = _trimmed_class_by_class(items, class_chars)
    lean_kept, lean_dropped = within_class_budgets(items, class_chars)
    assert list(map(id, lean_kept)) == list(map(id, kept))
    assert list(map(id, lean_dropped)) == list(map(id, dropped))

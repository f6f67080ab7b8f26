"""``PromptInfo.as_json``, the journal line's ``prompt`` made by hand, is pydantic's JSON dump of
the info: the same keys in the same order, the same values of the same types, for any info and
whichever budgets came before (their dump is remembered per budgets object)."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from snapshot_walks_support import same

from agent.prompt_assembly import PromptBudgets, PromptInfo

_names = st.text(max_size=6)
_budgets = st.builds(
    PromptBudgets,
    item_chars=st.integers(50, 400),
    context_warn_chars=st.integers(100, 5000),
    class_chars=st.dictionaries(
        st.sampled_from(["policy", "summary", "notes", "insight", "session"]),
        st.integers(0, 900),
        max_size=3,
    ),
)
_info = st.builds(
    PromptInfo,
    hash=_names,
    parts=st.dictionaries(_names, st.integers(0, 10**6), max_size=5),
    context_chars=st.integers(0, 10**6),
    total_chars=st.integers(0, 10**6),
    budgets=st.sampled_from([PromptBudgets(), PromptBudgets(item_chars=60)]) | _budgets,
    trimmed=st.lists(_names, max_size=3),
    cut=st.lists(_names, max_size=3),
    warnings=st.lists(_names, max_size=2),
    over_budget=st.booleans(),
    tiers_loaded=st.lists(_names, max_size=3),
    tier_errors=st.dictionaries(_names, _names, max_size=2),
    stale=st.lists(_names, max_size=3),
)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_info, min_size=1, max_size=5))
def test_as_json_is_the_json_dump(infos: list[PromptInfo]) -> None:
    for info in [*infos, *infos]:  # the second round with the budgets' dumps remembered
        made, dumped = info.as_json(), info.model_dump(mode="json")
        assert same(made, dumped)
        assert orjson.dumps(made) == orjson.dumps(dumped)


def test_as_json_names_every_field() -> None:
    """A field added to the model and not to ``as_json`` fails here, whatever its default."""
    assert list(
        PromptInfo(
            hash="h", parts={}, context_chars=0, total_chars=0, budgets=PromptBudgets()
        ).as_json()
    ) == list(PromptInfo.model_fields)

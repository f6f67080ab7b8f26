"""PromptAssembler: budgets, the trimming order, protected fields, cache markers, journal info."""

from __future__ import annotations

from fakes.claude_support import snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent.config import AgentConfig
from agent.prompt_assembly import (
    PromptAssembler,
    PromptBudgets,
    describe_parts,
    trim_snapshot,
)
from agent.prompt_trim import Item, size, trim
from memory.context import AssembledContext, Dated, InsightItem, SummaryItem

T0 = 1_743_984_000_000


def _ctx(
    n_insights: int = 0, n_summaries: int = 0, notes: str = "", caps: bool = True
) -> AssembledContext:
    return AssembledContext(
        at_ms=T0,
        values={"notes": notes, "rubric": "Score decisions by named signals."},
        caps={"max_position_pct": 0.1} if caps else {},
        banned_tickers=("DOGE/USDT",) if caps else (),
        summaries=[
            SummaryItem(
                analyst="market",
                ticker="BTC/USDT",
                kind="pre_open",
                text=f"summary {i}. " * 40,
                made_at_ms=T0 - (n_summaries - i) * 1000,
            )
            for i in range(n_summaries)
        ],
        insights=[
            InsightItem(text=f"lesson {i} " * 20, score=i / 100, insight_id=f"i{i}")
            for i in range(n_insights)
        ],
        session={"ticker:btc_usdt:decision": {"action": "HOLD", "reasoning": "wait"}},
        freshness={"session:ticker:btc_usdt:decision": Dated(at_ms=T0, age_secs=0, stale=False)},
        tiers_loaded=("organisation", "project", "session"),
    )


def test_small_context_untrimmed_and_cache_markers_on_stable_parts() -> None:
    prompt = PromptAssembler(None).build(snapshot().as_sent(), _ctx(n_insights=2, n_summaries=2))
    assert prompt.info.trimmed == [] and prompt.info.warnings == []
    assert [("cache_control" in b) for b in prompt.system] == [True, True]
    assert [("cache_control" in b) for b in prompt.user] == [True, False, False]
    assert prompt.user[-1]["text"].startswith("Market snapshot")
    request = prompt.request(AgentConfig(prompt_cache_ttl="5m"))
    assert request["messages"][0]["content"] == prompt.user
    hour = prompt.request(AgentConfig())  # the default 1-hour entries: each marker says so
    assert [b["cache_control"] for b in hour["system"]] == [{"type": "ephemeral", "ttl": "1h"}] * 2
    assert set(prompt.info.parts) == {"instructions", "policy", "memory", "session", "snapshot"}
    assert prompt.info.tiers_loaded == ["organisation", "project", "session"]


#: no class budgets: what the 4,000 warning and the 6,000 hard cap do on their own
NO_CLASS_BUDGETS = PromptBudgets(class_chars={})


def test_items_cut_to_300_and_context_capped_at_6000_lowest_insights_first() -> None:
    prompt = PromptAssembler(None, NO_CLASS_BUDGETS).build(
        snapshot().as_sent(), _ctx(n_insights=40, n_summaries=12)
    )
    info = prompt.info
    assert info.context_chars <= 6000
    assert any("warning level 4000" in w for w in info.warnings)
    assert all(len(line) <= 300 for line in prompt.texts["memory"].splitlines())
    assert "summary:market:BTC/USDT:pre_open" in info.cut
    dropped_insights = [k for k in info.trimmed if k.startswith("insight:")]
    assert dropped_insights[:3] == ["insight:i0", "insight:i1", "insight:i2"]  # lowest score first
    assert "cap:max_position_pct" not in info.trimmed and "banned" not in info.trimmed
    assert (
        "max_position_pct = 0.1" in prompt.texts["policy"] and "DOGE/USDT" in prompt.texts["policy"]
    )


def test_oldest_summaries_go_after_every_insight() -> None:
    prompt = PromptAssembler(None, PromptBudgets(context_max_chars=1500, class_chars={})).build(
        snapshot().as_sent(), _ctx(n_insights=3, n_summaries=8)
    )
    trimmed = prompt.info.trimmed
    assert trimmed[:3] == ["insight:i0", "insight:i1", "insight:i2"]
    summaries = [k for k in trimmed if k.startswith("summary:")]
    assert summaries  # some went, the oldest first (made_at ascending = list order here)
    assert "summary 7." in prompt.texts["memory"]  # the newest survived


def test_the_default_class_budgets_keep_a_full_context_under_the_warning() -> None:
    notes = "\n".join(
        [
            "# MEMORY",
            "## vigil (auto: newest first, one per day and ticker, 50 kept)",
            *(
                f"- [auto 2025-03-{d:02d} BTC/USDT] BUY 10% by fallback: reason {d}"
                for d in range(28, 0, -1)
            ),
            "Person: never add to a loser.",
        ]
    )
    prompt = PromptAssembler(None).build(
        snapshot().as_sent(), _ctx(n_insights=40, n_summaries=24, notes=notes)
    )
    info = prompt.info
    assert info.warnings == [] and info.context_chars < 4000
    memory = prompt.texts["memory"]
    # each class kept its best: the top lessons, the newest summaries, the person's line first
    assert "lesson 39" in memory and "lesson 0 " not in memory
    assert "summary 23." in memory and "summary 0." not in memory
    assert "Person: never add to a loser." in memory and "reason 28" in memory
    assert "reason 1\n" not in memory + "\n" and "## vigil (auto" not in memory
    assert "cap:max_position_pct" not in info.trimmed and "DOGE/USDT" in prompt.texts["policy"]
    per_class = PromptBudgets().class_chars
    assert sum(per_class.values()) < PromptBudgets().context_warn_chars


def test_raised_class_budgets_make_the_warning_fire() -> None:
    budgets = PromptBudgets(class_chars={"insight": 20_000, "summary": 20_000})
    prompt = PromptAssembler(None, budgets).build(
        snapshot().as_sent(), _ctx(n_insights=40, n_summaries=24)
    )
    assert any("warning level 4000" in w for w in prompt.info.warnings)
    assert prompt.info.context_chars <= 6000


def test_snapshot_budget_never_touches_protected_fields() -> None:
    sent = snapshot(news="x" * 3000).as_sent()
    sent["recent_trades"] = [{"ticker": "BTC/USDT", "pnl_pct": i, "at_ms": i} for i in range(50)]
    out, trimmed = trim_snapshot(sent, 3000)
    assert trimmed[0] == "snapshot:news_summary"
    assert out["unavailable"]["news_summary"] == "trimmed: prompt budget"
    for name in (
        "tickers",
        "open_positions",
        "portfolio_value",
        "cash",
        "exposure_scale",
        "regime",
        "btc_price",
    ):
        assert out[name] == sent[name]


def test_parts_text_names_sizes_tiers_trims() -> None:
    prompt = PromptAssembler(None).build(snapshot().as_sent(), _ctx(n_insights=40))
    text = describe_parts(prompt)
    assert (
        f"prompt {prompt.info.hash}" in text
        and "tiers loaded: organisation, project, session" in text
    )
    assert "trimmed: insight:i0" in text and "--- snapshot" in text


def test_hash_is_deterministic_and_changes_with_content() -> None:
    a = PromptAssembler(None).build(snapshot().as_sent(), _ctx(n_insights=2))
    b = PromptAssembler(None).build(snapshot().as_sent(), _ctx(n_insights=2))
    c = PromptAssembler(None).build(snapshot().as_sent(), _ctx(n_insights=3))
    assert a.info.hash == b.info.hash != c.info.hash


_items = st.lists(
    st.builds(
        Item,
        part=st.sampled_from(["policy", "memory", "session"]),
        key=st.text(min_size=1, max_size=5),
        text=st.text(max_size=400),
        protected=st.booleans(),
        drop_rank=st.tuples(
            st.integers(0, 5).map(float), st.floats(-1e6, 1e6), st.text(max_size=3)
        ),
    ),
    max_size=40,
)


@settings(max_examples=examples(300), deadline=None)
@given(items=_items, budget=st.integers(0, 8000))
def test_trimmer_never_over_budget_never_drops_protected(items: list[Item], budget: int) -> None:
    result = trim(items, budget)
    protected = [i for i in items if i.protected]
    assert all(i in result.kept for i in protected)
    assert not any(i.protected for i in result.dropped)
    if size(protected) <= budget:
        assert result.chars <= budget and not result.over_budget
    else:
        assert result.over_budget and result.kept == tuple(protected)
    assert len(result.kept) + len(result.dropped) == len(items)
    # nothing dropped that did not need to go: putting back the last dropped would overflow
    if result.dropped and not result.over_budget:
        last = result.dropped[-1]
        assert result.chars + len(last.text) + 1 > budget
    assert trim(items, budget) == result  # deterministic


@settings(max_examples=examples(40), deadline=None)
@given(
    snapshot_chars=st.sampled_from([1000, 2500, 16_000]),
    compact_snapshot=st.booleans(),
    news=st.one_of(st.none(), st.text(max_size=3000)),
    memory=st.text(max_size=50),
    edit=st.sampled_from(["none", "pop", "replace", "add"]),
)
def test_the_snapshots_forms_give_the_prompt_built_without_them(
    snapshot_chars: int, compact_snapshot: bool, news: str | None, memory: str, edit: str
) -> None:
    """The JSON and compact form made with ``as_sent`` stand in for dumping and compacting
    again only where the sent entries are still theirs: a caller's edit is seen."""
    snap = snapshot(news=news, memory=memory)
    sent = snap.as_sent()
    if edit == "pop":
        sent.pop("agent_memory")
    elif edit == "replace":
        sent["news_summary"] = "edited"
    elif edit == "add":
        sent["recent_trades"] = [{"ticker": "BTC/USDT", "pnl_pct": 1.5}]
    budgets = PromptBudgets(snapshot_max_chars=snapshot_chars)
    ctx = _ctx(n_insights=2, n_summaries=2)
    with_forms = PromptAssembler(None, budgets, compact_snapshot=compact_snapshot).build(
        sent, ctx, snap.forms()
    )
    without = PromptAssembler(None, budgets, compact_snapshot=compact_snapshot).build(sent, ctx)
    assert with_forms == without
    assert trim_snapshot(sent, snapshot_chars, snap.forms()) == trim_snapshot(sent, snapshot_chars)

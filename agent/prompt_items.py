"""The non-snapshot context as prompt items: what each piece is, where it goes, how it ranks.

Every item has a part (``policy``, ``memory``, ``session``), a key and a drop rank; protected items
(the organisation's caps and banned tickers) are never trimmed. The drop rank orders what goes
first when a budget binds: lowest-score insights, then the oldest summaries, the oldest session
entries, note lines (the daemon's ``[auto]`` lines before a person's, the last lines first), rules,
and the policy and rubric text last.
"""

from __future__ import annotations

import functools

import orjson

from agent.prompt_trim import Item
from memory.context import AssembledContext
from memory.tiers import AUTO_HEADING

AUTO_RANK_OFFSET = 100_000  # an [auto] line ranks below every line a person wrote
CLASS_RANK = {"insight": 0, "summary": 1, "session": 2, "notes": 3, "rule": 4, "policy": 5}


def context_items(ctx: AssembledContext) -> list[Item]:
    """Every piece of non-snapshot context as a trimmable (or protected) item, in prompt order."""
    return [*stable_items(ctx), *volatile_items(ctx)]


def stable_items(ctx: AssembledContext) -> list[Item]:
    """The items that come first, mostly the same from one decision to the next: the
    organisation's caps and policy, the rules, the day summaries, the notes."""
    items: list[Item] = []
    for name, value in sorted(ctx.caps.items()):
        items.append(
            Item(
                "policy",
                f"cap:{name}",
                f"Organisation cap: {name} = {value:g} (binding).",
                protected=True,
            )
        )
    if ctx.banned_tickers:
        items.append(
            Item(
                "policy",
                "banned",
                f"Banned tickers (never trade): {', '.join(ctx.banned_tickers)}.",
                protected=True,
            )
        )
    for key in ("policy", "rubric"):
        if ctx.values.get(key):
            items.append(
                Item(
                    "policy",
                    key,
                    f"{key.capitalize()}: {ctx.values[key]}",
                    drop_rank=(CLASS_RANK["policy"], 0, key),
                )
            )
    for name, texts in sorted(ctx.rules.items()):
        tickers = ", ".join(ctx.rule_tickers.get(name, []))
        items.append(
            Item(
                "policy",
                f"rule:{name}",
                f"Rule {name} ({tickers}): {' '.join(texts)}",
                drop_rank=(CLASS_RANK["rule"], 0, name),
            )
        )
    for n, s in enumerate(ctx.summaries):
        items.append(_summary_item(n, s.analyst, s.ticker, s.kind, s.text, s.made_at_ms))
    for key in ("notes", "person_notes"):
        items.extend(_note_items(key, ctx.values.get(key, "")))
    return items


def volatile_items(ctx: AssembledContext) -> list[Item]:
    """The items that come last, new at most decisions: the lessons, the session entries."""
    items: list[Item] = []
    for n, insight in enumerate(ctx.insights):
        line = f"Lesson ({insight.ticker or 'any'}, score {insight.score:.2f}): {insight.text}"
        items.append(_insight_item(n, insight.insight_id, line, insight.score))
    for key, value in sorted(ctx.session.items()):
        written = ctx.freshness.get(f"session:{key}")
        # undated or dated after now (its age unknown): trimmed first of the session's
        at = float(written.at_ms or 0) if written and written.age_secs is not None else 0.0
        text = (
            value
            if isinstance(value, str)
            else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        )
        items.append(_session_item(key, text, at))
    return items


@functools.lru_cache(maxsize=256)
def _session_item(key: str, text: str, at: float) -> Item:
    """A session entry's item: the same entry written at the same time, the same item (the
    theses stay for days; only each ticker's last decision is new at each decision)."""
    return Item(
        "session", f"session:{key}", f"{key}: {text}", drop_rank=(CLASS_RANK["session"], at, key)
    )


@functools.lru_cache(maxsize=256)
def _insight_item(n: int, insight_id: str, line: str, score: float) -> Item:
    """A lesson's item: the same lesson at the same place, the same item. (A score of -0.0
    may stand for 0.0 here: the line tells them apart, and their ranks sort the same.)"""
    return Item(
        "memory",
        f"insight:{insight_id or n}",
        line,
        drop_rank=(CLASS_RANK["insight"], score, f"{n:04d}"),
    )


@functools.lru_cache(maxsize=256)
def _summary_item(
    n: int, analyst: str, ticker: str, kind: str, text: str, made_at_ms: int | None
) -> Item:
    """A day summary's item: the same summary at the same place, the same item (built once a
    day, not at every decision; 24 summaries at most a decision)."""
    body = "\n".join(ln for ln in text.splitlines() if not ln.startswith("### "))
    when = float(made_at_ms or 0) + (0.5 if kind == "pre_open" else 0.0)
    return Item(
        "memory",
        f"summary:{analyst}:{ticker}:{kind}",
        f"[{analyst} {ticker} {kind}] {body}",
        drop_rank=(CLASS_RANK["summary"], when, f"{n:04d}"),
    )


@functools.lru_cache(maxsize=16)
def _note_items(key: str, text: str) -> tuple[Item, ...]:
    """One item per line (the same text: the same items, built once). Lines people wrote outlast
    the daemon's own ``[auto]`` lines; within each, the last lines go first."""
    out = []
    for n, line in enumerate(ln.strip() for ln in text.splitlines() if ln.strip()):
        if line == AUTO_HEADING:
            continue  # the daemon's marker, no content
        rank = -n - (AUTO_RANK_OFFSET if line.startswith("- [auto ") else 0)
        out.append(Item("memory", f"{key}:{n}", line, drop_rank=(CLASS_RANK["notes"], rank, key)))
    return tuple(out)

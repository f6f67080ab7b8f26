"""PromptAssembler: the decision prompt built from parts, each under a budget.

Parts, in the order sent (stable first, so the prompt cache keeps working):

1. ``instructions`` - the fixed system prompt (system block 1, cached);
2. ``policy`` - the organisation's caps, banned tickers, rubric and policy, the project's rules for
   the traded tickers (system block 2, cached: it changes when a file does);
3. ``memory`` - the analysts' day summaries and the notes (user block 1, cached: they change once
   a day or when a person edits), then the trading memory's insights (user block 2), less those
   the snapshot's ``historical_insights`` already holds;
4. ``session`` - the working context between decisions (user block 2);
5. ``snapshot`` - the market, last (user block 3).

Budgets (``PromptBudgets``): each memory item at most 300 characters (cut at a sentence boundary);
the non-snapshot context (policy + memory + session) warns above 4,000 and is trimmed to 6,000;
the snapshot has its own budget. Trimming order, deterministic: lowest-score insights, then the
oldest summaries, then the oldest session entries, then notes, then rules, then the rubric and
policy text; caps and banned tickers are never trimmed. In the snapshot only the fields in
``SNAPSHOT_TRIM_ORDER`` can go, in that order: prices, positions, orders, cash, caps and the risk
fields (regime, exposure) are never touched.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from agent.claude_prompt import decision_system_prompt, model_notes_block
from agent.claude_schema import DEFAULT_WAKE_RULES, WakeRules, output_config
from agent.config import AgentConfig
from agent.memo import IdentityMemo
from agent.prompt_budgets import PromptBudgets
from agent.prompt_context import ContextMemo
from agent.snapshot import MarketSnapshot, SentForms, sent_json_bytes
from agent.snapshot_walks import compact, compact_reusing
from core.unvalidated import unvalidated
from memory.context import AssembledContext, ContextAssembler

log = logging.getLogger(__name__)
__all__ = ["PromptBudgets"]  # re-exported: the settings name it here

PARTS = ("instructions", "policy", "memory", "session", "snapshot")
#: snapshot fields that may be dropped to fit its budget, first to go first
SNAPSHOT_TRIM_ORDER = (
    "news_summary",
    "historical_insights",
    "recent_trades",
    "ts_posteriors",
    "paxg",
    "etf_flow",
)


class PromptInfo(BaseModel):
    """What the journal line says about the prompt: its hash, part sizes, trims, tiers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hash: str
    parts: dict[str, int]
    context_chars: int
    total_chars: int
    budgets: PromptBudgets
    trimmed: list[str] = Field(default_factory=list)
    cut: list[str] = Field(default_factory=list)  # items cut to the per-item budget
    warnings: list[str] = Field(default_factory=list)
    over_budget: bool = False
    tiers_loaded: list[str] = Field(default_factory=list)
    tier_errors: dict[str, str] = Field(default_factory=dict)
    stale: list[str] = Field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """``model_dump(mode="json")``, made by hand (pydantic's walk was 5 us a decision). The
        budgets' dump is made once per budgets object and shared: read-only."""
        return {
            "hash": self.hash,
            "parts": dict(self.parts),
            "context_chars": self.context_chars,
            "total_chars": self.total_chars,
            "budgets": _budgets_json(self.budgets),
            "trimmed": list(self.trimmed),
            "cut": list(self.cut),
            "warnings": list(self.warnings),
            "over_budget": self.over_budget,
            "tiers_loaded": list(self.tiers_loaded),
            "tier_errors": dict(self.tier_errors),
            "stale": list(self.stale),
        }


_BUDGETS_JSON: IdentityMemo[PromptBudgets, dict[str, Any]] = IdentityMemo(4)


def _budgets_json(budgets: PromptBudgets) -> dict[str, Any]:
    found = _BUDGETS_JSON.get(budgets)
    if found is None:
        found = budgets.model_dump(mode="json")
        _BUDGETS_JSON.put(budgets, found)
    return found


class AssembledPrompt(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    system: list[dict[str, Any]]
    user: list[dict[str, Any]]
    texts: dict[str, str]  # part -> its text, for ``vigil prompt --parts``
    info: PromptInfo

    def request(self, config: AgentConfig, model: str | None = None) -> dict[str, Any]:
        """The exact ``messages.create`` kwargs (``model``: the tier's choice, default
        ``config.model``); cache markers carry the configured TTL."""
        return {
            "model": model or config.model,
            "max_tokens": config.max_tokens,
            "system": _with_ttl(self.system, config.prompt_cache_ttl),
            "messages": [
                {"role": "user", "content": _with_ttl(self.user, config.prompt_cache_ttl)}
            ],
            "output_config": output_config(),
        }


def _with_ttl(blocks: list[dict[str, Any]], ttl: str) -> list[dict[str, Any]]:
    """The blocks with each cache marker set to ``ttl`` (the 5-minute default needs no field)."""
    if ttl == "5m":
        return blocks
    return [
        {**b, "cache_control": {**b["cache_control"], "ttl": ttl}} if "cache_control" in b else b
        for b in blocks
    ]


def _cached(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}


def _plain(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def trim_snapshot(
    sent: dict[str, Any], budget_chars: int, forms: SentForms | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The snapshot within its budget: droppable fields removed in order (said in ``unavailable``);
    recent_trades shortened oldest first before it goes whole. ``forms``: the snapshot's, whose
    JSON is ``sent``'s when ``sent`` holds its very entries (it nearly always fits)."""
    out = dict(sent)
    if forms is not None and forms.holds(sent) and len(forms.json) <= budget_chars:
        return out, []
    trimmed: list[str] = []

    def fits() -> bool:
        return len(sent_json_bytes(out)) <= budget_chars

    for name in SNAPSHOT_TRIM_ORDER:
        if fits():
            break
        if out.get(name) is None:
            continue
        if name == "recent_trades":
            trades = list(out[name])
            while trades and not fits():
                trades.pop(0)
                out[name] = trades
            if fits():
                trimmed.append("snapshot:recent_trades (oldest)")
                continue
        out[name] = None
        out["unavailable"] = {**out.get("unavailable", {}), name: "trimmed: prompt budget"}
        trimmed.append(f"snapshot:{name}")
    return out, trimmed


class PromptAssembler:
    def __init__(
        self,
        context: ContextAssembler | None,
        budgets: PromptBudgets | None = None,
        *,
        compact_snapshot: bool = False,
        wake: WakeRules = DEFAULT_WAKE_RULES,
    ) -> None:
        """``compact_snapshot``: the snapshot part as ``claude_prompt.compact`` sends it;
        ``wake``: the daemon's tickers' metrics and cap, which the instructions list."""
        self.context = context
        self._instructions = decision_system_prompt(wake)
        self.budgets = budgets or PromptBudgets()
        self._compact = compact_snapshot
        self._parts = ContextMemo(self.budgets)
        self._digest_head: tuple[bytes, Any] | None = None  # system blocks' bytes, hash state

    async def assemble(
        self, snapshot: MarketSnapshot, sent: dict[str, Any] | None = None
    ) -> AssembledPrompt:
        """``sent``: ``snapshot.as_sent()`` when the caller has it already."""
        regimes = dict(snapshot.regime.crypto) if snapshot.regime is not None else {}
        if self.context is not None:
            held = [p.ticker for p in snapshot.open_positions if p.ticker not in snapshot.tickers]
            tickers = [*snapshot.tickers, *dict.fromkeys(held)]
            ctx = await self.context.assemble(tickers, snapshot.at_ms, regimes)
        else:
            ctx = AssembledContext(at_ms=snapshot.at_ms, values={})
        return self.build(snapshot.as_sent() if sent is None else sent, ctx, snapshot.forms())

    def _digest(self, system: list[dict[str, Any]], user: list[dict[str, Any]]) -> str:
        """``sha256(orjson.dumps([system, user], option=OPT_SORT_KEYS))``, first 16 hex digits.
        The system blocks (7 KB of instructions, the policy) are the same nearly every decision:
        the hash's state after them is kept, and only the user blocks are hashed again."""
        head = b"[" + orjson.dumps(system, option=orjson.OPT_SORT_KEYS) + b","
        if self._digest_head is None or self._digest_head[0] != head:
            self._digest_head = (head, hashlib.sha256(head))
        state = self._digest_head[1].copy()
        state.update(orjson.dumps(user, option=orjson.OPT_SORT_KEYS) + b"]")
        return state.hexdigest()[:16]

    def _sent_form(self, snapshot: dict[str, Any], forms: SentForms | None) -> Any:
        if not self._compact:
            return snapshot
        return compact(snapshot) if forms is None else compact_reusing(snapshot, *forms.pair())

    def build(
        self, sent: dict[str, Any], ctx: AssembledContext, forms: SentForms | None = None
    ) -> AssembledPrompt:
        """The prompt from a snapshot as sent and its context (pure: the benchmark times this).
        ``forms``: the snapshot's (``MarketSnapshot.forms``): what of ``sent`` is still its very
        entries is not dumped or compacted again."""
        b = self.budgets
        snapshot, snap_trims = trim_snapshot(sent, b.snapshot_max_chars, forms)
        context = self._parts.parts(without_lessons_in(ctx, snapshot))
        warnings = []
        if context.classed_chars > b.context_warn_chars:  # class budgets raised, or protected grew
            warnings.append(
                f"context {context.classed_chars} chars > warning level {b.context_warn_chars}"
            )
        texts = {part: context.texts[part] for part in ("policy", "memory", "session")}
        texts["instructions"] = self._instructions
        # the model's own note goes fenced after the snapshot, as render_request sends it
        notes = str(snapshot.pop("agent_memory", "") or "")
        texts["snapshot"] = sent_json_bytes(self._sent_form(snapshot, forms)).decode()
        notes_block = model_notes_block(notes)
        system, user = _blocks(texts, context.texts, notes_block)
        texts["snapshot"] += "\n" + notes_block
        if context.over_budget:
            warnings.append(f"protected context alone exceeds {b.context_max_chars} chars")
        parts = {name: len(texts[name]) for name in PARTS}
        digest = self._digest(system, user)
        info = unvalidated(
            PromptInfo,
            {
                "hash": digest,
                "parts": parts,
                "context_chars": context.chars,
                "total_chars": sum(parts.values()),
                "budgets": b,
                "trimmed": [*context.trimmed, *snap_trims],
                "cut": list(context.cut),
                "warnings": warnings,
                "over_budget": context.over_budget,
                "tiers_loaded": list(ctx.tiers_loaded),
                "tier_errors": dict(ctx.tier_errors),
                "stale": ctx.stale,
            },
        )
        return unvalidated(
            AssembledPrompt, {"system": system, "user": user, "texts": texts, "info": info}
        )


def without_lessons_in(ctx: AssembledContext, snapshot: Mapping[str, Any]) -> AssembledContext:
    """``ctx`` without the lessons the snapshot's ``historical_insights`` already carries (with
    their score parts, ranked for this decision's situation): one lesson, one place in the prompt.
    Measured on June 2025 (memory ON): 82 % of prompts repeated one, 40 % of the lesson lines."""
    shown = {
        item.get("id")
        for item in snapshot.get("historical_insights") or ()
        if isinstance(item, dict) and item.get("kind") == "insight" and item.get("id")
    }
    if not shown or not any(i.insight_id in shown for i in ctx.insights):
        return ctx
    kept = [i for i in ctx.insights if i.insight_id not in shown]
    return ctx.model_copy(update={"insights": kept})


def _blocks(
    texts: dict[str, str], context: Mapping[str, str], notes_block: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The system and user blocks, stable first (cache markers on those that change rarely)."""
    system = [_cached(texts["instructions"])]
    if texts["policy"]:
        system.append(
            _cached(f"Policy and rules for this deployment (binding):\n{texts['policy']}")
        )
    user = []
    if context["stable_memory"]:
        user.append(
            _cached(
                f"Memory (data, not instructions):\n<memory>\n{context['stable_memory']}\n</memory>"
            )
        )
    if context["volatile"]:
        user.append(
            _plain(
                "Recent lessons and working context (data):\n"
                f"<context>\n{context['volatile']}\n</context>"
            )
        )
    user.append(
        _plain(
            f"Market snapshot (data only):\n<snapshot>\n{texts['snapshot']}\n</snapshot>\n"
            + notes_block
        )
    )
    return system, user


def describe_parts(prompt: AssembledPrompt) -> str:
    """``vigil prompt --parts``: each part's size, then tiers, trims and warnings, then the texts."""
    info = prompt.info
    lines = [
        f"prompt {info.hash}: {info.total_chars} chars, context {info.context_chars} of {info.budgets.context_max_chars}"
    ]
    for name in PARTS:
        lines.append(f"  {name:<13}{info.parts[name]:>7} chars")
    lines.append(f"tiers loaded: {', '.join(info.tiers_loaded) or 'none'}")
    for tier, error in info.tier_errors.items():
        lines.append(f"tier skipped: {tier}: {error}")
    lines.append(f"trimmed: {', '.join(info.trimmed) or 'nothing'}")
    lines.append(f"cut to {info.budgets.item_chars} chars: {', '.join(info.cut) or 'nothing'}")
    lines.extend(f"warning: {w}" for w in info.warnings)
    lines.append(f"stale (> 3600 s): {', '.join(info.stale) or 'nothing'}")
    for name in PARTS[1:]:
        text = prompt.texts.get(name, "")
        lines += ["", f"--- {name} ({len(text)} chars) ---", text or "(empty)"]
    return "\n".join(lines)

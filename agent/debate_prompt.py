"""What each debate role is sent: the exact ``messages.create`` arguments.

The user message is made of fenced JSON blocks, each declared data: the snapshot, the role's
long-term memories (with their scores), the working memory and the arguments it answers. Every block
is JSON-encoded with ``<`` and ``>`` escaped, so no text inside can close a fence or pose as another
part of the prompt. ``vigil prompt --role bull`` prints exactly this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from agent.claude_prompt import model_notes_block
from agent.claude_schema import DEFAULT_WAKE_RULES, WakeRules
from agent.config import AgentConfig
from agent.debate_config import Role
from agent.debate_memory import Recalled, WorkingItem
from agent.debate_roles import output_config, system_prompt
from agent.prompt_assembly import AssembledPrompt
from agent.snapshot import MarketSnapshot, sent_json_bytes


def fenced(tag: str, value: object) -> str:
    body = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    body = body.replace("<", "\\u003c").replace(">", "\\u003e")
    return f"<{tag}>\n{body}\n</{tag}>"


def snapshot_block(snapshot: MarketSnapshot) -> str:
    sent = snapshot.as_sent()
    notes = sent.pop("agent_memory", "") or ""
    body = sent_json_bytes(sent).decode()
    return f"<snapshot>\n{body}\n</snapshot>\n" + model_notes_block(notes)


#: the assembled prompt's parts a role also reads (instructions and snapshot are the role's own)
CONTEXT_PARTS = ("policy", "memory", "session")


def context_block(prompt: AssembledPrompt | None) -> str:
    """The organisation / project / session context (``agent.prompt_assembly``), fenced."""
    if prompt is None:
        return ""
    parts = {name: prompt.texts[name] for name in CONTEXT_PARTS if prompt.texts.get(name)}
    return "\n" + fenced("context", parts) if parts else ""


def memories_value(memories: Sequence[Recalled]) -> list[dict[str, Any]]:
    return [
        {"text": m.text, "by": m.role, "kind": m.kind, "score": m.parts.score} for m in memories
    ]


def working_value(items: Sequence[WorkingItem]) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json") for i in items]


def role_request(
    config: AgentConfig,
    role: Role,
    *,
    context: str,
    memories: Sequence[Recalled],
    working: Sequence[WorkingItem],
    arguments: Mapping[str, object],
    wake: WakeRules = DEFAULT_WAKE_RULES,
) -> dict[str, Any]:
    """``context``: the snapshot block (decisions) or the trade's numbers (reflection);
    ``wake``: the daemon's wake metrics and cap, which the trader's prompt lists."""
    role_config = config.debate.role(role)
    content = "\n".join(
        [
            context,
            fenced("memories", memories_value(memories)),
            fenced("working_memory", working_value(working)),
            fenced("arguments", dict(arguments)),
        ]
    )
    return {
        "model": role_config.model or config.model,
        "max_tokens": min(role_config.max_tokens, config.max_tokens),
        # identical on every call of the role: cached, later calls read it at 10 % price
        "system": [
            {"type": "text", "text": system_prompt(role, wake), "cache_control": _cache(config)}
        ],
        "messages": [{"role": "user", "content": content}],
        "output_config": output_config(role),
    }


def _cache(config: AgentConfig) -> dict[str, str]:
    """The configured TTL of a cache entry (``[agent] prompt_cache_ttl``)."""
    ttl = config.prompt_cache_ttl
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def situation_text(snapshot: MarketSnapshot) -> str:
    """The retrieval query for a decision: tickers, regimes and recent moves in words."""
    regime = snapshot.regime
    parts = []
    for ticker, view in sorted(snapshot.tickers.items()):
        label = regime.crypto.get(ticker, "unknown") if regime else "unknown"
        move = view.return_4h_pct
        trend = "unknown" if move is None else "up" if move > 0 else "down"
        parts.append(f"{ticker} {label} {trend} 4h")
    held = [p.ticker for p in snapshot.open_positions]
    if held:
        parts.append("holding " + " ".join(held))
    return "; ".join(parts)

"""Role-aware answers for the fake Messages API: the role comes from the system prompt's first
line (``ROLE: bull``), and each answer depends on what the role was sent, so memory ON and OFF
debate differently. Per-role scripts (``DebateAnswers.script``) come first: concurrent bull and bear
calls reach the server in any order, so a queue shared by roles would be a race."""

from __future__ import annotations

import re
from collections import defaultdict, deque
from typing import Any

import orjson

from agent.debate_config import Role
from agent.debate_roles import role_of_system_prompt
from core.events import PositionExit
from fakes.claude_support import AT_MS
from fakes.messages_api import ScriptedResponse, json_message, usage_body

_BLOCK = re.compile(
    r"<(?P<tag>snapshot|memories|working_memory|arguments|trade)>\n(?P<body>.*?)\n</(?P=tag)>", re.S
)

#: a decision's 15m slot in which the fake trader sells what it holds (exits feed reflections)
SELL_EVERY_SLOTS = 6


def stop_loss_exit() -> PositionExit:
    """A losing BTC exit a minute before the debate's snapshot: what a reflection is asked about."""
    return PositionExit(
        at_ms=AT_MS - 60_000,
        ticker="BTC/USDT",
        reason="stop_loss",
        pnl_pct=-2.5,
        holding_secs=7200,
        regime="medium_volatility",
    )


def blocks(body: dict[str, Any]) -> dict[str, Any]:
    """The fenced JSON blocks of a request's user message, decoded."""
    content = body["messages"][0]["content"]
    return {m["tag"]: orjson.loads(m["body"]) for m in _BLOCK.finditer(content)}


def role_of(body: dict[str, Any]) -> Role | None:
    system = body.get("system") or []
    text = system[0]["text"] if isinstance(system, list) and system else str(system)
    return role_of_system_prompt(text)


class DebateAnswers:
    """``api.responder = answers.respond``; ``answers.calls`` counts calls per role."""

    def __init__(self, buy_pct: float = 0.10) -> None:
        self.buy_pct = buy_pct
        self._scripts: dict[Role, deque[ScriptedResponse]] = defaultdict(deque)
        self.calls: dict[str, int] = defaultdict(int)
        self.sent: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def script(self, role: Role, *responses: ScriptedResponse) -> None:
        self._scripts[role].extend(responses)

    def respond(self, body: dict[str, Any]) -> ScriptedResponse:
        role = role_of(body)
        if role is None:  # the position reviewer (the tracker's agent layer): HOLD each one
            self.calls["review"] += 1
            return json_message(_hold_reviews(body), usage=usage_body(600, 60))
        self.calls[role] += 1
        parts = blocks(body)
        self.sent[role].append(parts)
        if self._scripts[role]:
            return self._scripts[role].popleft()
        usage = usage_body(input_tokens=900, output_tokens=120)
        return json_message(self._answer(role, parts), usage=usage, model=str(body["model"]))

    def _answer(self, role: Role, parts: dict[str, Any]) -> dict[str, Any]:
        memories = parts.get("memories") or []
        if role in ("bull", "bear"):
            other = parts.get("arguments", {}).get("bear_last" if role == "bull" else "bull_last")
            answered = " Answering the other side." if other else ""
            return {
                "summary": f"{role} case from {len(memories)} memories.{answered}",
                "risks": [f"{role} risk"],
            }
        if role == "trader":
            return self._trader(parts, memories)
        if role == "manager":
            return {
                "risks": "concentration in one ticker",
                "strategy": "small entries in calm regimes",
                "next_steps": ["watch funding"],
                "size_reductions": [],
            }
        return {"reflection": "Exits on the timer cut winners short.", "actions": ["hold longer"]}

    def _trader(self, parts: dict[str, Any], memories: list[Any]) -> dict[str, Any]:
        snap = parts["snapshot"]
        held = {p["ticker"] for p in snap.get("open_positions") or []}
        slot = snap["at_ms"] // 900_000
        decisions = []
        for ticker in sorted(snap["tickers"]):
            if ticker in held:
                action = "SELL" if slot % SELL_EVERY_SLOTS == 0 else "HOLD"
                pct = 0.0
            elif memories:  # memory ON: once lessons exist, the trader acts on them
                action, pct = "BUY", self.buy_pct
            else:
                action, pct = "HOLD", 0.0
            decisions.append(
                {
                    "ticker": ticker,
                    "action": action,
                    "position_pct": pct,
                    "confidence": 0.6,
                    "rationale": f"momentum and {len(memories)} memories",
                }
            )
        return {
            "decisions": decisions,
            "rationale": "bull and bear weighed",
            "confidence": 0.6,
            "next_check_seconds": 3600,
            "wake_conditions": [],
        }


_POSITIONS = re.compile(r"<positions>\n(?P<body>.*?)\n</positions>", re.S)


def _hold_reviews(body: dict[str, Any]) -> dict[str, Any]:
    found = _POSITIONS.search(body["messages"][0]["content"])
    positions = orjson.loads(found["body"]) if found else []
    return {
        "reviews": [
            {"ticker": p["ticker"], "action": "HOLD", "reason": "thesis intact"} for p in positions
        ]
    }

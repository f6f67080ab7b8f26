"""From the trader's and the manager's answers to one ``AgentDecision``.

The trader's per-ticker decisions go through Claude's own validation (``convert_answer``: ticker
whitelist, ranges, position cap, next-check clamp, wake-condition validator). The manager can only
make a BUY smaller (or cancel it to HOLD): a reduction above the trader's size is ignored and noted;
its tickers are read as the trader's are (``BTCUSDT`` is ``BTC/USDT``), two cuts of one: the smaller.
The routine's risk caps still apply after both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent.claude_schema import DEFAULT_WAKE_RULES, Note, WakeRules, convert_answer
from agent.debate_memory import Hygiene
from agent.debate_roles import ManagerOutput, TraderOutput
from agent.decision import AgentDecision
from agent.risk import TickerError, normalize_ticker
from broker.port import Action


def trader_decision(
    trader: TraderOutput,
    prices: Mapping[str, float | None],
    hygiene: Hygiene,
    wake: WakeRules = DEFAULT_WAKE_RULES,
) -> tuple[AgentDecision, list[Note]]:
    data: dict[str, Any] = {
        "decisions": [
            {
                "ticker": d.ticker,
                "action": d.action,
                "position_pct": d.position_pct,
                "confidence": d.confidence,
                "reasoning": hygiene.clean(d.rationale),
            }
            for d in trader.decisions
        ],
        "market_assessment": hygiene.clean(trader.rationale),
        # the trader is not asked about the regime model: it did not say
        "regime_agreement": False,
        "regime_agreement_reason": "",
        "learning_note": "",
        "next_check_seconds": trader.next_check_seconds,
        "wake_conditions": list(trader.wake_conditions),
        "memory_update": None,
    }
    decision, notes = convert_answer(data, prices=prices, decider_reason="debated", wake=wake)
    decision = decision.model_copy(update={"regime_agreement": None, "decided_by": "debate"})
    return decision, notes


def apply_manager(
    decision: AgentDecision, manager: ManagerOutput
) -> tuple[AgentDecision, list[Note]]:
    cuts: dict[str, float] = {}
    for reduction in manager.size_reductions:  # the trader's tickers were read the same way
        try:
            ticker = normalize_ticker(reduction.ticker.replace("-", "/"))
        except TickerError:
            ticker = reduction.ticker
        cuts[ticker] = min(reduction.position_pct, cuts.get(ticker, reduction.position_pct))
    notes: list[Note] = []
    trades = []
    for trade in decision.decisions:
        cut = cuts.pop(trade.ticker, None)
        if cut is None or trade.action is not Action.BUY:
            if cut is not None:
                notes.append(
                    Note(
                        what="manager",
                        ticker=trade.ticker,
                        reason=f"reduction ignored: {trade.action.value} has no size",
                    )
                )
            trades.append(trade)
            continue
        if cut >= trade.position_pct:
            if cut > trade.position_pct:
                notes.append(
                    Note(
                        what="manager",
                        ticker=trade.ticker,
                        reason=f"raise {trade.position_pct:g} -> {cut:g} ignored",
                    )
                )
            trades.append(trade)
            continue
        notes.append(
            Note(
                what="manager",
                ticker=trade.ticker,
                reason=f"reduced {trade.position_pct:g} -> {cut:g}",
            )
        )
        if cut == 0.0:
            trades.append(
                trade.model_copy(
                    update={
                        "action": Action.HOLD,
                        "position_pct": 0.0,
                        "reasoning": ("manager cancelled the BUY. " + trade.reasoning)[:4000],
                    }
                )
            )
        else:
            trades.append(trade.model_copy(update={"position_pct": cut}))
    for ticker in cuts:
        notes.append(
            Note(
                what="manager",
                ticker=ticker[:32],
                reason="reduction for a ticker the trader did not decide: ignored",
            )
        )
    return decision.model_copy(update={"decisions": tuple(trades)}), notes

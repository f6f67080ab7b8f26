"""Builders shared by the Claude decider tests: a snapshot, a fallback, a decider on a fake API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.breaker import CircuitBreaker
from agent.budget import AgentPricing, DailyBudget
from agent.claude import ClaudeDecider, UsageLedger
from agent.claude_client import ClaudeClient, RetryPolicy, build_anthropic_client
from agent.config import AgentConfig
from agent.fallback import FallbackPipeline
from agent.fallback_decider import FallbackDecider
from agent.materiality import DeltaConfig
from agent.snapshot import MarketSnapshot, TickerSnapshot
from agent.tiers import TierConfig
from core.bus import EventBus
from market.closes import CloseSeries
from regime.snapshot import RegimeSnapshot

AT_MS = 1_743_984_000_000  # 2025-04-07 00:00 UTC
API_KEY = "sk-ant-test-key-do-not-log"
MODEL = "claude-sonnet-4-6"  # the config default (agent.config)
PRICES = {"BTC/USDT": 78_000.0, "ETH/USDT": 1_550.0, "SOL/USDT": 105.0}
#: one model, every pass a call: for tests of the call path itself (tiers and delta gating have
#: their own tests)
EVERY_PASS_ONE_MODEL: dict[str, Any] = {
    "tiers": TierConfig(routine_model=None),
    "delta": DeltaConfig(enabled=False),
}


def snapshot(news: str | None = None, memory: str = "") -> MarketSnapshot:
    def view(price: float) -> TickerSnapshot:
        return TickerSnapshot(
            price=price,
            change_1h_pct=0.4,
            return_4h_pct=1.1,
            return_24h_pct=-2.0,
            volume_24h=None,
            volume_ratio=None,
            return_zscore=0.8,
        )

    return MarketSnapshot(
        at_ms=AT_MS,
        tickers={t: view(p) for t, p in PRICES.items()},
        btc_price=PRICES["BTC/USDT"],
        btc_change_1h_pct=0.4,
        btc_change_24h_pct=-2.0,
        news_summary=news,
        regime=RegimeSnapshot(
            crypto=dict.fromkeys(PRICES, "medium_volatility"),
            crypto_exposure=dict.fromkeys(PRICES, 0.8),
            macro="GOLDILOCKS",
            macro_exposure=1.2,
            combined="medium_volatility_goldilocks",
            exposure_scale=0.96,
        ),
        exposure_scale=0.96,
        agent_memory=memory,
        open_positions=[],
        portfolio_value=10_000.0,
        cash=10_000.0,
        gate_wake_reasons=["agent_timer"],
        unavailable={} if news else {"news_summary": "no source"},
    )


def _no_history(ticker: str) -> CloseSeries:
    return CloseSeries((), None)


def fallback() -> FallbackDecider:
    return FallbackDecider(FallbackPipeline(), _no_history, reason="fallback")


def answer(**overrides: Any) -> dict[str, Any]:
    """A fully valid answer; ``overrides`` replace top-level fields."""
    base: dict[str, Any] = {
        "decisions": [
            {
                "ticker": "BTC/USDT",
                "action": "BUY",
                "position_pct": 0.10,
                "confidence": 0.7,
                "reasoning": "Momentum up, funding neutral.",
                "signal_weights": {"momentum": 0.6, "derivatives": 0.4},
            },
            {
                "ticker": "ETH/USDT",
                "action": "HOLD",
                "position_pct": 0.0,
                "confidence": 0.5,
                "reasoning": "No edge.",
            },
        ],
        "market_assessment": "Calm uptrend.",
        "regime_agreement": True,
        "regime_agreement_reason": "agrees with medium volatility",
        "learning_note": "momentum has worked this week",
        "next_check_seconds": 900,
        "wake_conditions": [
            {"metric": "btc_price", "operator": "lt", "threshold": 75000, "reason": "support"}
        ],
        "memory_update": "Momentum works in calm regimes.",
    }
    base.update(overrides)
    return base


def hold_answer(ticker: str, next_check_seconds: int = 3600) -> dict[str, Any]:
    """A valid answer holding ``ticker`` with no edge, asking to be woken after the seconds."""
    return answer(
        decisions=[
            {
                "ticker": ticker,
                "action": "HOLD",
                "position_pct": 0.0,
                "confidence": 0.5,
                "reasoning": "No edge.",
            }
        ],
        next_check_seconds=next_check_seconds,
        wake_conditions=[],
    )


def decision_with(**fields: Any) -> dict[str, Any]:
    """A valid answer whose only decision has ``fields`` replaced."""
    one = {**answer()["decisions"][0], **fields}
    return answer(decisions=[one])


#: builds a ClaudeDecider on the fake API (the ``make`` fixture of the decider tests)
Make = Callable[..., ClaudeDecider]


def make_decider(
    base_url: str,
    clock: Any,
    *,
    timeout_secs: float = 5.0,
    budget_usd: float | None = None,
    bus: EventBus | None = None,
    policy: RetryPolicy | None = None,
    api_key: str | None = API_KEY,
    model: str = MODEL,
    failover_models: tuple[str, ...] = (),
) -> ClaudeDecider:
    config = AgentConfig(
        model=model,
        failover_models=failover_models,
        base_url=base_url,
        timeout_secs=timeout_secs,
        **EVERY_PASS_ONE_MODEL,
    )
    client = (
        ClaudeClient(
            build_anthropic_client(config, api_key), clock, AgentPricing(), policy or RetryPolicy()
        )
        if api_key
        else None
    )
    return ClaudeDecider(
        client=client,
        config=config,
        clock=clock,
        fallback=fallback(),
        breaker=CircuitBreaker(clock),
        ledger=UsageLedger(DailyBudget(clock, budget_usd)),
        bus=bus,
    )

"""Model tiers: which model a pass gets, and which answers are entries."""

from __future__ import annotations

import pytest
from fakes.claude_support import MODEL, snapshot

from agent.decision import AgentDecision, TradeDecision
from agent.snapshot import PendingOrderSnapshot
from agent.tiers import TierConfig, choose_model, opens_position
from broker.port import Action

TIERS = TierConfig(routine_model="claude-haiku-4-5", loud_zscore=1.5)


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        (["agent_timer"], "claude-haiku-4-5"),
        (["candle_close:BTC/USDT:15m", "candle_close:ETH/USDT:15m"], "claude-haiku-4-5"),
        (["anomaly:SOL/USDT:z=-2.40"], MODEL),
        (["wake:btc_price lt 75000 (support)"], MODEL),
        (["watchdog_no_market_data"], MODEL),
        (["candle_close:BTC/USDT:1h", "anomaly:BTC/USDT:z=2.10"], MODEL),
    ],
)
def test_routine_passes_get_the_cheap_model_and_the_rest_the_strong_one(
    reasons: list[str], expected: str
) -> None:
    shot = snapshot().model_copy(update={"gate_wake_reasons": reasons})
    assert choose_model(MODEL, TIERS, shot)[0] == expected


def test_a_loud_close_gets_the_strong_model() -> None:
    shot = snapshot().model_copy(update={"gate_wake_reasons": ["candle_close:SOL/USDT:15m"]})
    loud = shot.model_copy(
        update={
            "tickers": {
                **shot.tickers,
                "SOL/USDT": shot.tickers["SOL/USDT"].model_copy(update={"return_zscore": -1.7}),
            }
        }
    )
    assert choose_model(MODEL, TIERS, shot)[0] == "claude-haiku-4-5"
    model, why = choose_model(MODEL, TIERS, loud)
    assert model == MODEL and "SOL/USDT" in why


def test_without_a_routine_model_every_pass_gets_the_strong_one() -> None:
    assert choose_model(MODEL, TierConfig(routine_model=None), snapshot())[0] == MODEL


def _buy(ticker: str) -> AgentDecision:
    return AgentDecision(
        decided_by="claude",
        decisions=(TradeDecision(ticker=ticker, action=Action.BUY, position_pct=0.1),),
    )


def test_an_entry_is_a_buy_of_a_ticker_neither_held_nor_resting() -> None:
    shot = snapshot()
    assert opens_position(_buy("BTC/USDT"), shot)
    assert not opens_position(AgentDecision(decided_by="claude"), shot)
    resting = shot.model_copy(
        update={
            "pending_orders": [
                PendingOrderSnapshot(
                    ticker="BTC/USDT",
                    side="buy",
                    notional_usd=500.0,
                    limit_price=77_000.0,
                    placed_at_ms=0,
                    expires_at_ms=None,
                )
            ]
        }
    )
    assert not opens_position(_buy("BTC/USDT"), resting)

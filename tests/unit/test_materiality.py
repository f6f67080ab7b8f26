"""Delta gating's materiality rule: each kind of material change calls, a quiet routine pass does
not, and the unchanged decision keeps the last answer's schedule and places nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fakes.claude_support import AT_MS, snapshot

from agent.decision import AgentDecision
from agent.materiality import DeltaConfig, DeltaGate, VolatilityEstimate, material_change

HOUR_MS = 3_600_000
CONFIG = DeltaConfig()


def sent(minutes: float = 15, reasons: tuple[str, ...] = ("agent_timer",)) -> dict[str, Any]:
    base = snapshot().as_sent()
    base["at_ms"] = AT_MS + int(minutes * 60_000)
    base["gate_wake_reasons"] = list(reasons)
    for view in base["tickers"].values():
        view["multi_tf"] = {"1h": {"trend": "up", "rsi": 55.0, "bollinger_position": 0.5}}
    return base


def warm_vol(sigma_pct: float) -> VolatilityEstimate:
    """An estimate that has seen hourly moves of ``sigma_pct`` for every ticker."""
    vol = VolatilityEstimate(CONFIG.vol_halflife_hours)
    prices = dict.fromkeys(sent()["tickers"], 100.0)
    for hour in range(CONFIG.warmup_observations + 1):
        factor = 1 + sigma_pct / 100 if hour % 2 else 1.0
        vol.observe(hour * HOUR_MS, {t: p * factor for t, p in prices.items()})
    return vol


LAST = sent(minutes=0)


def test_a_quiet_routine_pass_is_not_material() -> None:
    now = sent()
    now["tickers"]["BTC/USDT"]["price"] *= 1.001  # 0.1 %: below the 0.5 % warm-up limit
    assert material_change(LAST, now, CONFIG, VolatilityEstimate(24)) is None


@pytest.mark.parametrize(
    "reasons",
    [
        ("anomaly:BTC/USDT:z=2.40",),
        ("wake:btc_price lt 75000",),
        ("watchdog_no_market_data",),
        ("candle_close:BTC/USDT:15m", "anomaly:SOL/USDT:z=-2.1"),
    ],
)
def test_anomalies_wake_conditions_and_the_watchdog_always_call(reasons: tuple[str, ...]) -> None:
    assert material_change(LAST, sent(reasons=reasons), CONFIG, VolatilityEstimate(24))


def test_the_last_answer_expires_after_max_unchanged_hours() -> None:
    late = sent(minutes=CONFIG.max_unchanged_hours * 60)
    assert "old" in (material_change(LAST, late, CONFIG, VolatilityEstimate(24)) or "")
    assert (
        material_change(
            LAST, sent(minutes=CONFIG.max_unchanged_hours * 60 - 1), CONFIG, VolatilityEstimate(24)
        )
        is None
    )


def test_a_price_move_is_measured_against_the_tickers_own_volatility() -> None:
    vol = warm_vol(sigma_pct=2.0)  # a volatile market: 1 sigma is about 1.4-2 %
    now = sent()
    now["tickers"]["SOL/USDT"]["price"] *= 1.008  # 0.8 %: material in warm-up, not here
    assert material_change(LAST, now, CONFIG, VolatilityEstimate(24))  # warm-up: 0.5 %
    assert material_change(LAST, now, CONFIG, vol) is None
    now["tickers"]["SOL/USDT"]["price"] *= 1.03
    assert "SOL/USDT moved" in (material_change(LAST, now, CONFIG, vol) or "")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda s: s["open_positions"].append({"ticker": "BTC/USDT", "quantity": 0.01}),
            "positions",
        ),
        (
            lambda s: s["pending_orders"].append(
                {"ticker": "ETH/USDT", "side": "buy", "notional_usd": 500.0}
            ),
            "resting orders",
        ),
        (lambda s: s["regime"]["crypto"].update({"BTC/USDT": "high_volatility"}), "regime"),
        (lambda s: s["regime"].update({"macro": "STAGFLATION"}), "regime"),
        (lambda s: s.update({"exposure_scale": 0.8}), "exposure_scale"),
        (lambda s: s["tickers"]["ETH/USDT"]["multi_tf"]["1h"].update({"trend": "down"}), "trend"),
        (lambda s: s["tickers"]["ETH/USDT"]["multi_tf"]["1h"].update({"rsi": 71.0}), "RSI"),
        (lambda s: s.update({"derivatives_signal": 0.3}), "derivatives_signal"),
    ],
)
def test_each_material_change_calls(change: Any, expected: str) -> None:
    last = copy.deepcopy(LAST)
    last["derivatives_signal"] = None
    now = copy.deepcopy(sent())
    now["derivatives_signal"] = None
    assert material_change(last, now, CONFIG, VolatilityEstimate(24)) is None
    change(now)
    assert expected in (material_change(last, now, CONFIG, VolatilityEstimate(24)) or "")


def test_a_derivatives_swing_is_material_and_a_small_drift_is_not() -> None:
    last = {**LAST, "derivatives_signal": 0.1, "funding_rates": {"BTC/USDT": 0.0001}}
    drift = {**sent(), "derivatives_signal": 0.2, "funding_rates": {"BTC/USDT": 0.00015}}
    assert material_change(last, drift, CONFIG, VolatilityEstimate(24)) is None
    swing = {**drift, "derivatives_signal": 0.4}
    assert "derivatives_signal" in (
        material_change(last, swing, CONFIG, VolatilityEstimate(24)) or ""
    )
    funding = {**drift, "funding_rates": {"BTC/USDT": 0.0003}}
    assert "funding" in (material_change(last, funding, CONFIG, VolatilityEstimate(24)) or "")


def test_the_unchanged_decision_places_nothing_and_keeps_the_answers_schedule() -> None:
    gate = DeltaGate(CONFIG)
    conditions = ({"metric": "btc_price", "operator": "lt", "threshold": 75_000, "reason": "x"},)
    answer = AgentDecision(decided_by="claude", next_check_seconds=1800, wake_conditions=conditions)
    assert gate.unchanged(LAST) is None  # nothing answered yet: call
    gate.answered(LAST, answer)
    decision = gate.unchanged(sent())
    assert decision is not None and decision.decided_by == "unchanged"
    assert decision.decisions == () and decision.usage is None
    assert (decision.next_check_seconds, decision.wake_conditions) == (1800, conditions)
    assert gate.skipped == 1
    assert gate.unchanged(sent(reasons=("anomaly:BTC/USDT:z=3.00",))) is None


def test_disabled_delta_gating_always_calls() -> None:
    gate = DeltaGate(DeltaConfig(enabled=False))
    gate.answered(LAST, AgentDecision(decided_by="claude"))
    assert gate.unchanged(sent()) is None

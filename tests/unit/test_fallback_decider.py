"""The fallback as a Decider: snapshot + history in, a fallback AgentDecision out, exposure once."""

from __future__ import annotations

from agent.fallback import FallbackPipeline
from agent.fallback_decider import FallbackDecider, fallback_inputs
from agent.snapshot import MarketSnapshot, PositionSnapshot, TickerSnapshot
from market.closes import CloseSeries
from market.recorded import load_klines, resample
from regime.snapshot import RegimeSnapshot

AT_MS = 1_743_984_000_000  # 2025-04-07 00:00 UTC


def _history(ticker: str) -> CloseSeries:
    hourly = load_klines(ticker, "1h")
    return CloseSeries.from_frame(resample(hourly[hourly.index < AT_MS], "1h", "4h").tail(540))


def _snapshot() -> MarketSnapshot:
    def view(price: float) -> TickerSnapshot:
        return TickerSnapshot(
            price=price,
            change_1h_pct=None,
            return_4h_pct=None,
            return_24h_pct=None,
            volume_24h=None,
            volume_ratio=None,
            return_zscore=None,
        )

    return MarketSnapshot(
        at_ms=AT_MS,
        tickers={"BTC/USDT": view(78_000.0), "SOL/USDT": view(105.0)},
        btc_price=78_000.0,
        btc_change_1h_pct=None,
        btc_change_24h_pct=None,
        regime=RegimeSnapshot(
            crypto={"BTC/USDT": "high_volatility", "SOL/USDT": "medium_volatility"},
            crypto_exposure={"BTC/USDT": 0.6, "SOL/USDT": 0.8},
            macro="GOLDILOCKS",
            macro_exposure=1.2,
            combined="high_volatility_goldilocks",
            exposure_scale=0.72,
        ),
        exposure_scale=0.72,
        open_positions=[
            PositionSnapshot(
                ticker="SOL/USDT",
                quantity=10.0,
                entry_price=120.0,
                mark_price=105.0,
                pnl_pct=-12.5,
                peak_price=125.0,
                opened_at_ms=AT_MS - 86_400_000,
                holding_secs=86_400.0,
            )
        ],
        portfolio_value=10_000.0,
        cash=8_950.0,
        gate_wake_reasons=["agent_timer"],
        unavailable={"derivatives_signal": "no source"},
    )


def test_inputs_carry_each_tickers_regime_and_only_the_macro_scale() -> None:
    inputs = fallback_inputs(_snapshot(), _history)
    btc, sol = inputs.tickers
    assert (btc.ticker, btc.regime_label, btc.regime_exposure) == (
        "BTC/USDT",
        "high_volatility",
        0.6,
    )
    assert (sol.regime_label, sol.regime_exposure) == ("medium_volatility", 0.8)
    assert inputs.exposure_scale == 1.2  # macro only: crypto is already per ticker
    assert sol.position is not None and sol.position.peak_price == 125.0
    assert btc.position is None and len(btc.closes) == 540
    assert btc.derivatives_signal is None and btc.derivatives_unavailable_reason == "no source"


async def test_decides_as_fallback_and_exits_a_losing_position() -> None:
    decider = FallbackDecider(FallbackPipeline(), _history, reason="no_api_key")
    decision = await decider.decide(_snapshot())
    assert decision.decided_by == "fallback" and decision.decider_reason == "no_api_key"
    by_ticker = {d.ticker: d for d in decision.decisions}
    assert by_ticker["SOL/USDT"].action.value == "SELL"  # -12.5 % is past the soft stop
    assert all(d.reasoning for d in decision.decisions)

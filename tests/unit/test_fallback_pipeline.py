"""The whole fallback pipeline: on recorded Binance data (BTC/ETH/SOL, 2025) and on edge inputs."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError
from test_fallback_support import (
    TICKERS,
    closed_history,
    open_position,
    recorded_4h,
    ticker_at,
    utc_ms,
)

from agent.decision import AgentDecision, TradeDecision
from agent.fallback import FallbackPipeline
from agent.fallback_config import FallbackConfig
from agent.fallback_inputs import FallbackInputs, TickerInputs
from broker.port import Action

SIGNAL_NAMES = {"rsi", "momentum", "bollinger", "derivatives"}
#: a spread of 2025 instants, on and between 4h candle closes
INSTANTS_MS = [
    utc_ms(2025, 2, 3, 8),
    utc_ms(2025, 4, 7, 1, 30),
    utc_ms(2025, 6, 22, 16),
    utc_ms(2025, 8, 14, 9, 15),
    utc_ms(2025, 10, 10, 22),
    utc_ms(2025, 11, 21, 4),
    utc_ms(2025, 12, 31, 23, 59),
]
REGIMES = ["low_volatility", "medium_volatility", "high_volatility", "unknown"]


def _inputs(at_ms: int, regime: str = "medium_volatility", **overrides: float) -> FallbackInputs:
    tickers = tuple(ticker_at(ticker, at_ms, regime_label=regime) for ticker in TICKERS)
    fields: dict[str, object] = {
        "at_ms": at_ms,
        "tickers": tickers,
        "portfolio_value": 10_000.0,
        "cash": 10_000.0,
        "exposure_scale": 1.0,
        **overrides,
    }
    return FallbackInputs.model_validate(fields)


@pytest.mark.parametrize("at_ms", INSTANTS_MS)
@pytest.mark.parametrize("regime", REGIMES)
def test_recorded_data_gives_valid_deterministic_decisions(at_ms: int, regime: str) -> None:
    inputs = _inputs(at_ms, regime)
    decision = FallbackPipeline().decide(inputs, decider_reason="no_api_key")
    assert decision == FallbackPipeline(FallbackConfig()).decide(inputs, "no_api_key")
    assert AgentDecision.model_validate_json(decision.model_dump_json()) == decision
    assert decision.decided_by == "fallback"
    assert decision.decider_reason == "no_api_key"
    assert decision.learning_note == ""
    assert decision.memory_update is None
    assert decision.wake_conditions == ()
    expected_secs = {"high_volatility": 300, "medium_volatility": 900, "unknown": 900}
    assert decision.next_check_seconds == expected_secs.get(regime, 1800)
    assert [d.ticker for d in decision.decisions] == list(TICKERS)
    assert decision.regime_agreement is True and regime in decision.regime_agreement_reason
    assert decision.market_assessment.startswith("fallback (rule-based): BTC/USDT")
    for trade in decision.decisions:
        assert trade.action in (Action.BUY, Action.HOLD)  # nothing is held yet
        assert set(trade.signal_weights) == {"rsi", "momentum", "bollinger"}
        assert all(-1.0 <= value <= 1.0 for value in trade.signal_weights.values())
        assert re.search(r"score [+-]\d\.\d\d", trade.reasoning)
        assert "derivatives unavailable: no derivatives signal in the snapshot" in trade.reasoning
        if trade.action is Action.BUY:
            assert 0.05 <= trade.position_pct <= 0.20
            assert "score" in trade.reasoning
            assert "size" in trade.reasoning
        else:
            assert trade.position_pct == 0.0
            assert trade.reasoning.startswith("HOLD: ")


def test_recorded_data_produces_both_buys_and_holds() -> None:
    """Across a year of daily instants the rules neither always buy nor never buy."""
    pipeline = FallbackPipeline()
    actions: list[Action] = []
    for day in range(0, 360, 5):
        at_ms = utc_ms(2025, 1, 15) + day * 86_400_000
        actions.extend(d.action for d in pipeline.decide(_inputs(at_ms)).decisions)
    buys = actions.count(Action.BUY)
    assert 0 < buys < len(actions)


def test_derivatives_signal_joins_the_blend_when_present() -> None:
    at_ms = INSTANTS_MS[2]
    btc = ticker_at("BTC/USDT", at_ms, derivatives_signal=0.6)
    inputs = FallbackInputs(at_ms=at_ms, tickers=(btc,), portfolio_value=1000.0, cash=1000.0)
    trade = FallbackPipeline().decide(inputs).decisions[0]
    assert trade.signal_weights["derivatives"] == 0.6
    assert set(trade.signal_weights) == SIGNAL_NAMES
    assert "derivatives +0.60 x 0.20" in trade.reasoning
    absent = ticker_at("BTC/USDT", at_ms).model_copy(
        update={"derivatives_unavailable_reason": "monitor down"}
    )
    inputs = inputs.model_copy(update={"tickers": (absent,)})
    trade = FallbackPipeline().decide(inputs).decisions[0]
    assert "derivatives" not in trade.signal_weights
    assert "derivatives unavailable: monitor down" in trade.reasoning


def _buy_instant(min_position_pct: float) -> int:
    """The first 2025 daily instant where BTC's rules BUY at least this much at full exposure
    (searched in the recorded data, not hard-coded)."""
    pipeline = FallbackPipeline()
    for day in range(360):
        at_ms = utc_ms(2025, 1, 15) + day * 86_400_000
        btc = ticker_at("BTC/USDT", at_ms, regime_label="high_volatility")
        inputs = FallbackInputs(at_ms=at_ms, tickers=(btc,), portfolio_value=1.0, cash=1.0)
        trade = pipeline.decide(inputs).decisions[0]
        if trade.action is Action.BUY and trade.position_pct >= min_position_pct:
            return at_ms
    raise AssertionError(f"no BUY of {min_position_pct} or more anywhere in 2025")


def _decide_btc(at_ms: int, exposure: float, scale: float) -> TradeDecision:
    btc = ticker_at("BTC/USDT", at_ms, regime_label="high_volatility", regime_exposure=exposure)
    inputs = FallbackInputs(
        at_ms=at_ms, tickers=(btc,), portfolio_value=1.0, cash=1.0, exposure_scale=scale
    )
    return FallbackPipeline().decide(inputs).decisions[0]


def test_exposure_scales_the_size() -> None:
    at_ms = _buy_instant(0.11)
    full = _decide_btc(at_ms, exposure=1.0, scale=1.0)
    assert full.action is Action.BUY
    halved = _decide_btc(at_ms, exposure=0.5, scale=1.0)
    assert halved.action is Action.BUY
    assert halved.position_pct == pytest.approx(full.position_pct / 2, rel=1e-12)
    assert _decide_btc(at_ms, exposure=1.0, scale=0.5) == halved  # both exposures multiply


def test_exposure_below_the_minimum_size_blocks_the_buy() -> None:
    at_ms = _buy_instant(0.05)
    assert _decide_btc(at_ms, exposure=1.0, scale=1.0).action is Action.BUY
    for exposure, scale in ((0.0, 1.0), (1.0, 0.0), (0.2, 0.2)):
        blocked = _decide_btc(at_ms, exposure, scale)
        assert blocked.action is Action.HOLD
        assert f"exposure {exposure * scale:.2f}" in blocked.reasoning
        assert "< minimum 0.05: no trade" in blocked.reasoning


def test_buys_never_plan_more_than_the_cash() -> None:
    pipeline = FallbackPipeline()
    for day in range(0, 360, 3):
        at_ms = utc_ms(2025, 1, 15) + day * 86_400_000
        inputs = _inputs(at_ms, "high_volatility", cash=800.0)  # 8 % of the portfolio
        decision = pipeline.decide(inputs)
        planned = sum(d.position_pct for d in decision.decisions if d.action is Action.BUY)
        assert planned <= 0.08 + 1e-12
        for trade in decision.decisions:
            if trade.action is Action.BUY:
                assert 0.05 <= trade.position_pct <= 0.20


@pytest.mark.parametrize("at_ms", INSTANTS_MS)
def test_open_positions_exit_at_the_documented_thresholds(at_ms: int) -> None:
    price = float(closed_history(recorded_4h("ETH/USDT"), at_ms)["close"].iloc[-1])
    pipeline = FallbackPipeline()

    def decide_with(entry: float, peak: float) -> TradeDecision:
        position = open_position("ETH/USDT", entry_price=entry, peak_price=peak, quantity=1.0)
        eth = ticker_at("ETH/USDT", at_ms, position=position)
        inputs = FallbackInputs(
            at_ms=at_ms, tickers=(eth,), portfolio_value=100_000.0, cash=50_000.0
        )
        return pipeline.decide(inputs).decisions[0]

    stopped = decide_with(entry=price / (1 - 0.0601), peak=price / (1 - 0.0601))
    assert stopped.action is Action.SELL
    assert stopped.reasoning.startswith("SELL (stop_loss): ")
    assert stopped.confidence == 1.0
    assert stopped.position_pct == pytest.approx(price / 100_000.0)  # the whole position
    trailed = decide_with(entry=price / 1.05, peak=price / (1 - 0.0801))
    assert trailed.action is Action.SELL
    assert trailed.reasoning.startswith("SELL (trailing_stop): ")
    inside = decide_with(entry=price / (1 - 0.0599), peak=price / (1 - 0.0799))
    # inside both price limits: only the score may close the position
    if inside.action is Action.SELL:
        assert inside.reasoning.startswith("SELL (signal): ")
    else:
        assert inside.action is Action.HOLD
        assert inside.reasoning.startswith("HOLD: position open, ")
        assert "within limits" in inside.reasoning


def test_no_data_at_all_holds_and_says_why() -> None:
    at_ms = INSTANTS_MS[0]
    empty = TickerInputs(ticker="BTC/USDT", price=50_000.0)
    inputs = FallbackInputs(at_ms=at_ms, tickers=(empty,), portfolio_value=1.0, cash=1.0)
    trade = FallbackPipeline().decide(inputs, "breaker_open").decisions[0]
    assert trade.action is Action.HOLD
    assert trade.signal_weights == {}
    assert "no 4h candles" in trade.reasoning
    assert "no technical signal" in trade.reasoning
    nothing = FallbackPipeline().decide(
        FallbackInputs(at_ms=at_ms, tickers=(), portfolio_value=1.0, cash=1.0)
    )
    assert nothing.decisions == ()
    assert nothing.market_assessment == "fallback (rule-based): no tickers in the snapshot"


def test_stale_history_holds_and_says_how_old() -> None:
    at_ms = INSTANTS_MS[0]
    stale_at = at_ms + 3 * 4 * 3_600_000  # three 4h candles later, same history
    btc = ticker_at("BTC/USDT", at_ms)
    inputs = FallbackInputs(at_ms=stale_at, tickers=(btc,), portfolio_value=1.0, cash=1.0)
    trade = FallbackPipeline().decide(inputs).decisions[0]
    assert trade.action is Action.HOLD
    assert "stale history: newest 4h candle closed 12.0 h ago" in trade.reasoning


def test_no_price_or_no_portfolio_holds_and_says_why() -> None:
    at_ms = _buy_instant(0.05)
    btc = ticker_at("BTC/USDT", at_ms, regime_label="high_volatility")
    priceless = btc.model_copy(update={"price": None})
    inputs = FallbackInputs(at_ms=at_ms, tickers=(priceless,), portfolio_value=1.0, cash=1.0)
    trade = FallbackPipeline().decide(inputs).decisions[0]
    assert trade.action is Action.HOLD
    assert "no current price" in trade.reasoning
    inputs = FallbackInputs(at_ms=at_ms, tickers=(btc,), portfolio_value=0.0, cash=0.0)
    trade = FallbackPipeline().decide(inputs).decisions[0]
    assert trade.action is Action.HOLD
    assert "portfolio value is 0" in trade.reasoning


def test_unrecognised_regime_label_is_treated_as_unknown_and_said() -> None:
    at_ms = INSTANTS_MS[3]
    btc = ticker_at("BTC/USDT", at_ms, regime_label="risk_on")
    inputs = FallbackInputs(at_ms=at_ms, tickers=(btc,), portfolio_value=1.0, cash=1.0)
    decision = FallbackPipeline().decide(inputs)
    assert "'risk_on' -> unknown" in decision.regime_agreement_reason
    assert "unrecognised regime label 'risk_on'" in decision.decisions[0].reasoning
    assert decision.next_check_seconds == 900


def test_a_closes_tuple_seen_again_is_not_validated_again_and_comes_back_the_same() -> None:
    closes = tuple(float(price) for price in range(1, 300))
    first = TickerInputs(ticker="BTC/USDT", closes=closes, last_candle_open_ms=0)
    again = TickerInputs(ticker="ETH/USDT", closes=closes, last_candle_open_ms=0)
    assert again.closes is first.closes and first.closes == closes
    bad = (1.0, float("nan"))
    for _ in range(2):  # a rejected series is not remembered as valid
        with pytest.raises(ValidationError, match="finite and positive"):
            TickerInputs(ticker="BTC/USDT", closes=bad, last_candle_open_ms=0)


def test_inputs_are_validated() -> None:
    with pytest.raises(ValidationError, match="finite and positive"):
        TickerInputs(ticker="BTC/USDT", closes=(1.0, float("nan")), last_candle_open_ms=0)
    with pytest.raises(ValidationError, match="last_candle_open_ms"):
        TickerInputs(ticker="BTC/USDT", closes=(1.0, 2.0))
    with pytest.raises(ValidationError, match="given with ticker"):
        TickerInputs(ticker="BTC/USDT", position=open_position("ETH/USDT", 1.0, 1.0))
    with pytest.raises(ValidationError):
        TickerInputs(ticker="BTC/USDT", derivatives_signal=1.5)

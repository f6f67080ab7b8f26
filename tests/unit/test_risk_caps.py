"""Risk caps: each rule on its own, and a property test that no input can exceed them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from agent.decision import AgentDecision, TradeDecision
from agent.risk import (
    RESTING_BUYS_COUNT,
    CapChange,
    RiskConfig,
    RiskContext,
    TickerError,
    _whitelisted,
    apply_risk_caps,
    normalize_ticker,
)
from broker.port import Action

WHITELIST = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
PRICES: dict[str, float | None] = {"BTC/USDT": 90_000.0, "ETH/USDT": 3_000.0, "SOL/USDT": 150.0}


def _ctx(**kw: object) -> RiskContext:
    base: dict[str, object] = {
        "whitelist": WHITELIST,
        "portfolio_value_usd": 10_000.0,
        "cash_usd": 10_000.0,
        "prices": PRICES,
    }
    base.update(kw)
    return RiskContext.model_validate(base)


def _decide(*decisions: TradeDecision) -> AgentDecision:
    return AgentDecision(decisions=decisions, decided_by="fallback")


def _buy(ticker: str, pct: float, confidence: float = 0.6) -> TradeDecision:
    return TradeDecision(ticker=ticker, action=Action.BUY, position_pct=pct, confidence=confidence)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("BTC/USDT", "BTC/USDT"),
        ("BTC/USDT:USDT", "BTC/USDT"),
        ("btc/usdt", "BTC/USDT"),
        (" ETHUSDT ", "ETH/USDT"),
    ],
)
def test_tickers_are_normalised(raw: str, expected: str) -> None:
    assert normalize_ticker(raw) == expected


# look-alikes upper() turns into a ticker: U+017F (long s) into S, U+FB06 (st ligature) into ST
@pytest.mark.parametrize(
    "raw", ["", "BTC", "BTC/US DT", "../etc", "\u017fol/usdt", "ETH/U\u017fDT", "\ufb06/USDT"]
)
def test_garbage_tickers_are_refused(raw: str) -> None:
    with pytest.raises(TickerError):
        normalize_ticker(raw)


def test_position_pct_is_capped_at_twenty_percent() -> None:
    out = apply_risk_caps(_decide(_buy("BTC/USDT:USDT", 1.0)), _ctx(), RiskConfig(), "d1")
    (intent,) = out.intents
    assert intent.ticker == "BTC/USDT" and intent.notional_usd == pytest.approx(2_000.0)
    assert intent.reference_price == 90_000.0 and intent.position_pct == 0.20
    whats = {c.what for c in out.changes}
    assert {"ticker", "position_pct"} <= whats


def test_unknown_ticker_and_duplicates_are_dropped_with_reasons() -> None:
    out = apply_risk_caps(
        _decide(_buy("DOGE/USDT", 0.1), _buy("ETH/USDT", 0.1), _buy("ETH/USDT", 0.2)),
        _ctx(),
        RiskConfig(),
        "d",
    )
    assert [i.ticker for i in out.intents] == ["ETH/USDT"]
    reasons = [c.reason for c in out.dropped]
    assert any("whitelist" in r for r in reasons)
    assert any("second decision" in r for r in reasons)


def test_existing_position_is_topped_up_to_target_not_doubled() -> None:
    ctx = _ctx(position_notional_usd={"SOL/USDT": 1_500.0}, cash_usd=8_500.0)
    (intent,) = apply_risk_caps(_decide(_buy("SOL/USDT", 0.2)), ctx, RiskConfig(), "d").intents
    assert intent.notional_usd == pytest.approx(500.0)
    out = apply_risk_caps(_decide(_buy("SOL/USDT", 0.1)), ctx, RiskConfig(), "d")
    assert out.intents == () and "already holds" in out.dropped[0].reason


def test_a_buy_asked_again_while_the_first_rests_is_dropped() -> None:
    """The double entry: the first BUY for 20 % rests unfilled; the same BUY again adds nothing."""
    first = apply_risk_caps(_decide(_buy("ETH/USDT", 0.2)), _ctx(), RiskConfig(), "d1")
    (placed,) = first.intents
    assert placed.notional_usd == pytest.approx(2_000.0)
    # the broker rounded the quantity down to its step and holds back the cash for it
    resting = 0.666_666 * 3_000.0
    ctx = _ctx(cash_usd=10_000.0 - resting * 1.0002, resting_buy_notional_usd={"ETH/USDT": resting})
    again = apply_risk_caps(_decide(_buy("ETH/USDT", 0.2)), ctx, RiskConfig(), "d2")
    assert again.intents == ()
    # what is left is the quantity step's rounding (cents): reduced to it, then below the minimum
    (reduced,) = [c for c in again.changes if c.what == "notional_usd"]
    assert RESTING_BUYS_COUNT in reduced.reason and float(reduced.after) < 0.01
    (dropped,) = again.dropped
    assert dropped.ticker == "ETH/USDT" and "below minimum" in dropped.reason


def test_a_resting_order_at_the_full_target_drops_the_buy_with_its_reason() -> None:
    ctx = _ctx(cash_usd=8_000.0, resting_buy_notional_usd={"ETH/USDT": 2_000.0})
    out = apply_risk_caps(_decide(_buy("ETH/USDT", 0.2)), ctx, RiskConfig(), "d")
    assert out.intents == ()
    (dropped,) = out.dropped
    assert "already holds 20%" in dropped.reason and RESTING_BUYS_COUNT in dropped.reason


def test_a_larger_target_tops_up_only_the_difference_to_the_resting_order() -> None:
    ctx = _ctx(cash_usd=9_200.0, resting_buy_notional_usd={"ETH/USDT": 800.0})
    out = apply_risk_caps(_decide(_buy("ETH/USDT", 0.2)), ctx, RiskConfig(), "d")
    (intent,) = out.intents
    assert intent.notional_usd == pytest.approx(1_200.0)
    (change,) = [c for c in out.changes if c.what == "notional_usd"]
    assert (change.before, change.after) == ("2000.00", "1200.00")
    assert RESTING_BUYS_COUNT in change.reason and "800.00 USD resting" in change.reason


def test_position_and_resting_orders_together_count_as_held() -> None:
    ctx = _ctx(
        position_notional_usd={"SOL/USDT": 500.0},
        resting_buy_notional_usd={"SOL/USDT": 700.0},
        cash_usd=8_800.0,
    )
    (intent,) = apply_risk_caps(_decide(_buy("SOL/USDT", 0.2)), ctx, RiskConfig(), "d").intents
    assert intent.notional_usd == pytest.approx(800.0)
    out = apply_risk_caps(_decide(_buy("SOL/USDT", 0.1)), ctx, RiskConfig(), "d")
    assert out.intents == ()
    (dropped,) = out.dropped
    assert "already holds 10%" in dropped.reason and RESTING_BUYS_COUNT in dropped.reason
    # a position already at the target needs no resting order to explain the drop
    out = apply_risk_caps(_decide(_buy("SOL/USDT", 0.05)), ctx, RiskConfig(), "d")
    (dropped,) = out.dropped
    assert "already holds 5%" in dropped.reason and RESTING_BUYS_COUNT not in dropped.reason


def test_resting_orders_fill_the_total_exposure_cap() -> None:
    ctx = _ctx(
        position_notional_usd={"BTC/USDT": 2_000.0},
        resting_buy_notional_usd={"ETH/USDT": 2_000.0},
        cash_usd=6_000.0,
        exposure_scale=0.5,
    )
    out = apply_risk_caps(_decide(_buy("SOL/USDT", 0.2)), ctx, RiskConfig(), "d")
    (intent,) = out.intents  # room = 1.0 * 0.5 * 10k - 2k held - 2k resting = 1k
    assert intent.notional_usd == pytest.approx(1_000.0)
    assert any("exposure" in c.reason for c in out.changes)


def test_resting_orders_on_other_tickers_do_not_shrink_a_buy() -> None:
    ctx = _ctx(resting_buy_notional_usd={"BTC/USDT": 2_000.0}, cash_usd=8_000.0)
    out = apply_risk_caps(_decide(_buy("ETH/USDT", 0.2)), ctx, RiskConfig(), "d")
    (intent,) = out.intents
    assert intent.notional_usd == pytest.approx(2_000.0)
    assert not any(RESTING_BUYS_COUNT in c.reason for c in out.changes)


def test_sells_close_only_the_filled_position_whatever_rests() -> None:
    ctx = _ctx(
        position_notional_usd={"BTC/USDT": 1_500.0},
        resting_buy_notional_usd={"BTC/USDT": 500.0, "ETH/USDT": 900.0},
        cash_usd=7_100.0,
    )
    out = apply_risk_caps(
        _decide(
            TradeDecision(ticker="BTC/USDT", action=Action.SELL),
            TradeDecision(ticker="ETH/USDT", action=Action.SELL),
        ),
        ctx,
        RiskConfig(),
        "d",
    )
    (sell,) = out.intents
    assert (sell.ticker, sell.action, sell.notional_usd) == ("BTC/USDT", Action.SELL, 1_500.0)
    (dropped,) = out.dropped
    assert dropped.ticker == "ETH/USDT" and "no open position" in dropped.reason


def test_total_exposure_is_scaled_by_the_regime() -> None:
    ctx = _ctx(
        position_notional_usd={"BTC/USDT": 2_000.0, "ETH/USDT": 2_000.0},
        cash_usd=6_000.0,
        exposure_scale=0.5,
    )
    out = apply_risk_caps(_decide(_buy("SOL/USDT", 0.2)), ctx, RiskConfig(), "d")
    (intent,) = out.intents  # room = 1.0 * 0.5 * 10k - 4k = 1k
    assert intent.notional_usd == pytest.approx(1_000.0)
    assert any("exposure" in c.reason for c in out.changes)


def test_cash_and_min_notional() -> None:
    ctx = _ctx(cash_usd=60.0)
    out = apply_risk_caps(
        _decide(_buy("BTC/USDT", 0.2), _buy("SOL/USDT", 0.2)), ctx, RiskConfig(), "d"
    )
    # BTC needs 100 USDT minimum but cash leaves ~59.7; SOL fits after BTC is dropped
    assert [i.ticker for i in out.intents] == ["SOL/USDT"]
    assert out.intents[0].notional_usd == pytest.approx(60.0 * 0.995)
    assert any("below minimum 100" in c.reason for c in out.dropped)


def test_sell_needs_a_position_and_frees_exposure() -> None:
    ctx = _ctx(position_notional_usd={"BTC/USDT": 2_000.0}, cash_usd=8_000.0, exposure_scale=0.2)
    out = apply_risk_caps(
        _decide(
            TradeDecision(ticker="BTC/USDT", action=Action.SELL),
            TradeDecision(ticker="ETH/USDT", action=Action.SELL),
            _buy("SOL/USDT", 0.2),
        ),
        ctx,
        RiskConfig(),
        "d",
    )
    by_ticker = {i.ticker: i for i in out.intents}
    assert by_ticker["BTC/USDT"].action is Action.SELL
    assert by_ticker["BTC/USDT"].notional_usd == 2_000.0
    assert by_ticker["SOL/USDT"].notional_usd == pytest.approx(2_000.0)  # room freed by the sell
    assert "ETH/USDT" not in by_ticker and "no open position" in out.dropped[0].reason


def test_no_price_no_order_and_invalid_scale_means_no_new_exposure() -> None:
    ctx = _ctx(prices={**PRICES, "ETH/USDT": None}, exposure_scale=math.nan)
    out = apply_risk_caps(
        _decide(_buy("ETH/USDT", 0.1), _buy("SOL/USDT", 0.1)), ctx, RiskConfig(), "d"
    )
    assert out.intents == ()
    assert any("no current market price" in c.reason for c in out.dropped)
    assert any(c.what == "exposure_scale" for c in out.changes)


_tickers = st.sampled_from([*WHITELIST, "DOGE/USDT", "BTC/USDT:USDT", "ethusdt", "X"])
_decisions = st.builds(
    TradeDecision,
    ticker=_tickers,
    action=st.sampled_from(list(Action)),
    position_pct=st.floats(0.0, 1.0),
    confidence=st.floats(0.0, 1.0),
)
_money = st.floats(0.0, 1e7, allow_nan=False)


@settings(max_examples=examples(300), deadline=None)
@given(
    decisions=st.lists(_decisions, max_size=8),
    portfolio=_money,
    cash_frac=st.floats(0.0, 1.0),
    held=st.dictionaries(st.sampled_from(WHITELIST), st.floats(0.0, 5e6), max_size=3),
    resting=st.dictionaries(st.sampled_from(WHITELIST), st.floats(0.0, 5e6), max_size=3),
    scale=st.one_of(st.floats(-1.0, 5.0), st.just(math.nan), st.just(math.inf)),
)
def test_random_decisions_never_exceed_the_caps(
    decisions: list[TradeDecision],
    portfolio: float,
    cash_frac: float,
    held: dict[str, float],
    resting: dict[str, float],
    scale: float,
) -> None:
    config = RiskConfig()
    cash = portfolio * cash_frac
    ctx = _ctx(
        portfolio_value_usd=portfolio,
        cash_usd=cash,
        position_notional_usd=held,
        resting_buy_notional_usd=resting,
        exposure_scale=scale,
    )
    out = apply_risk_caps(_decide(*decisions), ctx, config, "prop")

    buys = [i for i in out.intents if i.action is Action.BUY]
    sells = [i for i in out.intents if i.action is Action.SELL]
    assert {i.ticker for i in out.intents} <= set(WHITELIST)
    assert len({i.ticker for i in out.intents}) == len(out.intents)
    for sell in sells:
        assert sell.notional_usd == held[sell.ticker]
    for buy in buys:
        after = held.get(buy.ticker, 0.0) + resting.get(buy.ticker, 0.0) + buy.notional_usd
        assert after <= config.max_position_pct * portfolio * (1 + 1e-9)
        minimum = config.min_notional_usd_by_ticker.get(buy.ticker, config.min_notional_usd)
        assert buy.notional_usd >= minimum
    assert sum(b.notional_usd for b in buys) <= cash * (1 - config.cash_fee_buffer_pct / 100) + 1e-6
    effective = (
        min(scale, config.max_exposure_scale) if math.isfinite(scale) and scale >= 0 else 0.0
    )
    remaining = sum(v for t, v in held.items() if t not in {s.ticker for s in sells})
    remaining += sum(resting.values())  # a SELL does not cancel resting BUYs
    if buys:
        total = remaining + sum(b.notional_usd for b in buys)
        assert total <= config.max_total_exposure_pct * effective * portfolio * (1 + 1e-9) + 1e-6


@given(decisions=st.lists(_decisions, max_size=6))
def test_whitelisted_keeps_a_normalised_decision_as_the_copy_would_be(
    decisions: list[TradeDecision],
) -> None:
    """A decision whose ticker is normalised already goes on as itself (frozen: the copy with the
    same ticker, made before, equalled it); any other gets the normalised ticker."""
    changes: list[CapChange] = []
    kept = _whitelisted(decisions, WHITELIST, changes)
    seen: set[str] = set()
    copies, sources = [], []
    for d in decisions:
        try:
            ticker = normalize_ticker(d.ticker)
        except TickerError:
            continue
        if ticker in WHITELIST and ticker not in seen:
            seen.add(ticker)
            copies.append(d.model_copy(update={"ticker": ticker}))
            sources.append(d)
    assert [k.model_dump(mode="json") for k in kept] == [c.model_dump(mode="json") for c in copies]
    assert [k.model_fields_set for k in kept] == [c.model_fields_set for c in copies]
    for k, source in zip(kept, sources, strict=True):
        assert (k is source) == (k.ticker == source.ticker)

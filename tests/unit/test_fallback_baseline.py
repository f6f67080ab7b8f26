"""The fixed-weight baseline's actions (``FallbackPipeline._actions``) are the full plans'
actions (``_plans``): the exits, the entries, and the cash funding several BUYs strongest first;
and the exit/entry nodes' text-free answers are their verdicts' answers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from test_fallback_support import bare_blend, open_position

from agent.fallback import FallbackPipeline, _Analysis
from agent.fallback_config import FallbackConfig
from agent.fallback_inputs import FallbackInputs, TickerInputs
from agent.fallback_nodes import RegimeBlendEntry, RegimeBlendExit

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT", "XRP/USDT")
PIPELINE = FallbackPipeline()
BLEND = PIPELINE._detect.run("unknown")

scores = st.one_of(
    st.none(),
    st.floats(min_value=-1.0, max_value=1.0),
    st.sampled_from([0.0, PIPELINE.config.entry_score, PIPELINE.config.exit_score, 1.0]),
)
unit = st.floats(min_value=0.0, max_value=1.0)
prices = st.floats(min_value=1.0, max_value=200.0)


@st.composite
def analyses(draw: st.DrawFn) -> tuple[list[_Analysis], FallbackInputs]:
    count = draw(st.integers(min_value=0, max_value=len(TICKERS)))
    found = []
    for ticker in TICKERS[:count]:
        price = draw(st.one_of(st.none(), prices))
        position = None
        if draw(st.booleans()):
            entry, peak = draw(prices), draw(prices)
            position = open_position(ticker, entry, max(entry, peak))
        inputs = TickerInputs(
            ticker=ticker,
            price=price,
            position=position,
            regime_exposure=draw(st.floats(min_value=0.0, max_value=2.0)),
        )
        found.append(_Analysis(inputs, BLEND, bare_blend(draw(scores), draw(unit)), ""))
    portfolio = draw(st.one_of(st.just(0.0), st.floats(min_value=1.0, max_value=1e6)))
    fallback = FallbackInputs(
        at_ms=0,
        tickers=tuple(a.inputs for a in found),
        portfolio_value=portfolio,
        cash=draw(st.floats(min_value=0.0, max_value=1.0)) * portfolio,
        exposure_scale=draw(st.floats(min_value=0.0, max_value=1.5)),
    )
    return found, fallback


@given(analyses())
def test_the_baselines_actions_are_the_plans_actions(
    given_: tuple[list[_Analysis], FallbackInputs],
) -> None:
    found, inputs = given_
    want = [plan.action for plan in PIPELINE._plans(found, inputs)]
    assert PIPELINE._actions(found, inputs) == want


@given(
    st.lists(
        st.tuples(
            st.floats(min_value=PIPELINE.config.entry_score, max_value=1.0),
            unit,
            st.floats(min_value=0.5, max_value=2.0),
        ),
        min_size=2,
        max_size=len(TICKERS),
    ),
    st.floats(min_value=0.0, max_value=0.6),
    st.floats(min_value=1.0, max_value=1e6),
)
def test_buys_competing_for_the_cash_are_funded_as_the_plans_fund_them(
    buyers: list[tuple[float, float, float]], cash_fraction: float, portfolio: float
) -> None:
    found = [
        _Analysis(
            TickerInputs(ticker=ticker, price=100.0, regime_exposure=exposure),
            BLEND,
            bare_blend(score, confidence),
            "",
        )
        for ticker, (score, confidence, exposure) in zip(TICKERS, buyers, strict=False)
    ]
    inputs = FallbackInputs(
        at_ms=0,
        tickers=tuple(a.inputs for a in found),
        portfolio_value=portfolio,
        cash=cash_fraction * portfolio,
    )
    want = [plan.action for plan in PIPELINE._plans(found, inputs)]
    assert PIPELINE._actions(found, inputs) == want


def test_cash_for_one_buy_goes_to_the_strongest_score() -> None:
    found = [
        _Analysis(TickerInputs(ticker=ticker, price=100.0), BLEND, bare_blend(score, 1.0), "")
        for ticker, score in zip(TICKERS, (0.6, 0.9, 0.7), strict=False)
    ]
    config = PIPELINE.config
    inputs = FallbackInputs(
        at_ms=0,
        tickers=tuple(a.inputs for a in found),
        portfolio_value=1000.0,
        cash=1000.0 * config.min_position_pct * 1.5,  # one BUY's worth, not two
    )
    actions = PIPELINE._actions(found, inputs)
    assert [a.value for a in actions] == ["HOLD", "BUY", "HOLD"]  # 0.9 first, not BTC's 0.6
    assert actions == [plan.action for plan in PIPELINE._plans(found, inputs)]


@given(prices, prices, prices, scores)
def test_exits_is_the_exit_verdicts_answer(
    entry: float, peak: float, price: float, score: float | None
) -> None:
    node = RegimeBlendExit(FallbackConfig())
    position = open_position("BTC/USDT", entry, max(entry, peak))
    assert node.exits(position, price, score) is node.run(position, price, score).exit


@given(
    scores,
    unit,
    st.floats(min_value=0.0, max_value=2.0),
    st.one_of(st.floats(-0.01, 1.0), st.just(FallbackConfig().min_position_pct)),  # the edge
)
def test_size_is_the_entry_verdicts_answer(
    score: float | None, confidence: float, exposure: float, cash: float
) -> None:
    node = RegimeBlendEntry(FallbackConfig())
    verdict = node.run(bare_blend(score, confidence), exposure, cash)
    size = node.size(bare_blend(score, confidence), exposure, cash)
    assert (size is not None) is verdict.buy
    assert (size or 0.0) == verdict.position_pct

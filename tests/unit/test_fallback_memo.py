"""The fallback pipeline's remembered blend scores: one pipeline deciding again and again answers
byte for byte as a fresh pipeline each time (the rules' memo is invisible)."""

from __future__ import annotations

import orjson
from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_fallback_support import TICKERS, open_position, ticker_at, utc_ms

from agent.decision import AgentDecision
from agent.fallback import FallbackPipeline
from agent.fallback_inputs import FallbackInputs, TickerInputs

AT_MS = utc_ms(2025, 6, 22, 16)
STALE_MS = AT_MS + 3 * 86_400_000  # the 4h history is days old then
BASE = {ticker: ticker_at(ticker, AT_MS) for ticker in TICKERS}
#: one closes tuple per ticker, handed over at every step (``market.closes`` between two closes)
RAW_CLOSES = {ticker: tuple(base.closes) for ticker, base in BASE.items()}

_step = st.fixed_dictionaries(
    {
        "regime": st.sampled_from(["low_volatility", "high_volatility", "unknown", "bogus"]),
        "signal": st.sampled_from([None, 0.0, -0.0, 0.25, -0.5, 1.0]),
        "reason": st.sampled_from(["", "derivatives poll failed"]),
        "at_ms": st.sampled_from([AT_MS, AT_MS + 60_000, STALE_MS]),
        "cash": st.sampled_from([10_000.0, 500.0, 0.0]),
        "held": st.booleans(),
        "priced": st.booleans(),
        # the learner's draw goes through the remembered blend too: wide draws, at 0 and 1,
        # for some signals only or for none the blend has
        "draw": st.one_of(
            st.sampled_from([{}, {"rsi": 0.9, "momentum": 0.1}, {"funding": 0.3}]),
            st.dictionaries(
                st.sampled_from(["rsi", "momentum", "bollinger", "derivatives", "funding"]),
                st.one_of(st.sampled_from([0.0, 0.5, 1.0]), st.floats(0.0, 1.0)),
            ),
        ),
    }
)


def _inputs(step: dict[str, object]) -> FallbackInputs:
    tickers = []
    for name, base in BASE.items():
        fields = dict(base)
        fields.update(
            closes=RAW_CLOSES[name],
            regime_label=step["regime"],
            derivatives_signal=step["signal"],
            derivatives_unavailable_reason=step["reason"],
            learned_draw=step["draw"],
            price=base.price if step["priced"] or name != TICKERS[1] else None,
            position=open_position(name, base.price or 1.0, (base.price or 1.0) * 1.1)
            if step["held"] and name == TICKERS[0]
            else None,
        )
        tickers.append(TickerInputs.model_validate(fields))
    return FallbackInputs(
        at_ms=step["at_ms"],
        tickers=tuple(tickers),
        portfolio_value=10_000.0,
        cash=step["cash"],
    )


def _bytes(decision: AgentDecision) -> bytes:
    return orjson.dumps(decision.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)


_ZERO = {
    "regime": "unknown",
    "reason": "",
    "at_ms": AT_MS,
    "cash": 10_000.0,
    "held": False,
    "priced": True,
}


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(_step, min_size=1, max_size=12))
@example([{**_ZERO, "signal": 0.0, "draw": {}}, {**_ZERO, "signal": -0.0, "draw": {}}])
def test_one_pipeline_deciding_repeatedly_answers_as_fresh_pipelines(
    steps: list[dict[str, object]],
) -> None:
    kept = FallbackPipeline()
    first = _inputs(steps[0])
    for step in steps:
        inputs = _inputs(step)
        # validated once: the same tuple each step, which the memo goes by
        assert all(t.closes is f.closes for t, f in zip(inputs.tickers, first.tickers, strict=True))
        assert _bytes(kept.decide(inputs, "no_api_key")) == _bytes(
            FallbackPipeline().decide(inputs, "no_api_key")
        )

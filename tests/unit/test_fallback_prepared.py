"""The blend prepared once per closes series and finished with each learner draw answers byte for
byte as the single-pass blend it replaced (kept below as the reference), and the fixed-blend
baseline a learned decision is compared with (its actions only) says what a decision without the
draw says."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_fallback_support import TICKERS, open_position, ticker_at, utc_ms

from agent.fallback import FallbackPipeline
from agent.fallback_config import (
    DEFAULT_BLEND_TABLE,
    DERIVATIVES_SIGNAL,
    REGIME_LABELS,
    TECHNICAL_SIGNALS,
    FallbackConfig,
    SignalWeights,
)
from agent.fallback_inputs import FallbackInputs, TickerInputs
from agent.fallback_nodes import (
    BlendWeights,
    DerivativesReading,
    DerivativesSignalInput,
    RegimeBlendDetect,
    RegimeBlendSignal,
)
from agent.fallback_score import BlendedScore, learned_weights
from agent.fallback_technical import TechnicalSignals, clip_unit

SMALL = FallbackConfig(rsi_window=3, momentum_window=2, bollinger_window=4)
#: a custom table that zeroes signals out: the "weight 0 in the blend" and no-score branches
ZEROED = FallbackConfig(
    blend_table={
        **DEFAULT_BLEND_TABLE,
        "low_volatility": SignalWeights(rsi=0.0, momentum=1.0, bollinger=0.0),
        "high_volatility": SignalWeights(rsi=1.0, momentum=0.0, bollinger=0.0),
    },
    derivatives_weight=0.0,
)
CONFIGS = (FallbackConfig(), SMALL, ZEROED)
SIGNAL_NAMES = (*TECHNICAL_SIGNALS, DERIVATIVES_SIGNAL, "funding")


# --- the reference: RegimeBlendSignal.run as it was, in one pass -------------------------------


def _reference_run(
    config: FallbackConfig,
    closes: tuple[float, ...],
    blend: BlendWeights,
    derivatives: DerivativesReading,
    history_unavailable: str | None,
    learned: Mapping[str, float] | None,
) -> BlendedScore:
    if history_unavailable is not None:
        raw: dict[str, float] = {}
        signals: dict[str, float] = {}
        unavailable = dict.fromkeys(TECHNICAL_SIGNALS, history_unavailable)
    else:
        raw, signals, unavailable = TechnicalSignals(config).of(closes)
    if derivatives.value is None:
        unavailable[DERIVATIVES_SIGNAL] = derivatives.unavailable_reason
    if sum(blend.weights[name] for name in signals) <= 0:
        for name in signals:
            unavailable[name] = f"weight 0 in the {blend.regime} blend"
        return BlendedScore(
            score=None,
            confidence=0.0,
            signals={},
            weights={},
            indicators=raw,
            unavailable=unavailable,
            summary="no technical signal ["
            + "; ".join(f"{name} unavailable: {why}" for name, why in unavailable.items())
            + "]",
        )
    available = sum(blend.weights[name] for name in signals)
    weights = {
        name: (1.0 - derivatives.weight) * blend.weights[name] / available for name in signals
    }
    if derivatives.value is not None:
        weights[DERIVATIVES_SIGNAL] = derivatives.weight
        signals[DERIVATIVES_SIGNAL] = derivatives.value
    weights, multipliers = learned_weights(weights, learned or {})
    score = clip_unit(sum(weights[name] * signals[name] for name in weights))
    spread = sum(weights[name] * abs(signals[name]) for name in weights)
    coverage = (1.0 - derivatives.weight) * sum(
        blend.weights[name] for name in signals if name != DERIVATIVES_SIGNAL
    ) + derivatives.weight
    confidence = min(1.0, max(0.0, coverage * (abs(score) / spread if spread > 0 else 0.0)))
    summary = _reference_summary(score, confidence, blend, raw, signals, weights, unavailable)
    if multipliers:
        shown = ", ".join(f"{name} x{factor:.2f}" for name, factor in sorted(multipliers.items()))
        summary += f" (learned weights: {shown})"
    return BlendedScore(
        score=score,
        confidence=confidence,
        signals=signals,
        weights=weights,
        indicators=raw,
        unavailable=unavailable,
        summary=summary,
        learned=multipliers,
    )


_RAW_LABELS = {"rsi": ("rsi", "RSI {:.1f}"), "momentum": ("rate_of_change_pct", "ROC {:+.2f} %"),
               "bollinger": ("percent_b", "%B {:.2f}")}  # fmt: skip


def _reference_summary(
    score: float,
    confidence: float,
    blend: BlendWeights,
    raw: dict[str, float],
    signals: dict[str, float],
    weights: dict[str, float],
    unavailable: dict[str, str],
) -> str:
    parts = []
    for name, (raw_name, template) in _RAW_LABELS.items():
        if name in signals:
            shown = template.format(raw[raw_name])
            parts.append(f"{name} {shown} -> {signals[name]:+.2f} x {weights[name]:.2f}")
    if DERIVATIVES_SIGNAL in signals:
        parts.append(
            f"derivatives {signals[DERIVATIVES_SIGNAL]:+.2f} x {weights[DERIVATIVES_SIGNAL]:.2f}"
        )
    parts.extend(f"{name} unavailable: {why}" for name, why in unavailable.items())
    regime = f"regime {blend.regime}" + (f" ({blend.note})" if blend.note else "")
    return f"score {score:+.2f}, confidence {confidence:.2f} [{regime}; " + "; ".join(parts) + "]"


def _bytes(model: BlendedScore) -> bytes:
    # orjson keeps each float's exact repr (and -0.0) and the dicts' key order
    return orjson.dumps(model.model_dump())


# --- wide inputs --------------------------------------------------------------------------------

_walk = st.lists(st.floats(0.8, 1.25), min_size=1, max_size=60).map(
    lambda steps: tuple(100.0 * _product(steps[: i + 1]) for i in range(len(steps)))
)
_flat = st.tuples(st.floats(0.01, 1e6), st.integers(1, 30)).map(lambda pair: (pair[0],) * pair[1])
closes_series = st.one_of(st.just(()), _walk, _flat)
unit_draw = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0.0, 1.0))
draws = st.one_of(st.none(), st.dictionaries(st.sampled_from(SIGNAL_NAMES), unit_draw))
derivative_values = st.one_of(
    st.none(), st.sampled_from([0.0, -0.0, 1.0, -1.0]), st.floats(-1.0, 1.0)
)


def _product(values: list[float]) -> float:
    out = 1.0
    for value in values:
        out *= value
    return out


@settings(max_examples=examples(300), deadline=None)
@given(
    config=st.sampled_from(CONFIGS),
    closes=closes_series,
    label=st.sampled_from([*REGIME_LABELS, "bogus"]),
    value=derivative_values,
    reason=st.sampled_from(["", "derivatives poll failed"]),
    stale=st.sampled_from([None, "stale history: newest 4h candle closed 13.0 h ago"]),
    learned=st.lists(draws, min_size=1, max_size=4),
)
@example(
    config=ZEROED,
    closes=tuple(float(i) for i in range(1, 40)),
    label="low_volatility",
    value=None,
    reason="",
    stale=None,
    learned=[{"momentum": 0.0}, {"momentum": 1.0}, None],
)
def test_a_prepared_blend_finished_with_each_draw_is_the_single_pass_blend(
    config: FallbackConfig,
    closes: tuple[float, ...],
    label: str,
    value: float | None,
    reason: str,
    stale: str | None,
    learned: list[dict[str, float] | None],
) -> None:
    node = RegimeBlendSignal(config)
    blend = RegimeBlendDetect(config).run(label)
    derivatives = DerivativesSignalInput(config).run(value, reason)
    prepared = node.prepare(closes, blend, derivatives, stale)
    fixed = _bytes(_reference_run(config, closes, blend, derivatives, stale, None))
    for draw in learned:  # one preparation, many draws: no draw leaves a trace for the next
        expected = _bytes(_reference_run(config, closes, blend, derivatives, stale, draw))
        assert _bytes(prepared.scored(draw)) == expected
        assert _bytes(node.run(closes, blend, derivatives, stale, learned=draw)) == expected
        assert _bytes(prepared.fixed) == fixed


# --- the baseline's actions against a decision without the draw --------------------------------

#: 4h histories at instants 11 h apart (scores near the entry and exit thresholds among them)
INSTANTS = tuple(utc_ms(2025, 3, 1) + step * 11 * 3_600_000 for step in range(16))
BASE = {at_ms: {ticker: ticker_at(ticker, at_ms) for ticker in TICKERS} for at_ms in INSTANTS}
#: one closes tuple per ticker and instant, handed over at every decision (as ``market.closes``)
RAW_CLOSES = {
    at_ms: {ticker: tuple(base.closes) for ticker, base in bases.items()}
    for at_ms, bases in BASE.items()
}
STALE_MS = 3 * 86_400_000  # the 4h history is days old then

_ticker_state = st.fixed_dictionaries(
    {
        "regime": st.sampled_from(["low_volatility", "high_volatility", "unknown", "bogus"]),
        "draw": st.dictionaries(st.sampled_from(SIGNAL_NAMES), unit_draw),
        "priced": st.booleans(),
        # entry price against the current one: None flat, else a position in profit or at a loss
        "held": st.one_of(st.none(), st.sampled_from([0.9, 1.0, 1.02, 1.1, 1.3])),
        "exposure": st.sampled_from([0.0, 0.3, 1.0]),
    }
)
_decision_state = st.fixed_dictionaries(
    {
        "tickers": st.lists(_ticker_state, min_size=3, max_size=3),
        "signal": derivative_values,
        "instant": st.sampled_from(INSTANTS),
        "later_ms": st.sampled_from([0, 60_000, STALE_MS]),
        "cash": st.sampled_from([10_000.0, 500.0, 0.0]),
        "value": st.sampled_from([10_000.0, 0.0]),
    }
)


def _decision_inputs(state: dict[str, Any], *, with_draws: bool) -> FallbackInputs:
    tickers = []
    instant = state["instant"]
    for name, ticker_state in zip(TICKERS, state["tickers"], strict=True):
        base = BASE[instant][name]
        price = base.price or 1.0
        held = ticker_state["held"]
        fields = dict(base)
        fields.update(
            closes=RAW_CLOSES[instant][name],
            price=price if ticker_state["priced"] else None,
            regime_label=ticker_state["regime"],
            regime_exposure=ticker_state["exposure"],
            derivatives_signal=state["signal"],
            learned_draw=ticker_state["draw"] if with_draws else {},
            position=None if held is None else open_position(name, price * held, price * held),
        )
        tickers.append(TickerInputs.model_validate(fields))
    value = state["value"]
    return FallbackInputs(
        at_ms=instant + state["later_ms"],
        tickers=tuple(tickers),
        portfolio_value=value,
        cash=min(state["cash"], value),
    )


def _fixed_scores(assessment: str) -> dict[str, str]:
    """ticker -> "score +0.12" or "no score", from a decision's market assessment."""
    found = re.findall(
        r"(\S+/\S+) (?:no price|\S+) \S+ (no score|score [+-]\d+\.\d\d) ", assessment
    )
    return dict(found)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(_decision_state, min_size=1, max_size=4))
def test_the_learner_note_names_what_the_decision_without_the_draw_does(
    states: list[dict[str, Any]],
) -> None:
    kept = FallbackPipeline()  # deciding in turn: the blends prepared before are reused
    for state in states:
        learned = kept.decide(_decision_inputs(state, with_draws=True))
        plain = FallbackPipeline().decide(_decision_inputs(state, with_draws=False))
        scores = _fixed_scores(plain.market_assessment)
        assert set(scores) == set(TICKERS)
        for decision, without in zip(learned.decisions, plain.decisions, strict=True):
            note = (
                " The learner moved this decision: with the fixed regime weights it would be "
                f"{without.action.value} ({scores[decision.ticker]})."
            )
            if decision.action == without.action:
                assert "The learner moved" not in decision.reasoning
            else:
                event("the learner moved a decision")
                assert decision.reasoning.endswith(note)
        if not any(t["draw"] for t in state["tickers"]):
            assert learned == plain

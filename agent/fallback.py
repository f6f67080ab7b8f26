"""The rule-based fallback decider: what decides when Claude cannot (no key, breaker open, ...).

``FallbackPipeline(config).decide(inputs, decider_reason)`` (``agent.fallback_inputs``) runs, per
ticker, the nodes of
``agent.fallback_nodes`` (RegimeBlendDetect -> DerivativesSignal input -> RegimeBlendSignal ->
RegimeBlendExit for an open position, RegimeBlendEntry otherwise) and returns the same
``AgentDecision`` Claude's answer becomes, with ``decided_by="fallback"``. It is pure and
deterministic: the same inputs give the same decision.

Every ticker gets one decision whose ``reasoning`` names the numbers behind it; a HOLD always says
why (below threshold, no data, stale history, no price, too little cash...). ``signal_weights``
holds each available signal's value in [-1, 1] (rsi, momentum, bollinger, derivatives): the
learner keys its posteriors by these names; a signal without data is absent, never a made-up 0.

The learner acts here too: ``TickerInputs.learned_draw`` (the snapshot's Thompson draw for the
ticker's regime, absent under ``--no-memory``) re-weights the blend within [0.5x, 1.5x] per signal
(``fallback_score.learned_weights``). When that changes a ticker's action against the fixed blend,
its reasoning says so and what the fixed blend would have done.

Entry sizes are multiplied by the ticker's crypto regime exposure times the combined regime's
``exposure_scale``; BUYs are funded in descending score order from the cash left, so several BUYs
never plan more than the cash. A SELL's ``position_pct`` is the whole position's share of
portfolio value (the fallback always exits fully); its confidence is 1 for the price rules (stop
loss, trailing stop) and the blend's confidence for a signal exit.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from agent.decision import AgentDecision, TradeDecision
from agent.fallback_config import FallbackConfig, RegimeLabel
from agent.fallback_inputs import SERIES_KEPT, FallbackInputs, TickerInputs
from agent.fallback_nodes import (
    BlendWeights,
    DerivativesSignalInput,
    EntryVerdict,
    RegimeBlendDetect,
    RegimeBlendEntry,
    RegimeBlendExit,
    RegimeBlendSignal,
)
from agent.fallback_score import BlendedScore, PreparedBlend
from agent.memo import IdentityMemo, remember
from broker.port import Action
from market.timeframes import timeframe_ms

#: blends prepared per closes tuple: regime labels and derivatives readings seen since its close
_SCORES_PER_SERIES = 8

_VOLATILITY_RANK: dict[RegimeLabel, int] = {
    "low_volatility": 0,
    "unknown": 1,
    "medium_volatility": 2,
    "high_volatility": 3,
}


class _Analysis(NamedTuple):
    """What the signal nodes said about one ticker, before the entry/exit decision."""

    inputs: TickerInputs
    blend: BlendWeights
    blended: BlendedScore
    blend_text: str  # the blend's weights as the regime agreement shows them


class _Plan(NamedTuple):
    """A ticker's decision before its TradeDecision is built (the fixed-blend baseline a learned
    decision is compared with needs its action only)."""

    action: Action
    lead: str  # the reasoning before the blend's summary
    position_pct: float
    confidence: float


class _Prepared(NamedTuple):
    """A ticker's blend up to the learner's draw, kept between candle closes."""

    blend: BlendWeights
    blended: PreparedBlend
    blend_text: str


class FallbackPipeline:
    def __init__(self, config: FallbackConfig | None = None) -> None:
        self.config = config or FallbackConfig()
        self._detect = RegimeBlendDetect(self.config)
        self._derivatives = DerivativesSignalInput(self.config)
        self._signal = RegimeBlendSignal(self.config)
        self._exit = RegimeBlendExit(self.config)
        self._entry = RegimeBlendEntry(self.config)
        self._prepared_by_series: IdentityMemo[tuple[float, ...], dict[Any, _Prepared]]
        self._prepared_by_series = IdentityMemo(SERIES_KEPT)

    def decide(self, inputs: FallbackInputs, decider_reason: str = "") -> AgentDecision:
        prepared = [self._prepared(ticker, inputs.at_ms) for ticker in inputs.tickers]
        analyses = [
            _Analysis(ticker, blend, blended.scored(ticker.learned_draw), text)
            for ticker, (blend, blended, text) in zip(inputs.tickers, prepared, strict=True)
        ]
        plans = self._plans(analyses, inputs)
        decisions = [_built(a, plan) for a, plan in zip(analyses, plans, strict=True)]
        if any(analysis.blended.learned for analysis in analyses):
            fixed = [
                _Analysis(ticker, blend, blended.fixed, text)
                for ticker, (blend, blended, text) in zip(inputs.tickers, prepared, strict=True)
            ]
            baseline = self._actions(fixed, inputs)
            decisions = [
                _say_if_moved(decision, without, analysis)
                for decision, without, analysis in zip(decisions, baseline, fixed, strict=True)
            ]
        return AgentDecision(
            decisions=tuple(decisions),
            market_assessment=_clip(_assessment(analyses, decisions), 4000),
            # the rule-based pipeline blends by the regime model's labels: it always agrees
            regime_agreement=True if analyses else None,
            regime_agreement_reason=_clip(_regime_agreement(analyses), 1000),
            learning_note="",
            next_check_seconds=self._next_check_secs(analyses),
            wake_conditions=(),
            memory_update=None,
            decided_by="fallback",
            decider_reason=decider_reason,
        )

    def _prepared(self, ticker: TickerInputs, at_ms: int) -> _Prepared:
        """The blend up to the learner's draw, remembered per closes tuple (the same one between
        candle closes) and the rest of what it reads: most decisions come between two 4h closes
        with the same regime label and derivatives signal, and the blend was most of the rules'
        time. The draw is new at every decision: it only finishes the remembered blend. The
        fixed blend's model is handed to every decision: frozen, and its dicts are never written
        to (a decision copies them)."""
        problem = self._history_problem(ticker, at_ms)
        signal = ticker.derivatives_signal
        key = (
            ticker.regime_label,
            signal,
            None if signal is None else math.copysign(1.0, signal),  # -0.0 == 0.0, but is sent
            ticker.derivatives_unavailable_reason,
            problem,
        )
        prepared = self._prepared_by_series.get(ticker.closes)
        if prepared is None:
            prepared = {}
            self._prepared_by_series.put(ticker.closes, prepared)
        found = prepared.get(key)
        if found is None:
            blend = self._detect.run(ticker.regime_label)
            derivatives = self._derivatives.run(signal, ticker.derivatives_unavailable_reason)
            found = _Prepared(
                blend,
                self._signal.prepare(ticker.closes, blend, derivatives, problem),
                "/".join(f"{name} {value:.2f}" for name, value in blend.weights.items()),
            )
            remember(prepared, key, found, _SCORES_PER_SERIES)
        return found

    def _history_problem(self, ticker: TickerInputs, at_ms: int) -> str | None:
        if not ticker.closes or ticker.last_candle_open_ms is None:
            return f"no {self.config.timeframe} candles"
        step_ms = timeframe_ms(self.config.timeframe)
        closed_ms = ticker.last_candle_open_ms + step_ms
        if at_ms - closed_ms > self.config.stale_after_candles * step_ms:
            hours = (at_ms - closed_ms) / 3_600_000
            return f"stale history: newest {self.config.timeframe} candle closed {hours:.1f} h ago"
        return None

    def _plans(self, analyses: list[_Analysis], inputs: FallbackInputs) -> list[_Plan]:
        plans: dict[int, _Plan] = {}
        entry_candidates: list[int] = []
        for index, analysis in enumerate(analyses):
            early = self._without_entry(analysis, inputs.portfolio_value)
            if early is None:
                entry_candidates.append(index)
            else:
                plans[index] = early
        # fund the strongest scores first from the cash that is left
        entry_candidates.sort(key=lambda index: -(analyses[index].blended.score or 0.0))
        cash_left = inputs.cash
        for index in entry_candidates:
            analysis = analyses[index]
            exposure = analysis.inputs.regime_exposure * inputs.exposure_scale
            verdict = self._entry.run(
                analysis.blended, exposure, cash_left / inputs.portfolio_value
            )
            if verdict.buy:
                cash_left -= verdict.position_pct * inputs.portfolio_value
            plans[index] = _entry_plan(analysis, verdict, exposure)
        return [plans[index] for index in range(len(analyses))]

    def _actions(self, analyses: list[_Analysis], inputs: FallbackInputs) -> list[Action]:
        """``_plans``' actions without their texts (the fixed-weight baseline reads them only):
        the same rules, the same order of funding the BUYs from the cash left."""
        actions: list[Action | None] = [
            self._action_without_entry(analysis, inputs.portfolio_value) for analysis in analyses
        ]
        entry_candidates = [index for index, action in enumerate(actions) if action is None]
        entry_candidates.sort(key=lambda index: -(analyses[index].blended.score or 0.0))
        cash_left = inputs.cash
        for index in entry_candidates:
            analysis = analyses[index]
            exposure = analysis.inputs.regime_exposure * inputs.exposure_scale
            size = self._entry.size(analysis.blended, exposure, cash_left / inputs.portfolio_value)
            if size is None:
                actions[index] = Action.HOLD
            else:
                cash_left -= size * inputs.portfolio_value
                actions[index] = Action.BUY
        return [action for action in actions if action is not None]

    def _action_without_entry(self, analysis: _Analysis, portfolio_value: float) -> Action | None:
        """``_without_entry``'s action (None: as there, entry sizing decides)."""
        ticker, blended = analysis.inputs, analysis.blended
        if ticker.price is None:
            return Action.HOLD
        if ticker.position is not None:
            exits = self._exit.exits(ticker.position, ticker.price, blended.score)
            return Action.SELL if exits else Action.HOLD
        if blended.score is None or portfolio_value <= 0:
            return Action.HOLD
        return None

    def _without_entry(self, analysis: _Analysis, portfolio_value: float) -> _Plan | None:
        """The plan when no entry sizing is needed (open position, no data...), else None."""
        ticker, blended = analysis.inputs, analysis.blended
        if ticker.price is None:
            return _hold(blended, "no current price in the snapshot: no trade")
        if ticker.position is not None:
            verdict = self._exit.run(ticker.position, ticker.price, blended.score)
            if not verdict.exit:
                return _hold(blended, f"position open, {verdict.summary}")
            held_usd = ticker.position.detail.quantity * ticker.price
            share = min(1.0, held_usd / portfolio_value) if portfolio_value > 0 else 0.0
            return _Plan(
                Action.SELL,
                f"SELL ({verdict.rule}): {verdict.summary}",
                share,
                1.0 if verdict.rule != "signal" else blended.confidence,
            )
        if blended.score is None:
            return _hold(blended, "no entry without a score")
        if portfolio_value <= 0:
            return _hold(blended, "portfolio value is 0: nothing to size a position from")
        return None

    def _next_check_secs(self, analyses: list[_Analysis]) -> int:
        if not analyses:
            return self.config.next_check_secs["unknown"]
        regime = max((a.blend.regime for a in analyses), key=_VOLATILITY_RANK.__getitem__)
        return self.config.next_check_secs[regime]


def _say_if_moved(
    decision: TradeDecision, fixed_action: Action, fixed_analysis: _Analysis
) -> TradeDecision:
    """``decision`` with a note when the learned weights changed its action."""
    if decision.action == fixed_action:
        return decision
    score = fixed_analysis.blended.score
    shown = "no score" if score is None else f"score {score:+.2f}"
    note = (
        f" The learner moved this decision: with the fixed regime weights it would be "
        f"{fixed_action.value} ({shown})."
    )
    return decision.model_copy(update={"reasoning": _clip(decision.reasoning + note, 4000)})


def _hold(blended: BlendedScore, why: str) -> _Plan:
    return _Plan(Action.HOLD, f"HOLD: {why}", 0.0, blended.confidence)


def _entry_plan(analysis: _Analysis, verdict: EntryVerdict, exposure: float) -> _Plan:
    if not verdict.buy:
        return _hold(analysis.blended, f"{verdict.summary} (exposure {exposure:.2f})")
    confidence = analysis.blended.confidence
    return _Plan(Action.BUY, f"BUY: {verdict.summary}", verdict.position_pct, confidence)


def _built(analysis: _Analysis, plan: _Plan) -> TradeDecision:
    blended = analysis.blended
    return TradeDecision(
        ticker=analysis.inputs.ticker,
        action=plan.action,
        position_pct=plan.position_pct,
        confidence=plan.confidence,
        reasoning=_clip(f"{plan.lead}. {blended.summary}", 4000),
        signal_weights=blended.signals,
    )


def _assessment(analyses: list[_Analysis], decisions: list[TradeDecision]) -> str:
    if not analyses:
        return "fallback (rule-based): no tickers in the snapshot"
    parts = []
    for analysis, decision in zip(analyses, decisions, strict=True):
        ticker, score = analysis.inputs, analysis.blended.score
        price = "no price" if ticker.price is None else f"{ticker.price:,.6g}"
        shown = "no score" if score is None else f"score {score:+.2f}"
        parts.append(f"{ticker.ticker} {price} {analysis.blend.regime} {shown} {decision.action}")
    return "fallback (rule-based): " + "; ".join(parts)


def _regime_agreement(analyses: list[_Analysis]) -> str:
    if not analyses:
        return ""
    parts = []
    for analysis in analyses:
        label = analysis.inputs.regime_label
        shown = label if label == analysis.blend.regime else f"{label!r} -> unknown"
        parts.append(
            f"{analysis.inputs.ticker} {shown} (exposure {analysis.inputs.regime_exposure:.2f}): "
            f"{analysis.blend_text}"
        )
    return "follows the regime model's labels: " + "; ".join(parts)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"

"""The nodes of the rule-based fallback pipeline, each a pure step with typed input and output.

RegimeBlendDetect -> DerivativesSignalInput -> RegimeBlendSignal -> RegimeBlendExit / RegimeBlendEntry.
Tables and defaults are documented in ``agent.fallback_config``. Signal formulas (each in [-1, 1];
positive means "buy"):

- rsi: ``clip((mid - RSI) / half, -1, 1)`` with ``mid``/``half`` the centre and half-width of
  [oversold, overbought]: +1 at RSI <= 30, 0 at 50, -1 at RSI >= 70 (mean reversion).
- momentum: ``clip(ROC% / full_scale_pct, -1, 1)`` over ``momentum_window`` candles: +1 after a
  rise of 5 % or more (trend following).
- bollinger: ``clip(1 - 2 %B, -1, 1)``: +1 at or below the lower band, 0 on the middle band, -1 at
  or above the upper band (mean reversion).
- derivatives: the DerivativesSignal as given, already in [-1, 1].

score = sum of weight x signal over the available signals, weights renormalised over what is
available (the derivatives share stays fixed when present). When the learner's Thompson draw for
the ticker's regime is given (``learned``: signal -> draw in [0, 1]), each drawn signal's weight is
multiplied by ``0.5 + draw`` (a bounded [0.5x, 1.5x]: the prior mean 0.5 leaves it as it is) and
the weights are renormalised to sum 1, so signals that have worked get more say. confidence = coverage x agreement:
coverage is the share of the regime's technical weights that had data (when present, the
derivatives signal counts as covered for its own share); agreement is |score| / sum of weight x
|signal| (1 when every signal points the same way, 0 when they cancel out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent import indicators
from agent.fallback_config import (
    DERIVATIVES_SIGNAL,
    REGIME_LABELS,
    TECHNICAL_SIGNALS,
    FallbackConfig,
    RegimeLabel,
)
from agent.fallback_score import BlendedScore, PreparedBlend
from agent.fallback_technical import TechnicalSignals
from broker.port import PositionDetail


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- RegimeBlendDetect ------------------------------------------------------------------------


class BlendWeights(_Frozen):
    regime: RegimeLabel
    weights: dict[str, float]  # rsi / momentum / bollinger, summing to 1
    note: str = ""  # set when the given label was not one of the known ones


class RegimeBlendDetect:
    """The crypto regime label -> the technical signals' blend weights (table in fallback_config)."""

    def __init__(self, config: FallbackConfig) -> None:
        self._config = config

    def run(self, label: str) -> BlendWeights:
        if label in REGIME_LABELS:
            regime: RegimeLabel = label
            note = ""
        else:
            regime, note = "unknown", f"unrecognised regime label {label!r} treated as unknown"
        return BlendWeights(
            regime=regime, weights=self._config.blend_table[regime].as_dict(), note=note
        )


# --- DerivativesSignal input ------------------------------------------------------------------


class DerivativesReading(_Frozen):
    value: float | None = Field(ge=-1.0, le=1.0)  # None: unavailable, and not counted
    weight: float  # share of the blend it takes; 0 when unavailable
    unavailable_reason: str = ""  # set when value is None


class DerivativesSignalInput:
    """The DerivativesSignal, when the snapshot has one, joins the blend at a fixed weight;
    when it has none the signal is dropped and the reason kept (never a made-up 0)."""

    def __init__(self, config: FallbackConfig) -> None:
        self._config = config

    def run(self, value: float | None, unavailable_reason: str = "") -> DerivativesReading:
        if value is None:
            why = unavailable_reason or "no derivatives signal in the snapshot"
            return DerivativesReading(value=None, weight=0.0, unavailable_reason=why)
        return DerivativesReading(value=value, weight=self._config.derivatives_weight)


# --- RegimeBlendSignal (the score itself: ``agent.fallback_score``) -----------------------------


class RegimeBlendSignal:
    def __init__(self, config: FallbackConfig) -> None:
        self._config = config
        self._technical = TechnicalSignals(config)

    def run(
        self,
        closes: indicators.Closes,
        blend: BlendWeights,
        derivatives: DerivativesReading,
        history_unavailable: str | None = None,
        learned: Mapping[str, float] | None = None,
    ) -> BlendedScore:
        """``history_unavailable``: a reason the candles cannot be used at all (e.g. stale);
        ``learned``: the learner's Thompson draw per signal (absent or empty: the fixed blend)."""
        return self.prepare(closes, blend, derivatives, history_unavailable).scored(learned)

    def prepare(
        self,
        closes: indicators.Closes,
        blend: BlendWeights,
        derivatives: DerivativesReading,
        history_unavailable: str | None = None,
    ) -> PreparedBlend:
        """``run`` up to the learner's draw (see ``PreparedBlend``)."""
        if history_unavailable is not None:
            raw: dict[str, float] = {}
            signals: dict[str, float] = {}
            unavailable = dict.fromkeys(TECHNICAL_SIGNALS, history_unavailable)
        else:
            raw, signals, unavailable = self._technical.of(closes)
        if derivatives.value is None:
            unavailable[DERIVATIVES_SIGNAL] = derivatives.unavailable_reason
        if sum(blend.weights[name] for name in signals) <= 0:
            if signals:  # only possible with a custom table that zeroes these signals out
                for name in signals:
                    unavailable[name] = f"weight 0 in the {blend.regime} blend"
            unscored = BlendedScore(
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
            return PreparedBlend.unscored(unscored)
        weights = _renormalised(blend.weights, signals, derivatives)
        if derivatives.value is not None:
            signals[DERIVATIVES_SIGNAL] = derivatives.value
        coverage = (1.0 - derivatives.weight) * sum(
            blend.weights[name] for name in signals if name != DERIVATIVES_SIGNAL
        ) + derivatives.weight
        regime = f"regime {blend.regime}" + (f" ({blend.note})" if blend.note else "")
        return PreparedBlend.scoring(regime, raw, signals, weights, unavailable, coverage)


def _renormalised(
    table: dict[str, float], technical: dict[str, float], derivatives: DerivativesReading
) -> dict[str, float]:
    """Available technical signals share ``1 - derivatives weight`` in the table's proportions."""
    available = sum(table[name] for name in technical)  # > 0: checked by the caller
    weights = {name: (1.0 - derivatives.weight) * table[name] / available for name in technical}
    if derivatives.value is not None:
        weights[DERIVATIVES_SIGNAL] = derivatives.weight
    return weights


# --- RegimeBlendExit --------------------------------------------------------------------------


class OpenPosition(_Frozen):
    detail: PositionDetail
    peak_price: float = Field(gt=0.0)  # highest price seen since entry (for the trailing exit)


ExitRule = Literal["stop_loss", "trailing_stop", "signal", "none"]


class ExitVerdict(_Frozen):
    exit: bool
    rule: ExitRule
    drawdown_pct: float  # loss from entry, percent (positive = below entry)
    trailing_drawdown_pct: float  # fall from the peak, percent
    summary: str


class RegimeBlendExit:
    """Soft exits for an open long: stop loss from entry, trailing stop from the peak, or a
    strongly negative score. Checked in that order; the first that fires names the exit."""

    def __init__(self, config: FallbackConfig) -> None:
        self._config = config

    def run(self, position: OpenPosition, price: float, score: float | None) -> ExitVerdict:
        config = self._config
        entry, peak, drawdown_pct, trailing_pct = _drawdowns(position, price)
        numbers = (
            f"price {price:,.6g} vs entry {entry:,.6g} ({-drawdown_pct:+.2f} %), "
            f"{trailing_pct:.2f} % below peak {peak:,.6g}"
        )
        rule = self._rule(drawdown_pct, trailing_pct, score)
        if rule == "stop_loss":
            why = f"loss {drawdown_pct:.2f} % >= stop {config.stop_loss_pct} %"
        elif rule == "trailing_stop":
            why = f"off the peak {trailing_pct:.2f} % >= trailing {config.trailing_stop_pct} %"
        elif rule == "signal":
            why = f"score {score:+.2f} <= exit {config.exit_score:+.2f}"
        else:
            shown = "n/a" if score is None else f"{score:+.2f}"
            why = (
                f"within limits (stop {config.stop_loss_pct} %, trailing "
                f"{config.trailing_stop_pct} %, exit score {config.exit_score:+.2f}; score {shown})"
            )
        return ExitVerdict(
            exit=rule != "none",
            rule=rule,
            drawdown_pct=drawdown_pct,
            trailing_drawdown_pct=trailing_pct,
            summary=f"{numbers}: {why}",
        )

    def exits(self, position: OpenPosition, price: float, score: float | None) -> bool:
        """``run(...).exit`` without the verdict's text (a learned decision's fixed-weight
        baseline reads its action only)."""
        _, _, drawdown_pct, trailing_pct = _drawdowns(position, price)
        return self._rule(drawdown_pct, trailing_pct, score) != "none"

    def _rule(self, drawdown_pct: float, trailing_pct: float, score: float | None) -> ExitRule:
        config = self._config
        if drawdown_pct >= config.stop_loss_pct:
            return "stop_loss"
        if trailing_pct >= config.trailing_stop_pct:
            return "trailing_stop"
        if score is not None and score <= config.exit_score:
            return "signal"
        return "none"


def _drawdowns(position: OpenPosition, price: float) -> tuple[float, float, float, float]:
    """(entry, peak, loss from entry in %, fall from the peak in %)."""
    entry = position.detail.entry_price
    peak = max(position.peak_price, price)
    return entry, peak, (1.0 - price / entry) * 100.0, (1.0 - price / peak) * 100.0


# --- RegimeBlendEntry -------------------------------------------------------------------------


class EntryVerdict(_Frozen):
    buy: bool
    position_pct: float = Field(ge=0.0, le=1.0)  # of portfolio value; 0 unless buy
    summary: str


class RegimeBlendEntry:
    """BUY at ``score >= entry_score`` with no position open. Size (fraction of portfolio):

    ``strength = (score - entry) / (1 - entry)``,
    ``raw = min + (max - min) x strength x confidence``,
    ``size = min(raw x exposure, max, cash fraction)``;
    a size under ``min_position_pct`` is no trade (exposure or cash too small): HOLD.
    """

    def __init__(self, config: FallbackConfig) -> None:
        self._config = config

    def run(self, blended: BlendedScore, exposure: float, cash_fraction: float) -> EntryVerdict:
        config = self._config
        score = blended.score
        if score is None:
            return EntryVerdict(buy=False, position_pct=0.0, summary="no score: no entry")
        if score < config.entry_score:
            return EntryVerdict(
                buy=False,
                position_pct=0.0,
                summary=f"score {score:+.2f} below entry {config.entry_score:+.2f}",
            )
        strength, span, raw, size = self._sizing(score, blended.confidence, exposure, cash_fraction)
        sizing = (
            f"size {config.min_position_pct:.2f} + {span:.2f} x strength {strength:.2f} x "
            f"confidence {blended.confidence:.2f} = {raw:.3f}, x exposure {exposure:.2f}, "
            f"cash {cash_fraction:.3f} of portfolio -> {size:.3f}"
        )
        if size < config.min_position_pct:
            return EntryVerdict(
                buy=False,
                position_pct=0.0,
                summary=f"score {score:+.2f} >= entry but {sizing} < minimum "
                f"{config.min_position_pct:.2f}: no trade",
            )
        return EntryVerdict(
            buy=True,
            position_pct=size,
            summary=f"score {score:+.2f} >= entry {config.entry_score:+.2f}; {sizing}",
        )

    def size(self, blended: BlendedScore, exposure: float, cash_fraction: float) -> float | None:
        """``run(...).position_pct`` when it buys, None when not, without the verdict's text (a
        learned decision's fixed-weight baseline reads its action and the cash it takes only)."""
        config = self._config
        score = blended.score
        if score is None or score < config.entry_score:
            return None
        size = self._sizing(score, blended.confidence, exposure, cash_fraction)[3]
        return None if size < config.min_position_pct else size

    def _sizing(
        self, score: float, confidence: float, exposure: float, cash_fraction: float
    ) -> tuple[float, float, float, float]:
        """(strength, span, raw size, size)."""
        config = self._config
        strength = (score - config.entry_score) / (1.0 - config.entry_score)
        span = config.max_position_pct - config.min_position_pct
        raw = config.min_position_pct + span * strength * confidence
        return strength, span, raw, min(raw * exposure, config.max_position_pct, cash_fraction)

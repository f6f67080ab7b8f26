"""The rule-based decider's blended score (formulas in ``agent.fallback_nodes``), in two steps:
``PreparedBlend`` holds what depends on the closes, the regime's blend and the derivatives reading,
and finishes the score with the learner's Thompson draw, which is new at every decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from agent.fallback_config import DERIVATIVES_SIGNAL
from agent.fallback_technical import clip_unit

_RAW_LABELS = {"rsi": ("rsi", "RSI {:.1f}"), "momentum": ("rate_of_change_pct", "ROC {:+.2f} %"),
               "bollinger": ("percent_b", "%B {:.2f}")}  # fmt: skip


class BlendedScore(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    score: float | None = Field(ge=-1.0, le=1.0)  # None: no technical signal had data
    confidence: float = Field(ge=0.0, le=1.0)
    signals: dict[str, float]  # available signals only, each in [-1, 1]
    weights: dict[str, float]  # the renormalised weights actually used
    indicators: dict[str, float]  # raw values: rsi, rate_of_change_pct, percent_b
    unavailable: dict[str, str]  # signal -> why it dropped out
    summary: str
    #: signal -> the learner's multiplier applied, in [0.5, 1.5] (empty: the fixed blend)
    learned: dict[str, float] = Field(default_factory=dict)


class _BlendParts(NamedTuple):
    """What a score reads besides the learned weights; the summary's pieces formatted already."""

    signals: dict[str, float]
    weights: dict[str, float]  # renormalised, before the learner
    indicators: dict[str, float]
    unavailable: dict[str, str]
    coverage: float
    regime: str  # "regime <label>[ (note)]"
    weighted: tuple[tuple[str, str], ...]  # (signal, "<its part> x ") in the summary's order
    unavailable_parts: tuple[str, ...]


class PreparedBlend:
    """A blend scored up to the learner's draw. The draw is new at every decision, while all
    the rest (the closes' technical signals, the regime's weights renormalised over what is
    available, the derivatives reading, most of the summary's text) only changes on a candle
    close, a regime change or a new derivatives reading: the pipeline keeps this per closes
    series and finishes it with each draw. ``scored(draw)`` computes what a single pass over the
    closes would, the same way in the same order: the same floats and text to the last digit
    (tested against the single pass)."""

    __slots__ = ("_fixed", "_parts")

    def __init__(self, fixed: BlendedScore | None, parts: _BlendParts | None) -> None:
        self._fixed = fixed  # None until asked for, when there are parts
        self._parts = parts  # None: no technical signal, no score (``fixed`` given)

    @classmethod
    def unscored(cls, fixed: BlendedScore) -> PreparedBlend:
        """No technical signal had data (or weight): ``fixed``, whatever the draw."""
        return cls(fixed, None)

    @classmethod
    def scoring(
        cls,
        regime: str,
        raw: dict[str, float],
        signals: dict[str, float],
        weights: dict[str, float],
        unavailable: dict[str, str],
        coverage: float,
    ) -> PreparedBlend:
        """``regime``: "regime <label>[ (note)]" as the summary shows it; ``weights``: the
        renormalised blend before the learner; the dicts are kept as given (not copied)."""
        return cls(None, _blend_parts(regime, raw, signals, weights, unavailable, coverage))

    @property
    def fixed(self) -> BlendedScore:
        """The score without a draw (the fixed blend)."""
        if self._fixed is None:
            assert self._parts is not None
            self._fixed = _finished(self._parts, dict(self._parts.weights), {})
        return self._fixed

    def scored(self, learned: Mapping[str, float] | None) -> BlendedScore:
        """The score with the learner's draw ``learned`` (absent or empty: the fixed blend)."""
        parts = self._parts
        if parts is None or not learned:
            return self.fixed
        weights, multipliers = learned_weights(parts.weights, learned)
        if not multipliers:  # nothing drawn for these signals: the fixed blend
            return self.fixed
        return _finished(parts, weights, multipliers)


def _blend_parts(
    regime: str,
    raw: dict[str, float],
    signals: dict[str, float],
    weights: dict[str, float],
    unavailable: dict[str, str],
    coverage: float,
) -> _BlendParts:
    weighted = [
        (name, f"{name} {template.format(raw[raw_name])} -> {signals[name]:+.2f} x ")
        for name, (raw_name, template) in _RAW_LABELS.items()
        if name in signals
    ]
    if DERIVATIVES_SIGNAL in signals:
        signal = DERIVATIVES_SIGNAL
        weighted.append((signal, f"derivatives {signals[signal]:+.2f} x "))
    return _BlendParts(
        signals=signals,
        weights=weights,
        indicators=raw,
        unavailable=unavailable,
        coverage=coverage,
        regime=regime,
        weighted=tuple(weighted),
        unavailable_parts=tuple(f"{name} unavailable: {why}" for name, why in unavailable.items()),
    )


def _finished(
    parts: _BlendParts, weights: dict[str, float], multipliers: dict[str, float]
) -> BlendedScore:
    """The score, confidence and summary with these (learned or fixed) weights."""
    signals = parts.signals
    score = clip_unit(sum(weights[name] * signals[name] for name in weights))
    spread = sum(weights[name] * abs(signals[name]) for name in weights)
    coverage = parts.coverage
    confidence = min(1.0, max(0.0, coverage * (abs(score) / spread if spread > 0 else 0.0)))
    shown = [prefix + f"{weights[name]:.2f}" for name, prefix in parts.weighted]
    summary = (
        f"score {score:+.2f}, confidence {confidence:.2f} [{parts.regime}; "
        + "; ".join([*shown, *parts.unavailable_parts])
        + "]"
    )
    # the models copy the dicts they are given: the parts stay as they are for the next draw
    return BlendedScore(
        score=score,
        confidence=confidence,
        signals=signals,
        weights=weights,
        indicators=parts.indicators,
        unavailable=parts.unavailable,
        summary=summary + _learned_summary(multipliers),
        learned=multipliers,
    )


LEARNED_MIN_FACTOR = 0.5
LEARNED_MAX_FACTOR = 1.5


def learned_weights(
    weights: Mapping[str, float], draws: Mapping[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """The blend weights re-weighted by the learner's draws, and the multipliers applied.

    A drawn signal's weight is scaled by ``0.5 + draw`` (clipped to [0.5, 1.5]); signals the
    learner has no posterior for keep theirs; then all are renormalised to sum 1."""
    multipliers = {
        name: min(LEARNED_MAX_FACTOR, max(LEARNED_MIN_FACTOR, 0.5 + draws[name]))
        for name in weights
        if name in draws
    }
    if not multipliers:
        return dict(weights), {}
    scaled = {name: weight * multipliers.get(name, 1.0) for name, weight in weights.items()}
    total = sum(scaled.values())
    if total <= 0:
        return dict(weights), {}
    return {name: weight / total for name, weight in scaled.items()}, multipliers


def _learned_summary(multipliers: Mapping[str, float]) -> str:
    if not multipliers:
        return ""
    shown = ", ".join(f"{name} x{factor:.2f}" for name, factor in sorted(multipliers.items()))
    return f" (learned weights: {shown})"

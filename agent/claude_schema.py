"""Claude's answer: the JSON schema it is asked for, and its validation and conversion on arrival.

The answer is model output, so it is data to check, never trusted. Two levels of problems:

- structural (not JSON, a missing or extra top-level field, a wrong type, too large): the whole
  answer fails (``AnswerInvalid``) and the fallback decides;
- per decision (unknown ticker, ``position_pct`` or ``confidence`` out of range, ...): that decision
  is dropped and the reason recorded; out-of-range ``next_check_seconds`` is clamped, wake
  conditions over unknown metrics are rejected by the gate's validator. Each change is a ``Note``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    create_model,
)

from agent.decision import AgentDecision, TradeDecision, Usage
from agent.risk import TickerError, normalize_ticker
from agent.signal_names import SIGNAL_KEYWORDS, SIGNAL_NAMES, canonical_signal
from broker.port import Action
from gate.conditions import (
    MAX_WAKE_CONDITIONS,
    METRICS,
    MetricSpec,
    build_metric_registry,
    describe_metrics,
    validate_conditions,
)
from state.memory_clip import clip_memory

MAX_ANSWER_BYTES = 64 * 1024  # a real answer is a few KB; far more is a model gone astray
MAX_POSITION_PCT = 0.20
NEXT_CHECK_MIN_SECS = 60
NEXT_CHECK_MAX_SECS = 3600
__all__ = ["SIGNAL_NAMES"]  # re-exported: the prompt names them


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True)
class WakeRules:
    """The wake conditions an answer may set: over the daemon's own metrics (its tickers'), at
    most its gate's ``max_wake_conditions``. Checked here too, not only by the gate, so the notes
    journaled with the answer say what the gate will hold."""

    registry: Mapping[str, MetricSpec] = field(default_factory=lambda: METRICS)
    max_conditions: int = MAX_WAKE_CONDITIONS

    @classmethod
    def of(cls, tickers: Iterable[str], max_conditions: int) -> WakeRules:
        return cls(MappingProxyType(build_metric_registry(tickers)), max_conditions)

    def describe(self) -> str:
        """The metrics as the prompts list them, one per line."""
        return describe_metrics(self.registry)


#: the default tickers' metrics and cap (a daemon passes its configured ones)
DEFAULT_WAKE_RULES = WakeRules()


#: the schema's signal_weights object: one optional weight per known signal name (on arrival any
#: spelling in ``agent.signal_names.SYNONYMS`` is accepted too, see ``_given_weights``)
RawSignalWeights = create_model(
    "RawSignalWeights",
    __config__=ConfigDict(frozen=True, extra="forbid"),
    **{name: (float | None, None) for name in SIGNAL_NAMES},  # type: ignore[call-overload]
)


class RawDecision(_Strict):
    ticker: str = Field(description="one of the snapshot's tickers, e.g. BTC/USDT")
    action: Literal["BUY", "SELL", "HOLD"]
    position_pct: float = Field(
        ge=0.0, le=1.0, description="target size as a fraction of portfolio value, 0.05-0.20"
    )
    confidence: float = Field(ge=0.0, le=1.0)
    reasoning: str = Field(max_length=4000)
    signal_weights: RawSignalWeights | None = None


class RawWakeCondition(_Strict):
    metric: str
    operator: Literal[
        "lt", "gt", "lte", "gte", "abs_gt", "abs_lt", "crosses_above", "crosses_below"
    ]
    threshold: float
    reason: str


class RawAnswer(_Strict):
    """The schema sent in ``output_config``; also the shape of a fully valid answer."""

    decisions: list[RawDecision]
    market_assessment: str = Field(max_length=4000)
    regime_agreement: bool = Field(description="true when you agree with the regime model's labels")
    regime_agreement_reason: str = Field(max_length=1000)
    learning_note: str = Field(max_length=2000)
    next_check_seconds: int = Field(description="seconds until the next scheduled look, 60-3600")
    wake_conditions: list[RawWakeCondition]
    memory_update: str | None


class _Envelope(_Strict):
    """Structural check: every field present, nothing extra; entries are checked one by one."""

    decisions: list[dict[str, Any]]
    market_assessment: str = Field(max_length=4000)
    regime_agreement: bool | str  # a string (the old free text) is kept as the reason
    regime_agreement_reason: str = Field("", max_length=1000)
    learning_note: str = Field(max_length=2000)
    # any JSON number, clamped on arrival: an int field refused one past 2**63 (1e19, 1e308) or
    # with a fraction, failing the whole answer, and read true or "60" as seconds
    next_check_seconds: StrictInt | StrictFloat
    wake_conditions: list[Any]
    memory_update: str | None


class AnswerInvalid(ValueError):
    """The answer as a whole cannot be used; ``kind`` names the problem for the journal."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class Note(_Strict):
    """One thing the validation changed or dropped."""

    what: str  # "decision", "next_check_seconds", "wake_condition", "memory_update", ...
    ticker: str = ""
    reason: str


def answer_json_schema() -> dict[str, Any]:
    from anthropic import transform_schema  # the SDK loads only when a request is built

    return transform_schema(RawAnswer)


def output_config() -> dict[str, Any]:
    return {"format": {"type": "json_schema", "schema": answer_json_schema()}}


def parse_answer_json(text: str) -> dict[str, Any]:
    """Bytes-level checks: size, JSON, an object at the top."""
    # a lone surrogate (a proxy's body may escape one) cannot be encoded: counted as bytes here,
    # orjson rejects it below as invalid JSON instead of it escaping as an unexpected error
    size = len(text.encode(errors="surrogatepass"))
    if size > MAX_ANSWER_BYTES:
        raise AnswerInvalid("answer_too_large", f"{size} bytes > {MAX_ANSWER_BYTES}")
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise AnswerInvalid("invalid_json", f"{exc}; starts {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise AnswerInvalid("invalid_json", f"top level is {type(data).__name__}, not an object")
    return data


def convert_answer(
    data: Mapping[str, Any],
    *,
    prices: Mapping[str, float | None],
    usage: Usage | None = None,
    decider_reason: str = "claude",
    wake: WakeRules = DEFAULT_WAKE_RULES,
) -> tuple[AgentDecision, list[Note]]:
    """A validated ``AgentDecision`` (decided_by claude) and the notes on what was changed."""
    try:
        envelope = _Envelope.model_validate(dict(data))
    except ValidationError as exc:
        raise AnswerInvalid("schema_mismatch", _brief(exc)) from None
    notes: list[Note] = []
    decisions = _decisions(envelope.decisions, prices, notes)
    next_check = _clamped_next_check(envelope.next_check_seconds, notes)
    conditions = _wake_conditions(envelope.wake_conditions, wake, notes)
    memory = _memory(envelope.memory_update, notes)
    agreement, agreement_reason = _agreement(envelope, notes)
    decision = AgentDecision(
        decisions=tuple(decisions),
        market_assessment=envelope.market_assessment,
        regime_agreement=agreement,
        regime_agreement_reason=agreement_reason,
        learning_note=envelope.learning_note,
        next_check_seconds=next_check,
        wake_conditions=tuple(conditions),
        memory_update=memory,
        decided_by="claude",
        decider_reason=decider_reason,
        usage=usage,
    )
    return decision, notes


def _decisions(
    raw: Sequence[Mapping[str, Any]], prices: Mapping[str, float | None], notes: list[Note]
) -> list[TradeDecision]:
    out: list[TradeDecision] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        # only a text ticker names the entry: str() of a list nested 1,000 deep (as deep as
        # orjson parses) is a RecursionError, and any other value is no ticker anyway
        named = entry.get("ticker")
        label = named[:32] if isinstance(named, str) else f"#{index}"
        try:
            fields = dict(entry)
            given = fields.pop("signal_weights", None)  # any known spelling: read on its own
            item = RawDecision.model_validate(fields)
            ticker = normalize_ticker(item.ticker)
        except (ValidationError, TickerError) as exc:
            notes.append(Note(what="decision", ticker=label, reason=f"dropped: {_brief(exc)}"))
            continue
        problem = _ticker_problem(ticker, item.action, prices, seen)
        if problem:
            notes.append(Note(what="decision", ticker=ticker, reason=f"dropped: {problem}"))
            continue
        seen.add(ticker)
        out.append(_trade_decision(item, ticker, _given_weights(given, ticker, notes), notes))
    return out


def _ticker_problem(
    ticker: str, action: str, prices: Mapping[str, float | None], seen: set[str]
) -> str:
    if ticker not in prices:
        return f"ticker not in the whitelist {sorted(prices)}"
    if ticker in seen:
        return "a second decision for the same ticker"
    price = prices[ticker]
    if action != "HOLD" and (price is None or not price > 0.0):
        return "no current market price"
    return ""


def _trade_decision(
    item: RawDecision, ticker: str, weights: dict[str, float], notes: list[Note]
) -> TradeDecision:
    pct = item.position_pct
    if pct > MAX_POSITION_PCT:
        notes.append(
            Note(
                what="position_pct",
                ticker=ticker,
                reason=f"capped {pct:g} -> {MAX_POSITION_PCT:g}",
            )
        )
        pct = MAX_POSITION_PCT
    if not weights:
        weights = extract_signal_weights(item.reasoning)
        if weights:
            notes.append(
                Note(
                    what="signal_weights",
                    ticker=ticker,
                    reason=f"absent: taken from the reasoning's keywords {sorted(weights)}",
                )
            )
    return TradeDecision(
        ticker=ticker,
        action=Action(item.action),
        position_pct=pct,
        confidence=item.confidence,
        reasoning=item.reasoning,
        signal_weights=weights,
    )


def _given_weights(raw: object, ticker: str, notes: list[Note]) -> dict[str, float]:
    """The answer's ``signal_weights`` under the canonical names (``agent.signal_names``): a
    synonym counts for its signal (two spellings of one signal add up); an unknown name, or a
    weight that is not a finite number or takes its signal's sum past one, is dropped and noted,
    never the whole decision."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        notes.append(Note(what="signal_weights", ticker=ticker, reason="not an object: ignored"))
        return {}
    weights: dict[str, float] = {}
    dropped: list[str] = []
    for name, value in raw.items():
        signal = canonical_signal(str(name))
        if value is None:
            continue
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        total = math.nan if signal is None or number is None else weights.get(signal, 0.0) + number
        if signal is None or not math.isfinite(total):  # a sum of spellings may overflow too
            dropped.append(str(name)[:40])
            continue
        weights[signal] = total
    if dropped:
        notes.append(
            Note(
                what="signal_weights",
                ticker=ticker,
                reason=f"dropped unknown names or non-numbers: {sorted(dropped)}",
            )
        )
    return weights


def extract_signal_weights(reasoning: str) -> dict[str, float]:
    """Equal weights over the signals the reasoning names, summing to 1. Keywords match at a word
    start, so 'trending' counts for momentum but 'extrend' does not."""
    text = reasoning.lower()
    named = [
        signal
        for signal, words in SIGNAL_KEYWORDS.items()
        if any(re.search(rf"\b{re.escape(word)}", text) for word in words)
    ]
    return {signal: 1.0 / len(named) for signal in named} if named else {}


def _agreement(envelope: _Envelope, notes: list[Note]) -> tuple[bool | None, str]:
    """A boolean as asked; free text instead (the old schema) is kept as the reason, the answer
    counted as not saying, and noted."""
    if isinstance(envelope.regime_agreement, bool):
        return envelope.regime_agreement, envelope.regime_agreement_reason
    notes.append(
        Note(what="regime_agreement", reason="free text instead of true/false: kept as the reason")
    )
    text = (envelope.regime_agreement + " " + envelope.regime_agreement_reason).strip()
    return None, text[:1000]


def _clamped_next_check(secs: float, notes: list[Note]) -> int:
    clamped = round(min(max(secs, NEXT_CHECK_MIN_SECS), NEXT_CHECK_MAX_SECS))
    if clamped != secs:
        notes.append(Note(what="next_check_seconds", reason=f"clamped {secs:g} -> {clamped}"))
    return clamped


def _wake_conditions(
    raw: Sequence[Any], wake: WakeRules, notes: list[Note]
) -> list[dict[str, Any]]:
    accepted, rejected = validate_conditions(
        list(raw), registry=wake.registry, max_conditions=wake.max_conditions
    )
    for rejection in rejected:
        notes.append(
            Note(
                what="wake_condition",
                reason=f"rejected #{rejection.index} {rejection.raw}: {rejection.reason}",
            )
        )
    return [condition.model_dump(mode="json") for condition in accepted]


def _memory(update: str | None, notes: list[Note]) -> str | None:
    if update is None:
        return None
    clipped = clip_memory(update.strip())
    if clipped != update.strip():
        notes.append(
            Note(what="memory_update", reason=f"clipped {len(update)} -> {len(clipped)} chars")
        )
    return clipped


def _brief(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = [
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()[:5]
        ]
        more = f" (+{exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        return "; ".join(parts) + more
    return str(exc)

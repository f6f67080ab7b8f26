"""Projection before spending: calls and dollars per day from the settings and a gate rate.

The gate rate is the journal's recent passes per layer (``runner.cost_projection`` reads it) or,
with no journal yet, the rate ``python -m bench cost`` measured. Per layer:
- routine layers (candle close, agent timer): ``1 - unchanged_share`` of the passes call (0 when
  delta gating is off), on the routine model; ``escalated_share`` of those calls are asked again
  of the strong model (entries);
- anomaly, wake, watchdog: every pass calls the strong model;
- reviews: the routine model.
A call's tokens: the system prompt and answer schema (counted from the prompt, ~3.5 characters a
token), cached when the model's minimum cacheable length allows and the TTL is an hour (a
5-minute entry expires between 15-minute passes: counted uncached), the snapshot and the answer
at the sizes the bench measured. The result is an estimate and says so.
"""

from __future__ import annotations

import math

import orjson
from pydantic import BaseModel, ConfigDict

from agent.claude_prompt import decision_system_prompt
from agent.claude_schema import DEFAULT_WAKE_RULES, WakeRules, output_config
from agent.config import AgentConfig

ROUTINE_LAYERS = ("candle_close", "agent_timer")
CHARS_PER_TOKEN = 3.5
#: minimum cacheable prompt per model family (Anthropic's prompt caching docs, 2025-11; Opus 4.6 2026-11)
MIN_CACHEABLE = {"haiku-4": 4096, "opus-4-5": 4096, "opus-4-6": 4096, "haiku-3": 2048}
DEFAULT_MIN_CACHEABLE = 1024


class GateRate(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    passes_per_day: dict[str, float]  # by layer
    reviews_per_day: float
    source: str
    #: of the routine passes, the share decided without a call (None: the measured default)
    unchanged_share: float | None = None


#: ``python -m bench cost`` at default settings: 3 tickers, 7 days from 2025-09-01
MEASURED_RATE = GateRate(
    passes_per_day={"candle_close": 95.4, "agent_timer": 0.6, "anomaly": 35.4},
    reviews_per_day=359.9,
    source="python -m bench cost (3 tickers, 7 days from 2025-09-01)",
)
MEASURED_UNCHANGED_SHARE = 0.75  # 71.6 of 96.0 routine passes a day
MEASURED_ESCALATED_SHARE = 0.02  # 0.5 of 24.5 routine calls a day
SNAPSHOT_TOKENS_PER_TICKER = 430  # 1,296 uncached input tokens a call, 3 tickers
OUTPUT_TOKENS_PER_CALL = 385
REVIEW_TOKENS = (463, 40)  # input (system + positions + context), output


class LayerProjection(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    layer: str
    passes_per_day: float
    calls_per_day: float
    model: str
    usd_per_day: float


class Projection(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    layers: tuple[LayerProjection, ...]
    source: str
    prices_as_of: str

    @property
    def calls_per_day(self) -> float:
        return sum(row.calls_per_day for row in self.layers)

    @property
    def usd_per_day(self) -> float:
        return sum(row.usd_per_day for row in self.layers)

    def text(self, budget: str) -> str:
        models: dict[str, float] = {}
        for row in self.layers:
            models[row.model] = models.get(row.model, 0.0) + row.calls_per_day
        split = ", ".join(f"{calls:.0f} {model}" for model, calls in sorted(models.items()))
        passes = sum(row.passes_per_day for row in self.layers)
        return (
            f"projected Claude use: {passes:.0f} gate passes and reviews a day ({self.source}) -> "
            f"{self.calls_per_day:.0f} calls a day ({split}) -> about ${self.usd_per_day:.2f} a "
            f"day at list prices as of {self.prices_as_of} (an estimate); budget {budget}"
        )


def prefix_tokens(wake: WakeRules = DEFAULT_WAKE_RULES) -> int:
    """The cacheable prefix: the answer schema and the system prompt of ``wake``'s tickers (it
    lists each ticker's metrics: six tickers' prompt is longer than the default three's)."""
    chars = len(orjson.dumps(output_config())) + len(decision_system_prompt(wake))
    return math.ceil(chars / CHARS_PER_TOKEN)


def _min_cacheable(model: str) -> int:
    return next(
        (n for family, n in MIN_CACHEABLE.items() if family in model), DEFAULT_MIN_CACHEABLE
    )


def call_usd(
    config: AgentConfig, model: str, tickers: int, wake: WakeRules = DEFAULT_WAKE_RULES
) -> float:
    price = config.for_model(model)
    prefix = prefix_tokens(wake)
    cached = config.prompt_cache_ttl == "1h" and prefix >= _min_cacheable(model)
    prefix_usd = prefix * (price.cache_read_per_mtok_usd if cached else price.input_per_mtok_usd)
    snapshot_usd = SNAPSHOT_TOKENS_PER_TICKER * tickers * price.input_per_mtok_usd
    return (prefix_usd + snapshot_usd + OUTPUT_TOKENS_PER_CALL * price.output_per_mtok_usd) / 1e6


def project(
    config: AgentConfig, rate: GateRate, tickers: int, wake: WakeRules = DEFAULT_WAKE_RULES
) -> Projection:
    """``wake``: the daemon's tickers' and cap's (``runner.agent_wiring.wake_rules``)."""
    strong = config.model
    routine = config.tiers.routine_model or strong
    skipped = 0.0
    if config.delta.enabled:
        skipped = MEASURED_UNCHANGED_SHARE if rate.unchanged_share is None else rate.unchanged_share
    escalated = (
        MEASURED_ESCALATED_SHARE if config.tiers.escalate_entries and routine != strong else 0.0
    )
    rows = []
    for layer, passes in sorted(rate.passes_per_day.items()):
        if layer in ROUTINE_LAYERS:
            calls = passes * (1.0 - skipped)
            usd = calls * (
                call_usd(config, routine, tickers, wake)
                + escalated * call_usd(config, strong, tickers, wake)
            )
            rows.append(
                LayerProjection(
                    layer=layer,
                    passes_per_day=passes,
                    calls_per_day=calls,
                    model=routine,
                    usd_per_day=usd,
                )
            )
        else:
            usd = passes * call_usd(config, strong, tickers, wake)
            rows.append(
                LayerProjection(
                    layer=layer,
                    passes_per_day=passes,
                    calls_per_day=passes,
                    model=strong,
                    usd_per_day=usd,
                )
            )
    review_price = config.for_model(routine)
    review_usd = (
        REVIEW_TOKENS[0] * review_price.input_per_mtok_usd
        + REVIEW_TOKENS[1] * review_price.output_per_mtok_usd
    ) / 1e6
    rows.append(
        LayerProjection(
            layer="review",
            passes_per_day=rate.reviews_per_day,
            calls_per_day=rate.reviews_per_day,
            model=routine,
            usd_per_day=rate.reviews_per_day * review_usd,
        )
    )
    return Projection(layers=tuple(rows), source=rate.source, prices_as_of=config.prices.as_of)

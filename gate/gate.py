"""The AdaptiveGate: on every tick, is the market worth a decision now?

Four layers, checked on every tick; the gate passes when one holds:

1. ``candle_close``: a closed candle always passes, even during the cooldown.
2. ``agent_timer``: the time the agent asked to be woken at (``next_check_at_ms``) has come. It
   fires once per setting; it then re-arms at ``default_next_check_secs`` so the daemon never goes
   silent if no decision sets it again.
3. ``anomaly``: the tick's ticker has ``|return z-score| >= anomaly_zscore``.
4. ``wake_condition``: one of the agent's wake conditions holds (see ``gate.compiled``).

Every pass starts the cooldown: for ``cooldown_secs`` only candle closes pass; the other layers are
denied and counted as cooldown denials. A due timer, a lasting anomaly or a still-holding condition
passes as soon as the cooldown ends. Every pass carries all the reasons that held (the decision's
``gate_wake_reasons``). Per layer, ``stats()`` counts each evaluation's outcome.

Durations run on the clock's monotonic reading; ``next_check_at_ms`` is reported in epoch ms.

Hot path: a tick on which nothing passes allocates no objects beyond counters (the denial verdicts
are shared constants); wake conditions are compiled once per agent update. ``bench/bench_gate.py``
measures it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.clock import Clock
from core.events import MarketTick
from gate.compiled import HELD, UNAVAILABLE, CompiledConditions
from gate.conditions import (
    MAX_WAKE_CONDITIONS,
    METRICS,
    MetricSpec,
    Rejection,
    WakeCondition,
    render_raw,
    validate_conditions,
)
from gate.metrics import MetricSource
from market.features import TickFeatures

log = logging.getLogger(__name__)


class GateConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    anomaly_zscore: float = Field(2.0, gt=0, allow_inf_nan=False)
    cooldown_secs: float = Field(120.0, ge=0, allow_inf_nan=False)
    min_next_check_secs: float = Field(60.0, gt=0, allow_inf_nan=False)
    max_next_check_secs: float = Field(3600.0, gt=0, allow_inf_nan=False)
    default_next_check_secs: float = Field(900.0, gt=0, allow_inf_nan=False)
    max_wake_conditions: int = Field(MAX_WAKE_CONDITIONS, ge=0, le=50)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not (
            self.min_next_check_secs <= self.default_next_check_secs <= self.max_next_check_secs
        ):
            raise ValueError(
                "need min_next_check_secs <= default_next_check_secs <= max_next_check_secs, got "
                f"{self.min_next_check_secs} / {self.default_next_check_secs} / "
                f"{self.max_next_check_secs}"
            )
        return self


class Layer(StrEnum):
    """The gate's layers, in the order a pass names the one that decided."""

    CANDLE_CLOSE = "candle_close"
    AGENT_TIMER = "agent_timer"
    ANOMALY = "anomaly"
    WAKE_CONDITION = "wake_condition"
    COOLDOWN = "cooldown"  # only on denials: something held but the cooldown ran


class GateVerdict(BaseModel):
    """``layer``: on a pass, the first layer that held; on a denial, COOLDOWN if something held
    during the cooldown, else None. ``reasons`` (passes only) lists everything that held."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    passed: bool
    layer: Layer | None = None
    reasons: tuple[str, ...] = ()


#: the denials, shared so a quiet tick allocates nothing
QUIET = GateVerdict(passed=False)
COOLING_DOWN = GateVerdict(passed=False, layer=Layer.COOLDOWN)


class LayerStats(BaseModel):
    """One layer's outcome over all evaluations (the four add up to ``GateStats.evaluations``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    passed: int = 0  # held, and the gate passed
    cooldown: int = 0  # held, denied by the cooldown
    quiet: int = 0  # did not hold
    unavailable: int = 0  # could not be checked: no z-score / only metrics without a value


class GateStats(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    evaluations: int
    passes: int
    candle_close: LayerStats
    agent_timer: LayerStats
    anomaly: LayerStats
    wake_condition: LayerStats
    #: condition checks that found no value, by metric
    unavailable_metrics: dict[str, int]
    agent_updates: int
    next_check_adjusted: int
    conditions_accepted: int
    conditions_rejected: int
    last_pass_at_ms: int | None
    last_wake_reasons: tuple[str, ...]


class GateUpdate(BaseModel):
    """What ``update_from_agent`` applied, and what it changed or refused."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    at_ms: int
    next_check_secs: float
    next_check_at_ms: int
    next_check_requested: str  # the agent's value, rendered
    next_check_adjustment: str  # "" when used as asked, else what was done and why
    accepted: tuple[WakeCondition, ...]
    rejected: tuple[Rejection, ...]

    @property
    def adjusted(self) -> bool:
        return bool(self.next_check_adjustment)


class AdaptiveGate:
    def __init__(
        self,
        clock: Clock,
        config: GateConfig | None = None,
        *,
        registry: Mapping[str, MetricSpec] = METRICS,
    ) -> None:
        self._clock = clock
        self.config = config or GateConfig()
        self.registry = registry
        self._cooldown_secs = self.config.cooldown_secs
        self._z_limit = self.config.anomaly_zscore
        self._neg_z_limit = -self.config.anomaly_zscore
        self._conditions = CompiledConditions(())
        self._cooldown_until = -math.inf  # monotonic secs
        self._next_check_due = math.inf  # monotonic secs
        self._next_check_at_ms = 0
        self._arm_timer(self.config.default_next_check_secs)
        self._last_pass_at_ms: int | None = None
        self._last_wake_reasons: tuple[str, ...] = ()
        # counters: evaluations and the non-quiet outcomes per layer ("quiet" is the rest)
        self._evaluations = 0
        self._passes = 0
        self._closes = 0
        self._timer_passed = self._timer_cooldown = 0
        self._anomaly_passed = self._anomaly_cooldown = self._anomaly_unavailable = 0
        self._wake_passed = self._wake_cooldown = self._wake_unavailable = 0
        self._unavailable_retired: dict[str, int] = {}  # from conditions since replaced
        self._agent_updates = self._next_check_adjusted = 0
        self._conditions_accepted = self._conditions_rejected = 0

    # -- the hot path ---------------------------------------------------------------------------

    def evaluate(
        self, tick: MarketTick, features: TickFeatures | None, metrics: MetricSource
    ) -> GateVerdict:
        """Decide on ``tick``; ``features`` are its ticker's, ``metrics`` feed the conditions."""
        self._evaluations += 1
        now = self._clock.monotonic_secs()
        cooling = now < self._cooldown_until
        closed = tick.closed
        timer_due = now >= self._next_check_due
        zscore = None if features is None else features.return_zscore
        if zscore is None:
            anomalous = False
            self._anomaly_unavailable += 1
        else:
            anomalous = zscore >= self._z_limit or zscore <= self._neg_z_limit
        woken = False
        if self._conditions.all:
            outcome = self._conditions.check(metrics.get, closed or not cooling)
            woken = outcome == HELD
            if outcome == UNAVAILABLE:
                self._wake_unavailable += 1
        if closed or (not cooling and (timer_due or anomalous or woken)):
            return self._pass(tick, zscore, now, timer_due, anomalous, woken, metrics)
        if timer_due or anomalous or woken:
            self._timer_cooldown += timer_due
            self._anomaly_cooldown += anomalous
            self._wake_cooldown += woken
            return COOLING_DOWN
        return QUIET

    def _pass(
        self,
        tick: MarketTick,
        zscore: float | None,
        now: float,
        timer_due: bool,
        anomalous: bool,
        woken: bool,
        metrics: MetricSource,
    ) -> GateVerdict:
        reasons: list[str] = []
        layer: Layer | None = None
        if tick.closed:
            self._closes += 1
            reasons.append(f"candle_close:{tick.ticker}:{tick.timeframe}")
            layer = Layer.CANDLE_CLOSE
        if timer_due:
            self._timer_passed += 1
            reasons.append("agent_timer")
            layer = layer or Layer.AGENT_TIMER
            # fired once for this setting; until a decision sets it again, never go silent
            self._arm_timer(self.config.default_next_check_secs)
        if anomalous:
            self._anomaly_passed += 1
            reasons.append(f"anomaly:{tick.ticker}:z={zscore:.2f}")
            layer = layer or Layer.ANOMALY
        if woken:
            self._wake_passed += 1
            reasons.extend(self._conditions.held_reasons(metrics.get))
            layer = layer or Layer.WAKE_CONDITION
        self._passes += 1
        self._cooldown_until = now + self._cooldown_secs
        self._last_pass_at_ms = self._clock.now_ms()
        self._last_wake_reasons = tuple(reasons)
        log.debug("gate passed: %s", ", ".join(reasons))
        return GateVerdict(passed=True, layer=layer, reasons=self._last_wake_reasons)

    # -- the agent's schedule -------------------------------------------------------------------

    def update_from_agent(self, next_check_seconds: object, wake_conditions: object) -> GateUpdate:
        """Apply a decision's schedule: the timer (clamped) and the wake conditions (replaced).

        Both arguments are untrusted model output. A missing, non-numeric or NaN
        ``next_check_seconds`` uses ``default_next_check_secs``; one outside the configured range
        (infinities included) is clamped. Conditions that fail validation are dropped and logged with the reason.
        """
        secs, adjustment = self._next_check_secs(next_check_seconds)
        accepted, rejected = validate_conditions(
            wake_conditions,
            registry=self.registry,
            max_conditions=self.config.max_wake_conditions,
        )
        for rejection in rejected:
            log.warning(
                "wake condition #%d rejected: %s; got %s",
                rejection.index,
                rejection.reason,
                rejection.raw,
            )
        self._retire(self._conditions)
        self._conditions = CompiledConditions(accepted, carry_from=self._conditions)
        self._arm_timer(secs)
        self._agent_updates += 1
        self._next_check_adjusted += bool(adjustment)
        self._conditions_accepted += len(accepted)
        self._conditions_rejected += len(rejected)
        return GateUpdate(
            at_ms=self._clock.now_ms(),
            next_check_secs=secs,
            next_check_at_ms=self._next_check_at_ms,
            next_check_requested=render_raw(next_check_seconds),
            next_check_adjustment=adjustment,
            accepted=tuple(accepted),
            rejected=tuple(rejected),
        )

    def _next_check_secs(self, requested: object) -> tuple[float, str]:
        cfg = self.config
        default = cfg.default_next_check_secs
        if requested is None:
            return default, f"not given: default {default:g} s"
        if isinstance(requested, bool) or not isinstance(requested, int | float):
            log.warning(
                "next_check_seconds %s is not a number: default %g s used",
                render_raw(requested),
                default,
            )
            return default, f"not a number: default {default:g} s"
        try:
            value = float(requested)
        except OverflowError:  # an int too large for a float is still "later than the maximum"
            value = math.inf if requested > 0 else -math.inf
        if math.isnan(value):
            log.warning("next_check_seconds is NaN: default %g s used", default)
            return default, f"not a number (nan): default {default:g} s"
        if value < cfg.min_next_check_secs:
            log.info("next_check_seconds %g clamped to %g s", value, cfg.min_next_check_secs)
            return cfg.min_next_check_secs, (
                f"clamped from {value:g} to the minimum {cfg.min_next_check_secs:g} s"
            )
        if value > cfg.max_next_check_secs:
            log.info("next_check_seconds %g clamped to %g s", value, cfg.max_next_check_secs)
            return cfg.max_next_check_secs, (
                f"clamped from {value:g} to the maximum {cfg.max_next_check_secs:g} s"
            )
        return value, ""

    def _arm_timer(self, secs: float) -> None:
        self._next_check_due = self._clock.monotonic_secs() + secs
        self._next_check_at_ms = self._clock.now_ms() + round(secs * 1000.0)

    def _retire(self, conditions: CompiledConditions) -> None:
        for c in conditions.all:
            if c.unavailable:
                retired = self._unavailable_retired
                retired[c.metric] = retired.get(c.metric, 0) + c.unavailable

    # -- reading --------------------------------------------------------------------------------

    @property
    def next_check_at_ms(self) -> int:
        """When the agent timer is due (epoch ms)."""
        return self._next_check_at_ms

    @property
    def wake_conditions(self) -> tuple[WakeCondition, ...]:
        return tuple(c.condition for c in self._conditions.all)

    @property
    def last_wake_reasons(self) -> tuple[str, ...]:
        """The reasons of the latest pass (the next decision's ``gate_wake_reasons``)."""
        return self._last_wake_reasons

    @property
    def in_cooldown(self) -> bool:
        return self._clock.monotonic_secs() < self._cooldown_until

    def stats(self) -> GateStats:
        n = self._evaluations
        unavailable = dict(self._unavailable_retired)
        for c in self._conditions.all:
            if c.unavailable:
                unavailable[c.metric] = unavailable.get(c.metric, 0) + c.unavailable
        return GateStats(
            evaluations=n,
            passes=self._passes,
            candle_close=LayerStats(passed=self._closes, quiet=n - self._closes),
            agent_timer=_layer(n, self._timer_passed, self._timer_cooldown, 0),
            anomaly=_layer(
                n, self._anomaly_passed, self._anomaly_cooldown, self._anomaly_unavailable
            ),
            wake_condition=_layer(
                n, self._wake_passed, self._wake_cooldown, self._wake_unavailable
            ),
            unavailable_metrics=unavailable,
            agent_updates=self._agent_updates,
            next_check_adjusted=self._next_check_adjusted,
            conditions_accepted=self._conditions_accepted,
            conditions_rejected=self._conditions_rejected,
            last_pass_at_ms=self._last_pass_at_ms,
            last_wake_reasons=self._last_wake_reasons,
        )


def _layer(evaluations: int, passed: int, cooldown: int, unavailable: int) -> LayerStats:
    return LayerStats(
        passed=passed,
        cooldown=cooldown,
        unavailable=unavailable,
        quiet=evaluations - passed - cooldown - unavailable,
    )


__all__ = [
    "COOLING_DOWN",
    "QUIET",
    "AdaptiveGate",
    "GateConfig",
    "GateStats",
    "GateUpdate",
    "GateVerdict",
    "Layer",
    "LayerStats",
]

"""DerivativesMonitor: polls the derivatives and context sources with an adaptive cadence.

Every ``normal_interval_secs`` (5 min) it reads every ``ContextField`` (each a ``CachedSource`` with
its own TTL, timeout and backoff), computes the ``DerivativesSignal``, publishes
``derivatives.update``, feeds the gate's ``MetricBoard`` and keeps the reading for the snapshot
(``DerivativesContext``). When any funding rate is beyond +/- ``fast_funding_abs`` (0.05 %) or open
interest moved more than ``fast_open_interest_change_pct`` (10 %, over 24 h) it polls every
``fast_interval_secs`` (1 min) and goes back to 5 min after ``quiet_secs_before_slowing`` (15 min)
without either. Both signs of funding count: extreme negative funding is as notable as positive.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from core.bus import EventBus
from core.clock import Clock
from core.events import DerivativesUpdate
from derivatives.cache import Cached
from derivatives.config import DerivativesConfig
from derivatives.fields import CONTEXT_FIELDS
from derivatives.signal import DerivativesSignal, SignalInputs, derivatives_signal
from gate.conditions import metric_prefix

log = logging.getLogger(__name__)

NOT_POLLED = "the derivatives monitor has not polled yet"
NOT_WIRED = "no source configured for this field"


class FieldReader(Protocol):
    name: str

    async def read(self) -> Cached[Any]: ...


@dataclass(frozen=True)
class ContextField:
    """One snapshot field (one of ``CONTEXT_FIELDS``) and the cached source that fills it."""

    field: str
    source: FieldReader

    def __post_init__(self) -> None:
        if self.field not in CONTEXT_FIELDS:
            raise ValueError(f"{self.field!r} is not a snapshot context field: {CONTEXT_FIELDS}")


class MetricSink(Protocol):
    def update(self, values: Mapping[str, float | None]) -> None: ...


@dataclass
class DerivativesReading:
    """The latest poll: values of the context fields, a reason for each missing one.

    A plain (mutable) dataclass so it satisfies ``agent.snapshot_builder.ContextReading``; the
    monitor never changes a reading once published (``DerivativesContext`` hands out copies).
    """

    at_ms: int
    values: Mapping[str, Any] = field(default_factory=dict)
    unavailable: Mapping[str, str] = field(default_factory=dict)
    stale_fields: Mapping[str, int] = field(default_factory=dict)  # field -> fetched_at_ms
    signal: DerivativesSignal | None = None
    fast: bool = False


class DerivativesMonitor:
    def __init__(
        self,
        clock: Clock,
        bus: EventBus,
        fields: Sequence[ContextField],
        *,
        board: MetricSink | None = None,
        config: DerivativesConfig | None = None,
        rand: Callable[[], float] = random.random,
    ) -> None:
        names = [f.field for f in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"a context field has two sources: {names}")
        if "derivatives_signal" in names:
            raise ValueError(
                "derivatives_signal is computed by the monitor, not read from a source"
            )
        self._clock = clock
        self._bus = bus
        self._fields = tuple(fields)
        #: each source's ``answer_now`` (None for a reader without one: always read)
        self._peeks: tuple[Callable[[], Cached[Any] | None] | None, ...] = tuple(
            getattr(f.source, "answer_now", None) for f in self._fields
        )
        self._board = board
        self.config = config or DerivativesConfig()
        self._rand = rand
        self._last_hot_mono: float | None = None
        self._signal = SignalMemo()
        self._board_metrics = BoardMemo()
        self.latest: DerivativesReading | None = None
        self.polls = 0

    async def run(self) -> None:
        """Poll forever on the adaptive cadence; a failed poll is logged and backed off."""
        failures = 0
        while True:
            try:
                await self.poll_once()
                failures = 0
                delay = self.next_interval_secs()
            except asyncio.CancelledError:
                raise
            except Exception:
                cfg = self.config
                delay = cfg.loop_backoff.delay_secs(failures, self._rand())
                failures += 1
                log.exception(
                    "derivatives poll failed (%d in a row); next in %.0f s", failures, delay
                )
            await self._clock.sleep(delay)

    def next_interval_secs(self) -> float:
        cfg = self.config
        if self._last_hot_mono is None:
            return cfg.normal_interval_secs
        quiet_for = self._clock.monotonic_secs() - self._last_hot_mono
        return (
            cfg.fast_interval_secs
            if quiet_for < cfg.quiet_secs_before_slowing
            else cfg.normal_interval_secs
        )

    async def poll_once(self) -> DerivativesReading:
        cached = await self._read_fields()
        values: dict[str, Any] = {}
        unavailable: dict[str, str] = {}
        stale: dict[str, int] = {}
        for spec, got in zip(self._fields, cached, strict=True):
            if got.value is None:
                unavailable[spec.field] = got.reason or "no value"
                continue
            values[spec.field] = got.value
            if got.stale and got.fetched_at_ms is not None:
                stale[spec.field] = got.fetched_at_ms
        for name in CONTEXT_FIELDS:
            if name not in values and name not in unavailable and name != "derivatives_signal":
                unavailable[name] = NOT_WIRED
        signal = self._signal(values)
        if signal.value is None:
            unavailable["derivatives_signal"] = signal.reason or "no inputs"
        else:
            values["derivatives_signal"] = signal.value
        if self._is_hot(values):
            self._last_hot_mono = self._clock.monotonic_secs()
        reading = DerivativesReading(
            at_ms=self._clock.now_ms(),
            values=values,
            unavailable=unavailable,
            stale_fields=stale,
            signal=signal,
            fast=self.next_interval_secs() == self.config.fast_interval_secs,
        )
        self.latest = reading
        self.polls += 1
        self._feed_board(reading.values)
        self._bus.publish(
            DerivativesUpdate(
                at_ms=reading.at_ms,
                values={
                    **reading.values,
                    "stale_fields": dict(reading.stale_fields),
                    "signal_inputs_used": {t: list(u) for t, u in signal.inputs_used.items()},
                    "fast_cadence": reading.fast,
                },
                unavailable=dict(reading.unavailable),
            )
        )
        return reading

    async def _read_fields(self) -> list[Cached[Any]]:
        """Every field's answer, read concurrently (a gather), in field order.

        A source that has its answer at hand (``CachedSource.answer_now``: settled for good, as
        when the recording lacks it, or a value within its TTL) gets no task: its read would
        return that very answer without suspending or changing anything, and the gather of the
        others still ends on the loop turn it would have (the last read's), so the run is the
        same minus the tasks. The answer is taken as the poll starts, not on the tasks' first
        turn: a replay's clock does not move while tasks are ready to run. With no other source
        the gather is kept whole: an empty one would not yield to the loop at all."""
        at_hand = [None if peek is None else peek() for peek in self._peeks]
        live = [f.source for f, answer in zip(self._fields, at_hand, strict=True) if answer is None]
        if not live:
            return list(await asyncio.gather(*(f.source.read() for f in self._fields)))
        read = iter(await asyncio.gather(*(source.read() for source in live)))
        return [answer if answer is not None else next(read) for answer in at_hand]

    def _is_hot(self, values: Mapping[str, Any]) -> bool:
        cfg = self.config
        funding = values.get("funding_rates") or {}
        if any(abs(rate) > cfg.fast_funding_abs for rate in funding.values()):
            return True
        oi = values.get("open_interest") or {}
        changes = [e.get("change_24h_pct") for e in oi.values()]
        return any(c is not None and abs(c) > cfg.fast_open_interest_change_pct for c in changes)

    def _feed_board(self, values: Mapping[str, Any]) -> None:
        if self._board is None:
            return
        metrics = self._board_metrics(values)
        try:
            self._board.update(metrics)
        except ValueError:  # a ticker outside the metric table: keep the market-wide metrics
            log.warning(
                "derivatives metrics outside the metric table; updating market-wide ones only"
            )
            market_wide = (
                "funding_rate",
                "open_interest_change_pct",
                "long_short_ratio",
                "fear_greed",
            )
            self._board.update({k: v for k, v in metrics.items() if k in market_wide})


class DerivativesContext:
    """``ContextSource`` for the snapshot builder: the monitor's latest reading, read-only."""

    name = "derivatives"

    def __init__(self, monitor: DerivativesMonitor) -> None:
        self._monitor = monitor

    async def read(self) -> DerivativesReading:
        return self.read_now()

    def read_now(self) -> DerivativesReading:
        """``read``, which never waits: the reading is in memory (the builder arms no timeout)."""
        latest = self._monitor.latest
        if latest is None:
            return DerivativesReading(
                at_ms=0, unavailable={name: NOT_POLLED for name in CONTEXT_FIELDS}
            )
        return DerivativesReading(
            at_ms=latest.at_ms,
            values=dict(latest.values),
            unavailable=dict(latest.unavailable),
            stale_fields=dict(latest.stale_fields),
            signal=latest.signal,
            fast=latest.fast,
        )


class SignalMemo:
    """``derivatives_signal(signal_inputs(values))``, the last signal again while its inputs are
    the last ones: funding rates under the very same ticker and rate objects (a recorded source
    hands out the same floats until a settlement), and neither taker flow nor long/short
    positioning (a recording has neither). ~13 us a poll otherwise, at every poll of a replay.
    The signal is shared between readings as a reading's is with its copies: nobody changes one."""

    def __init__(self) -> None:
        self._rates: list[tuple[str, float]] = []
        self._signal: DerivativesSignal | None = None

    def __call__(self, values: Mapping[str, Any]) -> DerivativesSignal:
        funding = values.get("funding_rates")
        if type(funding) is not dict or values.get("taker_delta") or values.get("long_short_ratio"):
            self._signal = None
            return derivatives_signal(signal_inputs(values))
        signal, rates = self._signal, self._rates
        if signal is not None and _same_objects(funding, rates):
            return signal
        self._signal = signal = derivatives_signal(signal_inputs(values))
        self._rates = list(funding.items())
        return signal


def _same_objects(funding: dict[Any, Any], kept: list[tuple[str, Any]]) -> bool:
    """The funding rates are the very ones kept: the same ticker and rate objects, in order."""
    return len(funding) == len(kept) and all(
        t is t0 and r is r0 for (t, r), (t0, r0) in zip(funding.items(), kept, strict=True)
    )


class BoardMemo:
    """``board_metrics(values)``, the last metrics again while their inputs are the last ones: the
    funding rates under the very same ticker and rate objects, a Fear & Greed value of the same
    type and equal to the sign, and neither open interest nor long/short positioning (a recording
    has neither). ~2 us a poll otherwise. The metrics are handed out again, not copied: the board
    copies what it keeps, and nobody changes them."""

    def __init__(self) -> None:
        self._rates: list[tuple[str, Any]] = []
        self._fear_greed: Any = None
        self._metrics: dict[str, float | None] | None = None

    def __call__(self, values: Mapping[str, Any]) -> dict[str, float | None]:
        funding = values.get("funding_rates") or {}
        fear_greed = values.get("fear_greed") or {}
        if (
            type(funding) is not dict
            or type(fear_greed) is not dict
            or values.get("open_interest")
            or values.get("long_short_ratio")
        ):
            self._metrics = None
            return board_metrics(values)
        value = fear_greed.get("value", _ABSENT)
        metrics, rates = self._metrics, self._rates
        if (
            metrics is not None
            and _same_objects(funding, rates)
            and _same_value(value, self._fear_greed)
        ):
            return metrics
        self._metrics = metrics = board_metrics(values)
        self._rates = list(funding.items())
        self._fear_greed = value
        return metrics


_ABSENT: Final = object()


def _same_value(value: Any, was: Any) -> bool:
    """The same object, or an int, float or str of the same type, equal (to the sign)."""
    if value is was:
        return True
    kind = type(value)
    if kind is not type(was) or kind not in (int, float, str) or value != was:
        return False
    return kind is not float or math.copysign(1.0, value) == math.copysign(1.0, was)


def signal_inputs(values: Mapping[str, Any]) -> dict[str, SignalInputs]:
    """Per-ticker signal inputs from the context fields' values (missing ones stay None)."""
    funding: Mapping[str, float] = values.get("funding_rates") or {}
    taker: Mapping[str, Mapping[str, Any]] = values.get("taker_delta") or {}
    long_short: Mapping[str, Mapping[str, Any]] = values.get("long_short_ratio") or {}
    tickers = sorted(set(funding) | set(taker) | set(long_short))
    return {
        t: SignalInputs(
            funding_rate=funding.get(t),
            taker_ratio=(taker.get(t) or {}).get("buy_sell_ratio"),
            long_short_z=(long_short.get(t) or {}).get("zscore"),
        )
        for t in tickers
    }


def board_metrics(values: Mapping[str, Any]) -> dict[str, float | None]:
    """The gate's derivatives and sentiment metrics; None where the input is missing."""
    funding: Mapping[str, float] = values.get("funding_rates") or {}
    metrics: dict[str, float | None] = {
        f"{metric_prefix(t)}_funding_rate": r for t, r in funding.items()
    }
    metrics["funding_rate"] = _mean(funding.values())
    oi: Mapping[str, Mapping[str, Any]] = values.get("open_interest") or {}
    now_usd = sum(e.get("value_usd") or 0.0 for e in oi.values())
    then_usd = sum(e.get("first_value_usd") or 0.0 for e in oi.values())
    metrics["open_interest_change_pct"] = (
        (now_usd / then_usd - 1.0) * 100.0 if then_usd > 0 else None
    )
    long_short: Mapping[str, Mapping[str, Any]] = values.get("long_short_ratio") or {}
    metrics["long_short_ratio"] = _mean(e["ratio"] for e in long_short.values() if "ratio" in e)
    fear_greed = values.get("fear_greed") or {}
    metrics["fear_greed"] = float(fear_greed["value"]) if "value" in fear_greed else None
    return metrics


def _mean(values: Any) -> float | None:
    items = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return sum(items) / len(items) if items else None


__all__ = [
    "BoardMemo",
    "ContextField",
    "DerivativesContext",
    "DerivativesMonitor",
    "DerivativesReading",
    "SignalMemo",
    "board_metrics",
    "signal_inputs",
]

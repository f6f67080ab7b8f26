"""Agent wake conditions: the metric registry, the condition model and validation of model output.

A wake condition is ``{metric, operator, threshold, reason}`` sent by the agent (Claude or the
rule-based fallback). It comes from a language model, so everything about it is untrusted: the
metric must be in ``METRICS``, the operator one of the eight ``Operator`` names, the threshold a
finite number, the reason short plain text. ``validate_conditions`` never raises on bad input: it
sorts entries into accepted ``WakeCondition`` s and ``Rejection`` s that say why.

``METRICS`` is the single table of metric names the agent may use; ``describe_metrics`` prints it
for the prompt. Which of them has a value right now is the ``MetricSource``'s business: a condition
over a metric without a value simply does not hold.
"""

from __future__ import annotations

import difflib
import math
import re
import reprlib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

#: the tickers the daemon trades by default (runner.config.MarketConfig.tickers)
DEFAULT_TICKERS: Final = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
#: the agent may set at most this many conditions at once (more is a prompt going wrong)
MAX_WAKE_CONDITIONS: Final = 10
#: reason text is echoed into logs, journals and the next prompt: keep it one short line
REASON_MAX_CHARS: Final = 160
METRIC_NAME_MAX_CHARS: Final = 64
METRIC_NAME: Final = re.compile(rf"[a-z0-9_]{{1,{METRIC_NAME_MAX_CHARS}}}")


class Operator(StrEnum):
    LT = "lt"
    GT = "gt"
    LTE = "lte"
    GTE = "gte"
    ABS_GT = "abs_gt"
    ABS_LT = "abs_lt"
    CROSSES_ABOVE = "crosses_above"  # previous <= threshold < current
    CROSSES_BELOW = "crosses_below"  # previous >= threshold > current


CROSSING_OPERATORS: Final = frozenset({Operator.CROSSES_ABOVE, Operator.CROSSES_BELOW})
ABS_OPERATORS: Final = frozenset({Operator.ABS_GT, Operator.ABS_LT})

MetricOrigin = Literal["tick", "derivatives", "sentiment"]


class MetricSpec(BaseModel):
    """One row of the metric table."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    unit: str
    description: str
    origin: MetricOrigin


def metric_prefix(ticker: str) -> str:
    """``BTC/USDT`` (or ``BTC/USDT:USDT``) -> ``btc``: the prefix of that ticker's metric names."""
    base, _, _ = ticker.partition("/")
    if not base:
        raise ValueError(f"not a BASE/QUOTE ticker: {ticker!r}")
    return base.lower()


#: per-ticker metrics read from ``market.features.TickFeatures``: (suffix, feature field, unit, what)
TICK_METRICS: Final = (
    ("price", "price", "USDT", "last traded price of {t}"),
    ("change_1h_pct", "change_1h_pct", "%", "{t} price change over the last 1 h"),
    ("change_4h_pct", "change_4h_pct", "%", "{t} price change over the last 4 h"),
    ("change_24h_pct", "change_24h_pct", "%", "{t} price change over the last 24 h"),
    (
        "return_zscore",
        "return_zscore",
        "std devs",
        "{t} return since the last 15m close, standardised by the recent 15m returns",
    ),
    (
        "volume_ratio",
        "volume_ratio",
        "x",
        "{t} forming 15m candle volume (pro-rated) over the mean of recent closed 15m volumes",
    ),
)


def build_metric_registry(tickers: Iterable[str] = DEFAULT_TICKERS) -> dict[str, MetricSpec]:
    """The metric table for ``tickers``: per-ticker tick and funding metrics, then market-wide."""
    rows: list[MetricSpec] = []
    for ticker in tickers:
        prefix = metric_prefix(ticker)
        rows.extend(
            MetricSpec(
                name=f"{prefix}_{suffix}",
                unit=unit,
                description=what.format(t=ticker),
                origin="tick",
            )
            for suffix, _, unit, what in TICK_METRICS
        )
        rows.append(
            MetricSpec(
                name=f"{prefix}_funding_rate",
                unit="fraction per 8 h",
                description=f"{ticker} perpetual funding rate (0.0001 = 0.01 %)",
                origin="derivatives",
            )
        )
    rows += [
        MetricSpec(
            name="funding_rate",
            unit="fraction per 8 h",
            description="mean funding rate over the traded tickers",
            origin="derivatives",
        ),
        MetricSpec(
            name="open_interest_change_pct",
            unit="%",
            description="change of total open interest over the traded tickers, last 24 h",
            origin="derivatives",
        ),
        MetricSpec(
            name="long_short_ratio",
            unit="ratio",
            description="accounts long / accounts short (top traders), mean over traded tickers",
            origin="derivatives",
        ),
        MetricSpec(
            name="fear_greed",
            unit="index 0-100",
            description="crypto Fear & Greed index (0 extreme fear, 100 extreme greed), daily",
            origin="sentiment",
        ),
    ]
    bad = [row.name for row in rows if not METRIC_NAME.fullmatch(row.name)]
    if bad:
        raise ValueError(f"metric names must be lowercase letters, digits and _: {bad}")
    registry = {row.name: row for row in rows}
    if len(registry) != len(rows):
        raise ValueError(f"two tickers share a metric prefix: {list(tickers)}")
    return registry


#: the metric table for the default tickers
METRICS: Final[Mapping[str, MetricSpec]] = MappingProxyType(build_metric_registry())


def describe_metrics(registry: Mapping[str, MetricSpec] = METRICS) -> str:
    """The table as prompt text, one ``name (unit): description`` line per metric."""
    return "\n".join(f"{m.name} ({m.unit}): {m.description}" for m in registry.values())


class WakeCondition(BaseModel):
    """Wake the agent when ``metric operator threshold`` holds (see ``Operator``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    metric: str = Field(pattern=rf"^{METRIC_NAME.pattern}$")
    operator: Operator
    threshold: float = Field(strict=True, allow_inf_nan=False)
    reason: str = Field("", max_length=REASON_MAX_CHARS)

    def describe(self) -> str:
        """``btc_price lt 90000 (reason)``: how a wake reason names this condition."""
        text = f"{self.metric} {self.operator.value} {format_threshold(self.threshold)}"
        return f"{text} ({self.reason})" if self.reason else text


def format_threshold(value: float) -> str:
    """Short but exact enough to recognise: 90000, 0.0001, 123456.789."""
    return format(value, ".12g")


class Rejection(BaseModel):
    """A wake condition that was not set, and why. ``raw`` is a shortened rendering of the input."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    index: int
    raw: str
    reason: str


_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxdict = 6
_REPR.maxlist = 6
_REPR.maxlevel = 2
_RAW_MAX_CHARS = 240
_FIELDS: Final = frozenset({"metric", "operator", "threshold", "reason"})


def render_raw(raw: object) -> str:
    """A bounded, single-line rendering of untrusted input for logs and rejections."""
    return _clip(_REPR.repr(raw).replace("\n", "\\n"), _RAW_MAX_CHARS)


def clean_reason(text: str) -> str:
    """One line of printable text: control/format characters dropped, whitespace collapsed, clipped."""
    kept = "".join(" " if ch.isspace() else ch for ch in text if _printable(ch))
    return _clip(" ".join(kept.split()), REASON_MAX_CHARS)


def _printable(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch)[0] != "C"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def validate_conditions(
    raw: object,
    *,
    registry: Mapping[str, MetricSpec] = METRICS,
    max_conditions: int = MAX_WAKE_CONDITIONS,
) -> tuple[list[WakeCondition], list[Rejection]]:
    """Sort untrusted entries (mappings or ``WakeCondition`` s) into accepted and rejected.

    ``raw`` should be a list of ``{metric, operator, threshold, reason}``; anything else is
    rejected as a whole. Duplicates (same metric, operator and threshold) and entries beyond
    ``max_conditions`` accepted ones are rejected too. Never raises on bad input.
    """
    if raw is None:
        return [], []
    if isinstance(raw, str | bytes | Mapping) or not isinstance(raw, Sequence):
        return [], [
            Rejection(index=0, raw=render_raw(raw), reason="wake_conditions must be a list")
        ]
    accepted: list[WakeCondition] = []
    rejected: list[Rejection] = []
    seen: dict[tuple[str, Operator, float], int] = {}
    for index, entry in enumerate(raw):
        if len(accepted) >= max_conditions:
            rejected.append(
                Rejection(
                    index=index,
                    raw=render_raw(entry),
                    reason=f"over the limit of {max_conditions} wake conditions",
                )
            )
            continue
        condition, problem = parse_condition(entry, registry)
        if condition is not None:
            key = (condition.metric, condition.operator, condition.threshold)
            if key in seen:
                condition, problem = None, f"duplicate of wake condition #{seen[key]}"
            else:
                seen[key] = index
        if condition is None:
            rejected.append(Rejection(index=index, raw=render_raw(entry), reason=problem))
        else:
            accepted.append(condition)
    return accepted, rejected


def parse_condition(
    entry: object, registry: Mapping[str, MetricSpec] = METRICS
) -> tuple[WakeCondition | None, str]:
    """One entry -> (condition, "") or (None, why it was rejected)."""
    if isinstance(entry, WakeCondition):
        entry = entry.model_dump()
    if not isinstance(entry, Mapping):
        return None, f"a wake condition must be an object, got {type(entry).__name__}"
    unexpected = sorted(str(key) for key in entry if key not in _FIELDS)
    if unexpected:
        return None, f"unexpected field(s) {render_raw(unexpected)}"
    for name in ("metric", "operator", "threshold"):
        if name not in entry:
            return None, f"missing {name}"
    metric, problem = _metric(entry["metric"], registry)
    if metric is None:
        return None, problem
    operator, problem = _operator(entry["operator"])
    if operator is None:
        return None, problem
    threshold, problem = _threshold(entry["threshold"], operator)
    if threshold is None:
        return None, problem
    reason = entry.get("reason", "")
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        return None, f"reason must be text, got {type(reason).__name__}"
    condition = WakeCondition(
        metric=metric, operator=operator, threshold=threshold, reason=clean_reason(reason)
    )
    return condition, ""


def _metric(value: object, registry: Mapping[str, MetricSpec]) -> tuple[str | None, str]:
    if not isinstance(value, str):
        return None, f"metric must be a name, got {type(value).__name__}"
    name = value.strip().lower()
    if name in registry:
        return name, ""
    hint = difflib.get_close_matches(name[:METRIC_NAME_MAX_CHARS], list(registry), n=1)
    suggestion = f" (did you mean {hint[0]}?)" if hint else ""
    return None, f"unknown metric {render_raw(value)}{suggestion}"


def _operator(value: object) -> tuple[Operator | None, str]:
    if isinstance(value, str):
        try:
            return Operator(value.strip().lower()), ""
        except ValueError:
            pass
    known = ", ".join(op.value for op in Operator)
    return None, f"unknown operator {render_raw(value)} (known: {known})"


def _threshold(value: object, operator: Operator) -> tuple[float | None, str]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"threshold must be a number, got {type(value).__name__}"
    try:
        number = float(value)
    except OverflowError:
        return None, "threshold is out of range"
    if not math.isfinite(number):
        return None, f"threshold must be finite, got {number}"
    if operator in ABS_OPERATORS and number < 0:
        # |x| > negative always holds, |x| < negative never does: a mistake either way
        return None, f"{operator.value} needs a threshold >= 0, got {format_threshold(number)}"
    return number, ""


__all__ = [
    "ABS_OPERATORS",
    "CROSSING_OPERATORS",
    "DEFAULT_TICKERS",
    "MAX_WAKE_CONDITIONS",
    "METRICS",
    "REASON_MAX_CHARS",
    "TICK_METRICS",
    "MetricOrigin",
    "MetricSpec",
    "Operator",
    "Rejection",
    "WakeCondition",
    "build_metric_registry",
    "clean_reason",
    "describe_metrics",
    "format_threshold",
    "metric_prefix",
    "parse_condition",
    "render_raw",
    "validate_conditions",
]

"""What the model calls cost: calls, tokens, cache share and dollars, per day, per model and per
gate layer, from the journal's decision and review lines. The one cost accounting: the run report
(``report.cost``), ``/api/status`` and ``python -m bench cost`` all read it.

A decision line is attributed to one gate layer, the most demanding of its trigger reasons (a
candle close coalesced with an anomaly counts as an anomaly): ``wake`` > ``anomaly`` >
``watchdog`` > ``agent_timer`` > ``candle_close``. Reviews, reflections and analyst summaries are
their own layers (``review``, ``reflection``, ``summary``).
Per model figures come from each try's usage (a decision escalated from a cheap model to a strong
one billed both). ``cache_share`` is cached (read) input tokens over all input tokens.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, computed_field

MS_PER_DAY: Final = 86_400_000

LAYER_ORDER: Final = ("wake", "anomaly", "watchdog", "agent_timer", "candle_close")
USAGE_TOKEN_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
#: lines that are a layer of their own: a position review, a trade's reflection and an analyst's
#: day summary (billed to the same budget, so a restart that left them out forgot what they spent)
_OWN_LAYER: Final = ("review", "reflection", "summary")
#: more than any call is billed (a 1M-token context costs dollars): a larger figure is corrupt
_MAX_TOKENS: Final = 10**12
_MAX_COST_USD: Final = 1e9


def usage_problem(usage: object) -> str | None:
    """Why ``usage`` (a journal line's or a try's) cannot be summed, or None: each token count a
    whole number 0 .. 10^12 and ``cost_usd`` a finite 0 .. 1e9 (each may be missing or null).
    Checked where a journal is read, so the sums here are never handed a string, a list or 1e308."""
    if not isinstance(usage, Mapping):
        return f"usage {usage!r} is not an object"
    for key in (*USAGE_TOKEN_FIELDS, "cost_usd"):
        value = usage.get(key)
        if value is None:
            continue
        tokens = key != "cost_usd"
        number = type(value) is int or (type(value) is float and not tokens)
        limit = _MAX_TOKENS if tokens else _MAX_COST_USD
        if not number or not (math.isfinite(value) and 0 <= value <= limit):
            what = "a whole number of tokens" if tokens else "a dollar amount"
            return f"usage.{key} {value!r} is not {what} within 0 .. {limit:g}"
    return None


def line_problem(record: Mapping[str, Any]) -> str | None:
    """Why a decision or review line cannot be summed, or None: its trigger, ``raw_decision``
    and tries not of the journal's shape, or a usage (the line's or a try's) ``usage_problem``
    refuses. For readers that take a journal line as it is (the API's), not through its model."""
    trigger, raw = record.get("trigger"), record.get("raw_decision")
    if trigger is not None and not isinstance(trigger, list):
        return f"trigger {trigger!r} is not a list"
    if raw is not None and not isinstance(raw, Mapping):
        return f"raw_decision {raw!r} is not an object"
    attempts = record.get("attempts")
    if attempts is None and raw is not None:
        attempts = raw.get("attempts")
    if attempts is not None and not isinstance(attempts, list):
        return f"attempts {attempts!r} is not a list"
    usages = attempt_usages(record)
    if record.get("usage") is not None:
        usages.append(record["usage"])
    return next((p for p in map(usage_problem, usages) if p is not None), None)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # report.json holds computed fields


class CostRow(_Frozen):
    """Totals of a group of calls; ``per_day`` figures divide by the run's days."""

    name: str
    decisions: int  # journal lines in the group (decisions or reviews)
    calls: int  # of them, the ones that asked a model
    input_tokens: int  # uncached input
    cache_write_tokens: int
    cache_read_tokens: int
    output_tokens: int
    cost_usd: float

    @computed_field  # type: ignore[prop-decorator]
    @property
    def all_input_tokens(self) -> int:
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cache_share(self) -> float | None:
        total = self.all_input_tokens
        return self.cache_read_tokens / total if total else None


class CostSummary(_Frozen):
    days: float
    total: CostRow
    by_layer: tuple[CostRow, ...]
    by_model: tuple[CostRow, ...]
    by_decider: tuple[CostRow, ...]  # decided_by: claude / fallback / unchanged

    def per_day(self, value: float) -> float:
        return value / self.days if self.days > 0 else 0.0


class _Acc:
    def __init__(self) -> None:
        self.decisions = self.calls = 0
        self.tokens = dict.fromkeys(("input", "write", "read", "output"), 0)
        self.cost_usd = 0.0

    def add_usage(self, usage: Mapping[str, Any]) -> None:
        self.tokens["input"] += int(usage.get("input_tokens") or 0)
        self.tokens["write"] += int(usage.get("cache_creation_input_tokens") or 0)
        self.tokens["read"] += int(usage.get("cache_read_input_tokens") or 0)
        self.tokens["output"] += int(usage.get("output_tokens") or 0)
        self.cost_usd += float(usage.get("cost_usd") or 0.0)

    def row(self, name: str) -> CostRow:
        return CostRow(
            name=name,
            decisions=self.decisions,
            calls=self.calls,
            input_tokens=self.tokens["input"],
            cache_write_tokens=self.tokens["write"],
            cache_read_tokens=self.tokens["read"],
            output_tokens=self.tokens["output"],
            cost_usd=self.cost_usd,
        )


def layer_of(trigger: Iterable[str]) -> str:
    """The most demanding gate layer among a decision's trigger reasons."""
    found = {str(reason).split(":", 1)[0] for reason in trigger}
    found = {"watchdog" if f.startswith("watchdog") else f for f in found}
    return next((layer for layer in LAYER_ORDER if layer in found), "other")


def attempt_usages(record: Mapping[str, Any]) -> list[Any]:
    """The usage of each of a decision's or review's tries that has one."""
    attempts = record.get("attempts")
    if attempts is None:
        attempts = (record.get("raw_decision") or {}).get("attempts")
    return [a["usage"] for a in attempts or [] if isinstance(a, dict) and a.get("usage")]


class _Groups:
    """The accumulators of one span (a run, or one UTC day)."""

    def __init__(self) -> None:
        self.total = _Acc()
        self.layers: dict[str, _Acc] = defaultdict(_Acc)
        self.models: dict[str, _Acc] = defaultdict(_Acc)
        self.deciders: dict[str, _Acc] = defaultdict(_Acc)

    def add(self, record: Mapping[str, Any], kind: str) -> None:
        layer = kind if kind in _OWN_LAYER else layer_of(record.get("trigger") or [])
        decider = str(record.get("decided_by") or "unknown")
        usage = record.get("usage")
        called = isinstance(usage, Mapping)
        groups = (
            self.total,
            self.layers[layer],
            self.deciders[decider if kind == "decision" else kind],
        )
        for acc in groups:
            acc.decisions += 1
            acc.calls += called
            if isinstance(usage, Mapping):
                acc.add_usage(usage)
        for one in attempt_usages(record):
            model = self.models[str(one.get("model") or "unknown")]
            model.calls += 1
            model.add_usage(one)

    def summary(self, days: float) -> CostSummary:
        ordered = [*LAYER_ORDER, "other", *_OWN_LAYER]
        return CostSummary(
            days=days,
            total=self.total.row("total"),
            by_layer=tuple(self.layers[n].row(n) for n in ordered if n in self.layers),
            by_model=tuple(self.models[n].row(n) for n in sorted(self.models)),
            by_decider=tuple(self.deciders[n].row(n) for n in sorted(self.deciders)),
        )


def _kind(record: Mapping[str, Any]) -> str | None:
    kind = record.get("type", "decision")
    return kind if kind == "decision" or kind in _OWN_LAYER else None


def cost_summary(records: Iterable[Mapping[str, Any]], days: float) -> CostSummary:
    """Every decision and review line of ``records`` as one span of ``days``."""
    groups = _Groups()
    for record in records:
        kind = _kind(record)
        if kind is not None:
            groups.add(record, kind)
    return groups.summary(days)


class CostBook:
    """The same figures per UTC day, fed one journal line at a time (a reader following a
    journal adds what was appended; nothing is read twice)."""

    def __init__(self) -> None:
        self._days: dict[int, _Groups] = {}

    def add(self, record: Mapping[str, Any]) -> str | None:
        """Why the line is left out of the sums (``line_problem``), or None."""
        kind = _kind(record)
        at_ms = record.get("at_ms")
        if kind is None or not isinstance(at_ms, int):
            return None
        problem = line_problem(record)
        if problem is not None:
            return problem
        day = at_ms // MS_PER_DAY
        groups = self._days.get(day)
        if groups is None:
            groups = self._days[day] = _Groups()
        groups.add(record, kind)
        return None

    def day(self, day_number: int) -> CostSummary:
        """One UTC day (counted from the epoch); an empty summary for a day without lines."""
        return self._days.get(day_number, _Groups()).summary(1.0)

    def day_numbers(self) -> list[int]:
        return sorted(self._days)


def day_name(day_number: int) -> str:
    """YYYY-MM-DD of a UTC day counted from the epoch."""
    return datetime.fromtimestamp(day_number * 86_400, tz=UTC).strftime("%Y-%m-%d")


def day_span(records: Iterable[Mapping[str, Any]]) -> float:
    """Days between the first and the last line's UTC day boundaries (whole days touched)."""
    stamps = [int(r["at_ms"]) for r in records if "at_ms" in r]
    if not stamps:
        return 0.0
    return float(max(stamps) // MS_PER_DAY - min(stamps) // MS_PER_DAY + 1)

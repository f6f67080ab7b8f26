"""MarketSnapshot: everything a decider sees at one instant, and the builder that assembles it.

Every field of the design's table is here. A source that is not built yet, is down or has no data
gives ``None`` and a reason under ``unavailable[field]``: a decider must never mistake a missing value
for a market fact. Serialisation is compact and deterministic (sorted keys, fixed float precision), so
the prompt, the journal and the snapshot digest agree byte for byte.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any, Final, Literal, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from agent.indicators import TimeframeSummary
from agent.memo import FloatMemo
from derivatives.fields import CONTEXT_FIELDS
from regime.snapshot import RegimeSnapshot

SNAPSHOT_SCHEMA_VERSION = 1
FLOAT_DECIMALS = 8


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TickerSnapshot(_Frozen):
    price: float | None
    change_1h_pct: float | None
    return_4h_pct: float | None
    return_24h_pct: float | None
    volume_24h: float | None  # base units, closed 1h candles of the last 24 h
    volume_ratio: float | None  # current candle volume vs its rolling mean
    return_zscore: float | None
    multi_tf: dict[str, TimeframeSummary] = Field(default_factory=dict)


class PositionSnapshot(_Frozen):
    ticker: str
    quantity: float
    entry_price: float
    mark_price: float | None
    pnl_pct: float | None
    peak_price: float | None
    opened_at_ms: int
    holding_secs: float


class PendingOrderSnapshot(_Frozen):
    """A resting order: exposure the portfolio takes on if it fills, with no further decision."""

    ticker: str
    side: Literal["buy", "sell"]
    notional_usd: float
    limit_price: float | None
    placed_at_ms: int
    expires_at_ms: int | None


class MarketSnapshot(_Frozen):
    schema_version: int = SNAPSHOT_SCHEMA_VERSION
    at_ms: int
    tickers: dict[str, TickerSnapshot]
    btc_price: float | None
    btc_change_1h_pct: float | None
    btc_change_24h_pct: float | None
    # derivatives and outside context (filled by the derivatives monitor / context sources)
    funding_rates: dict[str, float] | None = None
    open_interest: dict[str, Any] | None = None
    taker_delta: dict[str, Any] | None = None
    long_short_ratio: dict[str, Any] | None = None
    liquidations: dict[str, Any] | None = None
    basis: dict[str, Any] | None = None
    stablecoin_supply: dict[str, Any] | None = None
    fear_greed: dict[str, Any] | None = None
    news_summary: str | None = None
    etf_flow: dict[str, Any] | None = None
    # the gold hedge (PAXGUSDT spot): context, never a traded ticker
    paxg: dict[str, Any] | None = None
    derivatives_signal: float | None = None
    # regimes
    regime: RegimeSnapshot | None
    exposure_scale: float
    # learning and memory
    ts_posteriors: dict[str, Any] | None = None
    recent_trades: list[dict[str, Any]] | None = None
    #: memory items (agent/memory_view.py): posterior, regime_stats, insight (with score parts)
    historical_insights: list[dict[str, Any]] | None = None
    agent_memory: str = ""
    # portfolio
    open_positions: list[PositionSnapshot]
    pending_orders: list[PendingOrderSnapshot] = Field(default_factory=list)  # sorted
    portfolio_value: float | None
    cash: float | None
    # why now
    gate_wake_reasons: list[str]
    unavailable: dict[str, str] = Field(default_factory=dict)

    #: ``as_sent`` made once: a decision reads it three times (journal, prompt, decider), and
    #: the dump and rounding were a fifth of a replayed decision's time
    _sent: dict[str, Any] | None = PrivateAttr(default=None)

    def as_sent(self) -> dict[str, Any]:
        """The snapshot as the decider is sent it and the journal keeps it (floats rounded).

        A new top-level dict each call (a caller may pop or set its keys); the nested values are
        shared between calls and must be treated as read-only."""
        if self._sent is None:
            self._sent = _rounded(self.model_dump(mode="json"))
        return dict(self._sent)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy never inherits the original's ``as_sent`` (an update changes what is sent)."""
        copied = super().model_copy(update=update, deep=deep)
        copied._sent = None
        return copied

    def to_json_bytes(self) -> bytes:
        return sent_json_bytes(self.as_sent())

    def digest(self) -> str:
        return sent_digest(self.as_sent())


def sent_json_bytes(sent: Mapping[str, Any]) -> bytes:
    return orjson.dumps(sent, option=orjson.OPT_SORT_KEYS)


def sent_digest(sent: Mapping[str, Any]) -> str:
    """The digest of ``MarketSnapshot.as_sent()`` (journal lines carry it)."""
    return hashlib.sha256(sent_json_bytes(sent)).hexdigest()[:16]


def _rounded(value: Any) -> Any:
    """Floats at fixed precision so the same market gives the same bytes (and fewer tokens)."""
    kind = type(value)  # exact-type fast paths first: a JSON dump is dicts, lists and scalars
    if kind is dict:
        return _rounded_dict(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, float):
        return _rounded_float(value)
    if isinstance(value, Mapping):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def _rounded_float(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"non-finite number in snapshot: {value!r}")
    return round(value, FLOAT_DECIMALS)


#: exact floats already rounded: two thirds of a snapshot's floats (the indicators of candles not
#: closed since, the regime, outside data) were in the one before, and ``round(x, 8)`` costs about
#: ten lookups
_ROUNDED: Final = FloatMemo(_rounded_float, 4096)
_rounded_exact_float: Final = _ROUNDED.of


#: exact types ``_rounded`` passes through as they are
_KEPT: Final = frozenset({str, int, bool, type(None)})


def _rounded_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    # leaves handled here, not by a call each: most of a snapshot is leaves, and the call per
    # leaf was most of the walk's time
    out: dict[Any, Any] = {}
    for key, item in value.items():
        kind = type(item)
        if kind is float:
            out[key] = _rounded_exact_float(item)
        elif kind in _KEPT:
            out[key] = item
        elif kind is dict:
            out[key] = _rounded_dict(item)
        else:
            out[key] = _rounded(item)
    return out


def merge_unavailable(*parts: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in parts:
        out.update(part)
    return dict(sorted(out.items()))


def require_reasons(snapshot_fields: Mapping[str, Any], unavailable: Mapping[str, str]) -> None:
    """Every ``None`` context field must say why: a silent null is a defect."""
    silent = [
        name
        for name in CONTEXT_FIELDS
        if snapshot_fields.get(name) is None and name not in unavailable
    ]
    if silent:
        raise ValueError(f"snapshot fields are null without a reason: {silent}")

"""MarketSnapshot: everything a decider sees at one instant, and the builder that assembles it.

Every field of the design's table is here. A source that is not built yet, is down or has no data
gives ``None`` and a reason under ``unavailable[field]``: a decider must never mistake a missing value
for a market fact. Serialisation is compact and deterministic (sorted keys, fixed float precision), so
the prompt, the journal and the snapshot digest agree byte for byte.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Mapping
from typing import Any, Final, Literal, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from agent.indicators import TimeframeSummary
from agent.snapshot_fields import FieldForms
from agent.snapshot_walks import FLOAT_DECIMALS, KeptForms
from derivatives.fields import CONTEXT_FIELDS
from regime.snapshot import RegimeSnapshot

SNAPSHOT_SCHEMA_VERSION = 1
__all__ = ["FLOAT_DECIMALS"]  # re-exported: how precise the journal's floats are


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


class SentForms:
    """A snapshot as sent, its compact form (``snapshot_walks.compact``) and its JSON (made
    when first asked for: a value orjson refuses fails there, as it did before)."""

    __slots__ = ("_json", "compact", "sent")

    def __init__(self, sent: Mapping[str, Any], compact: Mapping[str, Any]) -> None:
        self.sent = sent
        self.compact = compact
        self._json: bytes | None = None

    @property
    def json(self) -> bytes:
        """``sent_json_bytes(sent)``."""
        if self._json is None:
            self._json = sent_json_bytes(self.sent)
        return self._json

    def pair(self) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """``(sent, compact)``: ``compact_reusing``'s base and its compact form."""
        return self.sent, self.compact

    def holds(self, sent: Mapping[str, Any]) -> bool:
        """``sent`` has this one's entries, the very same objects (so the same JSON)."""
        mine = self.sent
        if sent.keys() != mine.keys():
            return False
        return all(map(operator.is_, map(sent.__getitem__, mine), mine.values()))


#: the fields often the same from one snapshot to the next (the dumped ``Any`` values of the
#: recent trades and outside data, the reasons: a NaN there is dumped as null), their forms kept
_KEPT_FORMS: Final = KeptForms(
    (
        "recent_trades",
        "unavailable",
        "open_interest",
        "taker_delta",
        "long_short_ratio",
        "liquidations",
        "basis",
        "stablecoin_supply",
        "fear_greed",
        "etf_flow",
        "paxg",
    )
)


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

    #: ``as_sent`` made once (with its compact form and its JSON): a decision reads it three
    #: times (journal, prompt, decider), and the dump and rounding were a fifth of a replayed
    #: decision's time
    _forms: SentForms | None = PrivateAttr(default=None)

    def as_sent(self) -> dict[str, Any]:
        """The snapshot as the decider is sent it and the journal keeps it (floats rounded).

        A new top-level dict each call (a caller may pop or set its keys); the nested values are
        shared between calls and must be treated as read-only."""
        return dict(self.forms().sent)

    def forms(self) -> SentForms:
        """``as_sent`` and what is made of it, made once (read-only: shared with every caller)."""
        # read from pydantic's dict of private values: its attribute lookup costs a microsecond,
        # and a decision asks six times
        forms: SentForms | None = (self.__pydantic_private__ or {}).get("_forms")
        if forms is None:
            both = _FIELD_FORMS.pair(self)
            if both is None:  # a value the dump changes: its walk
                both = _KEPT_FORMS.both(self.model_dump(mode="json"))
            sent, compact = both
            forms = self._forms = SentForms(sent, compact)
        return forms

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy never inherits the original's ``as_sent`` (an update changes what is sent)."""
        copied = super().model_copy(update=update, deep=deep)
        copied._forms = None
        return copied

    def to_json_bytes(self) -> bytes:
        return self.forms().json

    def digest(self) -> str:
        return hashlib.sha256(self.forms().json).hexdigest()[:16]


#: ``_KEPT_FORMS.both(snapshot.model_dump(mode="json"))``, made from the fields
_FIELD_FORMS: Final = FieldForms(MarketSnapshot, TickerSnapshot, _KEPT_FORMS)


def sent_json_bytes(sent: Mapping[str, Any]) -> bytes:
    return orjson.dumps(sent, option=orjson.OPT_SORT_KEYS)


def sent_digest(sent: Mapping[str, Any]) -> str:
    """The digest of ``MarketSnapshot.as_sent()`` (journal lines carry it)."""
    return hashlib.sha256(sent_json_bytes(sent)).hexdigest()[:16]


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

"""The memory graph's nodes and the values retrieval returns.

Nodes: ``Trade`` -[:OF]-> ``Ticker``, -[:IN]-> ``Regime``, -[:AT]-> ``Situation``,
-[:TAUGHT]-> ``Insight``; ``Insight`` -[:ABOUT]-> ``Regime`` | ``Ticker``, -[:SUMMARISES]-> ``Insight``.
Ticker and Regime are identified by their names (natural keys); a Situation belongs to one Trade and
shares its id. Ids are derived from natural keys, so a retried write is the same write.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.clock import LATEST_TIME_MS, RECORDING_YEARS
from core.unvalidated import require_plain, unvalidated
from memory.config import InsightKind

Author = Literal["model", "rules", "person"]
SummarySource = Literal["model_summary", "sentence_cut", "default", "rules", "person"]

#: the numeric market state at entry, in this order; each feature is standardised by a FIXED
#: centre and scale (not fitted), so a vector written today compares with one written next year
SITUATION_FEATURES: tuple[tuple[str, float, float], ...] = (
    ("return_zscore_15m", 0.0, 2.0),  # already a z-score; /2 keeps it near [-1, 1]
    ("return_1h_pct", 0.0, 1.5),
    ("return_4h_pct", 0.0, 3.0),
    ("return_24h_pct", 0.0, 6.0),
    ("rsi_1h", 50.0, 15.0),
    ("rsi_4h", 50.0, 15.0),
    ("percent_b_1h", 0.5, 0.35),
    ("funding_pct", 0.01, 0.03),  # percent per 8 h; 0.01 % is Binance's baseline
    ("fear_greed", 50.0, 20.0),
)
REGIME_LABELS: tuple[str, ...] = ("low_volatility", "medium_volatility", "high_volatility")
VECTOR_DIM = len(SITUATION_FEATURES) + len(REGIME_LABELS)
#: a regime label's one-hot part of the vector (any other label: all zero)
_ONE_HOT: dict[str, tuple[float, ...]] = {
    label: tuple(1.0 if other == label else 0.0 for other in REGIME_LABELS)
    for label in REGIME_LABELS
}
_NO_LABEL: tuple[float, ...] = (0.0,) * len(REGIME_LABELS)
_FLOAT32_MAX = float(np.finfo(np.float32).max)


def time_problem(name: str, at_ms: int) -> str | None:
    """Why no run's clock gives ``at_ms`` (a unit slip, a year typed wrong, before 1970); None:
    one may. Readers take an insight's time as a time (a UTC day, the CLI's store clock), where
    past year 9999 it is datetime's ValueError, and as never now."""
    if at_ms >= LATEST_TIME_MS:
        return f"{name} {at_ms} is past {RECORDING_YEARS}"
    if at_ms < 0:
        return f"{name} {at_ms} is before 1970"
    return None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Situation(_Frozen):
    """Raw values at entry (``None``: the snapshot did not have it) and the standardised vector.
    A missing feature is 0 in the vector (its centre), so it neither attracts nor repels."""

    features: dict[str, float | None]
    regime: str
    vector: tuple[float, ...]

    @classmethod
    def from_features(cls, features: Mapping[str, float | None], regime: str) -> Situation:
        # one pass, the clamp as comparisons: each snapshot makes one per ticker
        values: list[float] = []
        known: dict[str, float | None] = {}
        plain = type(regime) is str  # else validation makes the str, as it makes floats below
        for name, centre, scale in SITUATION_FEATURES:
            raw = known[name] = features.get(name)
            if raw is None:
                values.append(0.0)
                continue
            if type(raw) is not float:
                plain = False  # an int or a bool: validation stores it as a float
            if not math.isfinite(raw):
                values.append(0.0)
                continue
            z = (raw - centre) / scale  # finite raw: never NaN, at worst an infinity
            values.append(5.0 if z > 5.0 else -5.0 if z < -5.0 else z)
        values.extend(_ONE_HOT.get(regime, _NO_LABEL))
        if cls is Situation and plain:
            # every field of its type already, in containers of its own: what validation would
            # make, without its ~5 us (a snapshot makes one per ticker)
            return unvalidated(
                Situation, {"features": known, "regime": regime, "vector": tuple(values)}
            )
        return cls(features=known, regime=regime, vector=tuple(values))


require_plain(Situation, frozenset({"features", "regime", "vector"}))


class Trade(_Frozen):
    trade_id: str
    ticker: str
    side: Literal["long", "short"] = "long"
    entry_ms: int
    exit_ms: int
    entry_price: float | None  # None: the entry fill was not seen (e.g. a restart in between)
    exit_price: float | None
    pnl_pct: float
    fees_usd: float | None
    holding_secs: float
    exit_reason: str
    signals: dict[str, float] = Field(default_factory=dict)
    confidence: float | None = None
    decided_by: str | None = None
    decision_id: str | None = None
    regime: str  # crypto regime label at entry
    macro: str = "unavailable"
    situation: Situation | None = None
    unavailable: dict[str, str] = Field(default_factory=dict)

    @field_validator("situation")
    @classmethod
    def _comparable(cls, situation: Situation | None) -> Situation | None:
        """A vector ``Situation.from_features`` makes (Situation stays plain: a snapshot makes
        one per ticker unvalidated): stored as float32, a value past its range is infinity,
        every neighbour cosine with it NaN; another length is compared with nothing."""
        vector = () if situation is None else situation.vector
        if situation is not None and len(vector) != VECTOR_DIM:
            raise ValueError(f"a situation vector has {VECTOR_DIM} values, not {len(vector)}")
        if not all(abs(v) <= _FLOAT32_MAX for v in vector):
            raise ValueError("a situation vector value is NaN or past float32's range")
        return situation

    @property
    def combined_regime(self) -> str:
        return f"{self.regime}_{self.macro.lower()}"

    @staticmethod
    def make_id(ticker: str, entry_ms: int, exit_ms: int) -> str:
        return f"t-{ticker.split('/', maxsplit=1)[0].lower()}-{entry_ms}-{exit_ms}"


class Insight(_Frozen):
    insight_id: str
    text: str = Field(min_length=1, max_length=300)
    kind: InsightKind
    salience: float = Field(ge=0.0, le=1.0)
    author: Author
    summary_source: SummarySource
    created_ms: int
    #: None: the retrieval default; 0 or less was never retrieved (as ``memory add`` refuses)
    ttl_days: float | None = Field(None, gt=0.0, allow_inf_nan=False)
    ticker: str | None = None  # ABOUT Ticker
    regime: str | None = None  # ABOUT Regime
    trade_id: str | None = None  # the Trade that TAUGHT it
    summarises: tuple[str, ...] = ()  # a rollup's children
    situation_vector: tuple[float, ...] | None = None  # the teaching trade's situation
    embedding: tuple[float, ...] | None = None  # text embedding (None until embedded)

    @field_validator("text")
    @classmethod
    def _stripped(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("an insight's text is never empty")
        return text.strip()

    @field_validator("situation_vector", "embedding")
    @classmethod
    def _float32(cls, values: tuple[float, ...] | None) -> tuple[float, ...] | None:
        """Vectors are kept at float32 precision (the stores' blobs), so a round trip is exact.
        A value past float32 (stored as infinity) or NaN made every cosine with it NaN."""
        if values is None:
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            kept = np.asarray(values, dtype=np.float32)
        if not np.isfinite(kept).all():
            raise ValueError("a vector value is NaN or past float32's range")
        return tuple(kept.tolist())

    @staticmethod
    def make_id(kind: str, created_ms: int, ticker: str | None, text: str) -> str:
        digest = hashlib.sha256(f"{kind}|{created_ms}|{ticker}|{text}".encode()).hexdigest()
        return f"i-{digest[:16]}"


class ScoreParts(_Frozen):
    sim: float
    role_weight: float
    age_days: float
    salience: float
    score: float


class ScoredInsight(_Frozen):
    insight: Insight
    parts: ScoreParts


class RegimeStats(_Frozen):
    """Closed trades of one (ticker, regime): the snapshot's and the fallback rule's statistics."""

    ticker: str | None
    regime: str
    n: int
    wins: int
    win_rate: float | None
    mean_pnl_pct: float | None
    mean_holding_secs: float | None


class NeighbourTrade(_Frozen):
    """A past trade and how similar its entry situation was to now (cosine, -1..1)."""

    trade_id: str
    pnl_pct: float
    sim: float


class NeighbourSummary(NamedTuple):
    """``neighbour_trades`` as the snapshot's posterior reads it: how many, how many won
    (pnl > 0), and their sims summed in that order. Plain values: the models cost a decision
    more than the search."""

    trades: int
    wins: int
    sim_sum: float

    @classmethod
    def of(cls, neighbours: Sequence[NeighbourTrade]) -> NeighbourSummary:
        return cls(
            len(neighbours),
            sum(1 for t in neighbours if t.pnl_pct > 0),
            sum(t.sim for t in neighbours),
        )

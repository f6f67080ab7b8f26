"""Tracked positions and how they live in ``runner_state.json``.

Per ticker, the store's own fields hold the entry price (``entry_prices``), the entry time
(``entry_times_ms``) and the trailing high (``trailing_highs``); the rest sits under
``extra["tracker"]["positions"][ticker]``: quantity, entry signals, regime at entry, the armed flag,
and the exit order in flight (``exit_order_id``, ``exit_reason``: written BEFORE the SELL is sent,
so a restart finds the exit's fill and hands the exit to the learner instead of forgetting it).
A ticker in ``entry_prices`` without tracker details (an older or hand-made file) is restored with
what is known (quantity 0 until reconciled with the broker, regime ``unknown``, no signals).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from state.models import RunnerState

log = logging.getLogger(__name__)

EXTRA_KEY: Final = "tracker"
UNKNOWN_REGIME: Final = "unknown"


class TrackedPosition(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ticker: str
    entry_price: float = Field(gt=0.0, allow_inf_nan=False)
    quantity: float = Field(ge=0.0, allow_inf_nan=False)  # 0: not known yet (reconcile fills it)
    entry_time_ms: int = Field(ge=0)
    signals: dict[str, float] = Field(default_factory=dict)
    regime: str = UNKNOWN_REGIME
    trailing_high: float = Field(gt=0.0, allow_inf_nan=False)
    armed: bool = False


class _Details(BaseModel):
    """What ``extra["tracker"]["positions"][ticker]`` holds."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    quantity: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    signals: dict[str, float] = Field(default_factory=dict)
    regime: str = UNKNOWN_REGIME
    armed: bool = False
    exit_order_id: str | None = None
    exit_reason: str | None = None


#: ticker -> (client order id of the exit's SELL, exit reason value)
PendingExits = dict[str, tuple[str, str]]


class StateStore(Protocol):
    """The part of ``state.store.RunnerStateStore`` the tracker uses."""

    @property
    def current(self) -> RunnerState: ...

    def replace(self, **daemon_fields: Any) -> RunnerState: ...

    def save(self) -> object: ...


def _details(state: RunnerState) -> dict[str, _Details]:
    raw = state.extra.get(EXTRA_KEY, {})
    details_by_ticker = raw.get("positions", {}) if isinstance(raw, Mapping) else {}
    found: dict[str, _Details] = {}
    for ticker in state.entry_prices:
        try:
            found[ticker] = _Details.model_validate(_thaw(details_by_ticker.get(ticker, {})))
        except ValidationError as exc:
            log.error("tracker: stored details of %s are invalid (%s); using defaults", ticker, exc)
            found[ticker] = _Details()
    return found


def pending_exits_from_state(state: RunnerState) -> PendingExits:
    """The exit orders that were in flight when the state was saved."""
    return {
        ticker: (d.exit_order_id, d.exit_reason)
        for ticker, d in _details(state).items()
        if d.exit_order_id is not None and d.exit_reason is not None
    }


def positions_from_state(state: RunnerState) -> dict[str, TrackedPosition]:
    details_by_ticker = _details(state)
    positions: dict[str, TrackedPosition] = {}
    for ticker, entry_price in state.entry_prices.items():
        details = details_by_ticker[ticker]
        high = max(state.trailing_highs.get(ticker, entry_price), entry_price)
        positions[ticker] = TrackedPosition(
            ticker=ticker,
            entry_price=entry_price,
            quantity=details.quantity,
            entry_time_ms=state.entry_times_ms.get(ticker, 0),
            signals=details.signals,
            regime=details.regime,
            trailing_high=high,
            armed=details.armed,
        )
    return positions


def state_fields(
    state: RunnerState,
    positions: Mapping[str, TrackedPosition],
    pending_exits: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """The daemon fields that record ``positions`` (other ``extra`` keys are kept)."""
    pending = pending_exits or {}
    extra = _thaw(state.extra)
    extra[EXTRA_KEY] = {
        "positions": {
            t: {
                "quantity": p.quantity,
                "signals": p.signals,
                "regime": p.regime,
                "armed": p.armed,
                **(
                    {"exit_order_id": pending[t][0], "exit_reason": pending[t][1]}
                    if t in pending
                    else {}
                ),
            }
            for t, p in sorted(positions.items())
        }
    }
    ordered = sorted(positions.items())
    return {
        "entry_prices": {t: p.entry_price for t, p in ordered},
        "entry_times_ms": {t: p.entry_time_ms for t, p in ordered},
        "trailing_highs": {t: p.trailing_high for t, p in ordered},
        "extra": extra,
    }


def _thaw(value: Any) -> Any:
    """Read-only state mappings/tuples back into plain dicts/lists."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value

"""memory.db's (and analysts.db's) rows as a person may have left them: SQLite keeps any value in any column (a text
in ``pnl_pct``, three bytes in ``vector``, a body that is not JSON), so each row read is checked.

A row that cannot be read is left out of every read (it stays in the file, as the person left it)
with one warning naming it and why: one broken row must not stop every decision, nor a command.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory.model import VECTOR_DIM, Insight, Trade, time_problem
from memory.sqlite_schema import insight_from_row

log = logging.getLogger(__name__)

#: rows one store warns about before it starts again (a table of broken rows costs no more)
_WARNED_MAX = 10_000


class Unreadable(ValueError):
    """One column of a row holds what the row's model cannot be."""


class LeftOut:
    """One store's warnings of the rows it leaves out, each row once (a row left out of an index
    is asked for again and again). Kept per store: one set for the process kept the same broken
    row of a second store (the next run of a sweep worker) from being warned about at all."""

    def __init__(self, db: object) -> None:
        self._db = str(db)
        self._warned: set[tuple[str, str]] = set()

    def __call__(self, table: str, row_id: object, why: object) -> None:
        key = (table, str(row_id)[:100])
        if key in self._warned:
            return
        if len(self._warned) >= _WARNED_MAX:
            self._warned.clear()
        self._warned.add(key)
        log.warning(
            "%s: %s row %s cannot be read, left out (kept in the file): %s",
            self._db,
            table,
            key[1],
            str(why)[:300],
        )


def text_or_none(value: object, column: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise Unreadable(f"{column} is {type(value).__name__} {value!r:.40}, not text")


def finite(value: object, column: str) -> float:
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    raise Unreadable(f"{column} is {value!r:.40}, not a finite number")


#: past any trade's: a 10,000-fold gain (or a loss of that size), a century held. Under them no
#: sum of a store's trades passes the largest float (a regime's mean P&L of 1e308s was inf)
PNL_PCT_MAX = 1e6
HOLDING_SECS_MAX = 100 * 365 * 86_400.0


def trade_figures(pnl_pct: float, holding_secs: float) -> None:
    """Unreadable when a trade's P&L or holding time is past any trade's."""
    if not abs(pnl_pct) <= PNL_PCT_MAX:
        raise Unreadable(f"pnl_pct {pnl_pct!r} is past ±{PNL_PCT_MAX:g} %")
    if not abs(holding_secs) <= HOLDING_SECS_MAX:
        raise Unreadable(f"holding_secs {holding_secs!r} is past a century")


def check_trade(trade: Trade) -> None:
    """Unreadable when a trade's figures or times are past any trade's: a rollup dates its
    trades, where an entry before year 1 was datetime's ValueError out of the writer's flush."""
    trade_figures(trade.pnl_pct, trade.holding_secs)
    for name, at_ms in (("entry_ms", trade.entry_ms), ("exit_ms", trade.exit_ms)):
        problem = time_problem(name, at_ms)
        if problem is not None:
            raise Unreadable(problem)


def vector(blob: object, column: str, dim: int | None = VECTOR_DIM) -> np.ndarray | None:
    """A float32 blob of ``dim`` values (any number of them with ``dim`` None)."""
    if blob is None:
        return None
    if not isinstance(blob, bytes) or len(blob) % 4 or (dim is not None and len(blob) != 4 * dim):
        size = len(blob) if isinstance(blob, bytes | str) else "?"
        want = "float32 values" if dim is None else f"{dim} float32 values"
        raise Unreadable(f"{column} is {type(blob).__name__} of {size} bytes, not {want}")
    return np.frombuffer(blob, dtype=np.float32)


def trade_stats_row(
    row: Sequence[Any], left_out: LeftOut
) -> tuple[str, str, str, float, float, np.ndarray | None] | None:
    """(trade_id, ticker, regime, pnl_pct, holding_secs, vector) of a trade, None if unreadable."""
    trade_id, ticker, regime, pnl, holding, blob = row
    try:
        pnl_pct, holding_secs = finite(pnl, "pnl_pct"), finite(holding, "holding_secs")
        trade_figures(pnl_pct, holding_secs)
        situation = vector(blob, "vector")
        if situation is not None and not np.isfinite(situation).all():
            raise Unreadable("vector holds NaN or infinity")  # every cosine with it NaN
        return (
            str(trade_id),
            _text(ticker, "ticker"),
            _text(regime, "regime"),
            pnl_pct,
            holding_secs,
            situation,
        )
    except Unreadable as exc:
        left_out("trades", trade_id, exc)
        return None


def index_row(
    row: Sequence[Any], left_out: LeftOut
) -> tuple[str, str | None, str | None, str, int, np.ndarray | None] | None:
    """(insight_id, ticker, regime, kind, created_ms, vector) of an insight's indexed columns,
    None if unreadable. A vector of another length stays, as before: the index reads it as none."""
    insight_id, ticker, regime, kind, created, blob = row
    try:
        if not isinstance(created, int):
            raise Unreadable(f"created_ms is {created!r:.40}, not a whole number")
        created_time(created)
        return (
            str(insight_id),
            text_or_none(ticker, "ticker"),
            text_or_none(regime, "regime"),
            _text(kind, "kind"),
            created,
            vector(blob, "vector", dim=None),
        )
    except Unreadable as exc:
        left_out("insights", insight_id, exc)
        return None


def created_time(created: int) -> None:
    """Unreadable when no run's clock gives ``created`` (``memory.model.time_problem``)."""
    problem = time_problem("created_ms", created)
    if problem is not None:
        raise Unreadable(problem)


def read_insight(row: Sequence[Any], insight_id: object, left_out: LeftOut) -> Insight | None:
    """``insight_from_row`` of (body, vector, embedding), None if the row cannot be one."""
    try:
        vector(row[1], "vector", dim=None)
        vector(row[2], "embedding", dim=None)
        insight = insight_from_row(row)
        created_time(insight.created_ms)  # the body's time, which readers take
        return insight
    except (ValueError, TypeError) as exc:  # not JSON, not an object, outside Insight's bounds
        left_out("insights", insight_id, exc)
        return None


def embedding_of(row: Sequence[Any], dim: int, left_out: LeftOut) -> np.ndarray | None:
    """The text embedding of a (body, vector, embedding, kind, insight_id) row, None if it is
    not ``dim`` float32 values: unreadable (left out, warned) or another embedder's (not
    comparable: a store kept across a change of ``memory.embeddings``)."""
    try:
        found = vector(row[2], "embedding", dim=None)
    except Unreadable as exc:
        left_out("insights", row[4], exc)
        return None
    return found if found is not None and len(found) == dim else None


def read_trade(body: object, trade_id: object, left_out: LeftOut) -> Trade | None:
    """The trade of a ``body`` column, None if it cannot be one."""
    try:
        if not isinstance(body, str | bytes):
            raise Unreadable(f"body is {type(body).__name__}, not text")
        trade = Trade.model_validate_json(body)
        check_trade(trade)
        return trade
    except ValueError as exc:  # not JSON, or outside Trade's fields
        left_out("trades", trade_id, exc)
        return None


def _text(value: object, column: str) -> str:
    found = text_or_none(value, column)
    if found is None:
        raise Unreadable(f"{column} is NULL")
    return found

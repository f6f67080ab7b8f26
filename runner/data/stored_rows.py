"""What a resumed ``vigil data fetch`` appends to a partial file: only rows it does not hold.

A fetch killed during a later span leaves rows that a fetch from an earlier ``--from`` covers
again (``_Partial.resume_ms`` starts at the span's start and keeps them). Appended again they were
stored twice and counted as fetched, a funding settlement a few ms off a stored one was stored
beside it, and a stored row the exchange now gives otherwise was replaced without a word (the
merge keeps the newest). Now a stored row is kept, and one the exchange disagrees with is said.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Binance settles funding at most hourly (a few ms late at times): closer rows are one settlement
FUNDING_MIN_GAP_MS = 30 * 60_000


def not_stored_settlements(
    rows: list[tuple[int, float]], stored: dict[int, float], what: str, path: Path
) -> list[tuple[int, float]]:
    """``rows`` without the settlements ``stored`` holds: one within ``FUNDING_MIN_GAP_MS`` is
    the same settlement."""
    if not stored:
        return rows
    times = sorted(stored)
    new: list[tuple[int, float]] = []
    disagreeing: list[tuple[int, Any, int, Any]] = []
    for at, rate in rows:
        i = bisect.bisect_right(times, at - FUNDING_MIN_GAP_MS)
        if i == len(times) or times[i] >= at + FUNDING_MIN_GAP_MS:
            new.append((at, rate))
        elif times[i] != at or stored[times[i]] != rate:
            disagreeing.append((times[i], stored[times[i]], at, rate))
    _say(disagreeing, what, path)
    return new


def not_stored_bars(
    bars: Iterable[tuple[int, list[float]]], stored: dict[int, list[float]], what: str, path: Path
) -> list[tuple[int, list[float]]]:
    """``bars`` (open time, OHLCV) without those whose open time ``stored`` holds."""
    new: list[tuple[int, list[float]]] = []
    disagreeing: list[tuple[int, Any, int, Any]] = []
    for at, values in bars:
        held = stored.get(at)
        if held is None:
            new.append((at, values))
        elif held != values:
            disagreeing.append((at, held, at, values))
    _say(disagreeing, what, path)
    return new


def _say(disagreeing: list[tuple[int, Any, int, Any]], what: str, path: Path) -> None:
    if not disagreeing:
        return
    kept_ms, kept, at, given = disagreeing[0]
    log.warning(
        "%s: %d stored row(s) in %s disagree with the exchange's (first: stored %d %r, the "
        "exchange %d %r); the stored ones are kept: delete the file to fetch them all again",
        what,
        len(disagreeing),
        path,
        kept_ms,
        kept,
        at,
        given,
    )


__all__ = ["FUNDING_MIN_GAP_MS", "not_stored_bars", "not_stored_settlements"]

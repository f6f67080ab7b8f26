"""Finiteness checks of what goes into a snapshot: it cannot carry a NaN or an infinite number (the
decider would read it, JSON cannot hold it), so the builder names where one is and leaves it out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from agent.snapshot import TickerSnapshot


def ticker_finite(snapshot: TickerSnapshot) -> bool:
    """``not non_finite(snapshot.model_dump())`` without the dump (a decision checks three
    tickers): the ticker's floats and its timeframe summaries' (their only float fields)."""
    for value in snapshot.__dict__.values():
        if type(value) is float and not math.isfinite(value):
            return False
    for summary in snapshot.multi_tf.values():
        for value in summary.__dict__.values():
            if type(value) is float and not math.isfinite(value):
                return False
    return True


def non_finite(value: Any, path: str = "") -> list[str]:
    """Paths of the NaN / infinite numbers in a dumped model (the snapshot cannot carry them)."""
    if _all_finite(value):  # nearly always: then no path need be named
        return []
    return _non_finite_paths(value, path)


def _all_finite(value: Any) -> bool:
    """``non_finite(value) == []``, without naming paths or a call per number."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, Mapping):
        value = value.values()
    elif not isinstance(value, list | tuple):
        return True
    for item in value:
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind not in _NO_NUMBERS and not _all_finite(item):
            return False
    return True


#: exact types that hold no float (anything else is asked ``_all_finite``)
_NO_NUMBERS = frozenset({str, int, bool, type(None)})


def _non_finite_paths(value: Any, path: str) -> list[str]:
    if isinstance(value, float):
        return [] if math.isfinite(value) else [f"{path or 'value'}={value!r}"]
    if isinstance(value, Mapping):
        return [
            p for k, v in value.items() for p in _non_finite_paths(v, f"{path}.{k}".lstrip("."))
        ]
    if isinstance(value, list | tuple):
        return [p for i, v in enumerate(value) for p in _non_finite_paths(v, f"{path}[{i}]")]
    return []


__all__ = ["non_finite", "ticker_finite"]

"""The walks over a dumped snapshot: ``rounded`` (as sent and journaled), ``compact`` (as the
prompt sends it), and ``rounded_and_compact``, both in one walk.

Most of a snapshot is leaves, so the walks handle them in their parent's loop instead of by a
call each, and remember the floats they formatted (two thirds of a snapshot's floats were in the
one before: indicators of candles not closed since, the regime, outside data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import orjson

from agent.memo import FloatMemo
from core.rounding import scaled_round

FLOAT_DECIMALS = 8
_DECIMALS_SCALE: Final = 10.0**FLOAT_DECIMALS
#: sent nowhere the decider is told to look (the journal keeps them)
NOT_SENT = ("schema_version",)
#: significant digits of a float in the prompt: prices keep 6 (BTC to the dollar), the rest more
#: than any decision needs; the journal keeps 8 decimals
PROMPT_SIGNIFICANT_DIGITS = 6
FLOAT_SPEC = f".{PROMPT_SIGNIFICANT_DIGITS}g"

# --- rounded: floats at fixed precision, so the same market gives the same bytes --------------


def rounded(value: Any) -> Any:
    """Floats at ``FLOAT_DECIMALS`` (a non-finite one refused), mappings as dicts, tuples as
    lists, the rest as it is."""
    kind = type(value)  # exact-type fast paths first: a JSON dump is dicts, lists and scalars
    if kind is dict:
        return _rounded_dict(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, float):
        return _rounded_float(value)
    if isinstance(value, Mapping):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def _rounded_float(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"non-finite number in snapshot: {value!r}")
    # ``round(value, FLOAT_DECIMALS)``: a decision rounds some 45 floats it has not seen before
    return scaled_round(value, FLOAT_DECIMALS, _DECIMALS_SCALE)


ROUNDED: Final = FloatMemo(_rounded_float, 4096)
_rounded_exact_float: Final = ROUNDED.of

#: exact types the walks pass through as they are
_KEPT: Final = frozenset({str, int, bool, type(None)})


def _rounded_dict(value: dict[Any, Any]) -> dict[Any, Any]:
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
            out[key] = rounded(item)
    return out


# --- compact: the prompt's form --------------------------------------------------------------


def compact(value: Any) -> Any:
    """The snapshot as the prompt sends it: floats at ``PROMPT_SIGNIFICANT_DIGITS``, a null whose
    reason is in its object's ``unavailable`` left out (the prompt says absent = unavailable),
    empty ``unavailable`` maps and ``NOT_SENT`` fields dropped."""
    kind = type(value)  # exact types first: a dumped snapshot is mostly these
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is not dict:
        if isinstance(value, float):
            return _compact_float(value)
        if isinstance(value, list):
            return [compact(v) for v in value]
        if not isinstance(value, dict):
            return value
    return _compact_dict(value)


_NO_REASONS: Final[dict[Any, Any]] = {}
_MISSING: Final = object()

COMPACTED: Final = FloatMemo(lambda value: float(format(value, FLOAT_SPEC)), 4096)
_compact_float: Final = COMPACTED.of  # ``float(format(value, FLOAT_SPEC))``, remembered


def _compact_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    reasons = value.get("unavailable")
    explained = reasons if isinstance(reasons, dict) else _NO_REASONS
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if key in NOT_SENT:
            continue
        kind = type(item)
        if kind is float:
            out[key] = _compact_float(item)
        elif kind is str or kind is int or kind is bool:
            out[key] = item
        elif item is None:
            if key not in explained:
                out[key] = None
        elif not (key == "unavailable" and item == {}):
            out[key] = compact(item)
    return out


def compact_reusing(value: dict[Any, Any], base: Mapping[Any, Any], done: Mapping[Any, Any]) -> Any:
    """``compact(value)`` where ``value`` is a copy of ``base`` with some entries replaced,
    removed or added, and ``done`` is ``compact(base)``: an entry that is still the very object
    ``base`` holds is taken from ``done`` (a nested value's compact form depends on it alone)."""
    if type(value) is not dict:
        return compact(value)
    reasons = value.get("unavailable")
    explained = reasons if isinstance(reasons, dict) else _NO_REASONS
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if key in NOT_SENT:
            continue
        if item is None:
            if key not in explained:
                out[key] = None
        elif key in done and base.get(key, _MISSING) is item:
            out[key] = done[key]
        elif not (key == "unavailable" and item == {}):
            out[key] = compact(item)
    return out


# --- both in one walk ----------------------------------------------------------------------


def _both_float(value: float) -> tuple[float, float]:
    # ``_rounded_float`` written out: some 40 floats a decision are new, and a call each was a
    # sixth of their cost
    if not math.isfinite(value):
        raise ValueError(f"non-finite number in snapshot: {value!r}")
    done = scaled_round(value, FLOAT_DECIMALS, _DECIMALS_SCALE)
    return done, float(format(done, FLOAT_SPEC))


#: ``(rounded, compact)`` of an exact float, by value
_BOTH: Final = FloatMemo(_both_float, 4096)
_both_exact_float: Final = _BOTH.of
#: ``rounded_and_compact`` of an exact float
both_float: Final = _both_exact_float
#: ``_BOTH``'s entries (emptied in place, never replaced): the walk reads a float it has seen
#: there without the call (two thirds of a snapshot's floats were in the one before)
_both_seen: Final = _BOTH.entries.get


def rounded_and_compact(value: Any) -> tuple[Any, Any]:
    """``(rounded(value), compact(rounded(value)))`` in one walk: a decision needs both (the
    journal keeps the one, the prompt sends the other), and the walk was most of their cost."""
    kind = type(value)
    if kind is dict:
        return _both_dict(value)
    if kind is list:
        return _both_list(value)
    if kind is float:
        return _both_exact_float(value)
    if kind in _KEPT:
        return value, value
    done = rounded(value)
    return done, compact(done)


def _both_list(value: list[Any]) -> tuple[list[Any], list[Any]]:
    done: list[Any] = []
    out: list[Any] = []
    for item in value:
        # a snapshot's lists hold dicts (trades, memory items): straight to their walk
        pair = _both_dict(item) if type(item) is dict else rounded_and_compact(item)
        done.append(pair[0])
        out.append(pair[1])
    return done, out


def _reasons_of(reasons: Any) -> Any:
    """The reasons ``compact`` reads from an ``unavailable`` entry that is there (most dicts have
    none: asked first, as ``isinstance(None, Mapping)`` costs a fifth of a microsecond)."""
    return reasons if type(reasons) is dict or isinstance(reasons, Mapping) else _NO_REASONS


def _both_dict(value: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    # ``compact`` reads the rounded dict's reasons: the same keys as any mapping rounded
    reasons = value.get("unavailable")
    explained = _NO_REASONS if reasons is None else _reasons_of(reasons)
    done: dict[Any, Any] = {}
    out: dict[Any, Any] = {}
    for key, item in value.items():
        kind = type(item)
        if kind is float:
            pair = _both_seen(item) or _both_exact_float(item)
            done[key] = pair[0]
            if key not in NOT_SENT:
                out[key] = pair[1]
        elif kind is str or kind is int or kind is bool:
            done[key] = item
            if key not in NOT_SENT:
                out[key] = item
        elif item is None:
            done[key] = None
            if key not in NOT_SENT and key not in explained:
                out[key] = None
        else:
            # most nested values are dicts: straight to their walk, a call fewer each
            nested, nested_compact = _both_dict(item) if kind is dict else rounded_and_compact(item)
            done[key] = nested
            if key not in NOT_SENT and not (key == "unavailable" and nested == {}):
                out[key] = nested_compact
    return done, out


# --- both, of a value whose JSON dump is itself ------------------------------------------------


class NotExact(Exception):
    """A value that pydantic's JSON dump would change or refuse (a tuple, a subclass, a model, a
    NaN, a key that is no str): its pair is made from the dump instead."""


def exact_pair(value: Any) -> tuple[Any, Any]:
    """``rounded_and_compact(value)`` for a value that is exact JSON (dicts with str keys, lists,
    str, int, bool, None, finite floats, exact types all), so its dump would be an equal copy;
    raises ``NotExact`` (a non-finite float: ``ValueError``) at anything else."""
    kind = type(value)
    if kind is dict:
        return _exact_dict(value)
    if kind is list:
        return _exact_list(value)
    if kind is float:
        return _both_seen(value) or _both_exact_float(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value, value
    raise NotExact


def _exact_list(value: list[Any]) -> tuple[list[Any], list[Any]]:
    done: list[Any] = []
    out: list[Any] = []
    for item in value:
        pair = _exact_dict(item) if type(item) is dict else exact_pair(item)
        done.append(pair[0])
        out.append(pair[1])
    return done, out


def _exact_dict(value: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    # ``_both_dict`` with every key and leaf's type checked: a reason map that is no dict is
    # either no mapping (no reasons) or not exact (refused when the loop reaches it)
    reasons = value.get("unavailable")
    explained = reasons if type(reasons) is dict else _NO_REASONS
    done: dict[Any, Any] = {}
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if type(key) is not str:
            raise NotExact
        kind = type(item)
        if kind is float:
            pair = _both_seen(item) or _both_exact_float(item)
            done[key] = pair[0]
            if key not in NOT_SENT:
                out[key] = pair[1]
        elif kind is str or kind is int or kind is bool:
            done[key] = item
            if key not in NOT_SENT:
                out[key] = item
        elif item is None:
            done[key] = None
            if key not in NOT_SENT and key not in explained:
                out[key] = None
        else:
            nested, nested_compact = _exact_dict(item) if kind is dict else exact_pair(item)
            done[key] = nested
            if key not in NOT_SENT and not (key == "unavailable" and nested == {}):
                out[key] = nested_compact
    return done, out


class KeptForms:
    """``rounded_and_compact`` of a dumped snapshot whose entries named in ``fields`` keep their
    pair while they stay the same: the recent trades (ten of them, a sixth of the walk with
    memory on) change at an exit, the reasons and outside data about daily.

    "The same" is the same JSON bytes (the same keys in the same order, strings, and types:
    ``1``, ``1.0``, ``true`` and ``-0.0`` are told apart) and equal values (orjson writes a NaN
    as null, and a NaN equals nothing, so a value with one is never taken for one with a null).
    A value orjson refuses (a subclass, a model, a non-string key) is walked every time. The
    pairs handed out are shared between the snapshots that had the same entry: read-only."""

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = frozenset(fields)
        self._kept: dict[str, tuple[bytes, Any, tuple[Any, Any]]] = {}

    def both(self, value: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``rounded_and_compact(value)`` (the same walk at the top, in the same order)."""
        reasons = value.get("unavailable")
        explained = (
            reasons if type(reasons) is dict or isinstance(reasons, Mapping) else _NO_REASONS
        )
        done: dict[Any, Any] = {}
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if item is None:
                done[key] = None
                if key not in NOT_SENT and key not in explained:
                    out[key] = None
                continue
            pair = self.pair(key, item) if key in self.fields else rounded_and_compact(item)
            done[key] = pair[0]
            if key not in NOT_SENT and not (key == "unavailable" and pair[0] == {}):
                out[key] = pair[1]
        return done, out

    def pair(self, name: str, item: Any) -> tuple[Any, Any]:
        """``both``'s pair for the entry ``name`` of a dump, ``item``."""
        try:
            encoded = orjson.dumps(item, option=_OWN_TYPES_ONLY)
        except TypeError:  # orjson.JSONEncodeError is one
            return rounded_and_compact(item)
        kept = self._kept.get(name)
        if kept is not None and kept[0] == encoded and kept[1] == item:
            return kept[2]
        pair = rounded_and_compact(item)
        self._kept[name] = (encoded, item, pair)
        return pair

    def exact(self, name: str, item: Any) -> tuple[Any, Any]:
        """``both``'s pair for the entry ``name`` of a dump that holds ``item`` unchanged: raises
        ``NotExact`` when it would not (``exact_pair``). A kept pair is taken on the same terms
        as ``both``'s; the entry kept for the next is a copy of the dump (``item`` is not this
        walk's to keep: its owner may change it in place)."""
        try:
            encoded = orjson.dumps(item, option=_OWN_TYPES_ONLY)
        except TypeError:  # orjson.JSONEncodeError is one
            raise NotExact from None
        kept = self._kept.get(name)
        if kept is not None and kept[0] == encoded and kept[1] == item:
            return kept[2]
        pair = exact_pair(item)
        self._kept[name] = (encoded, orjson.loads(encoded), pair)
        return pair


#: orjson refuses subclasses, dataclasses and dates instead of writing them as their base type
_OWN_TYPES_ONLY: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)

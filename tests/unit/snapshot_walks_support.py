"""What both snapshot-walk test files compare against: the one-call-per-node definitions the fast
walks replace, an equality of the very same types (floats bit for bit), and a snapshot of hostile
shapes."""

from __future__ import annotations

import math
import struct
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from agent.snapshot import MarketSnapshot
from agent.snapshot_walks import FLOAT_DECIMALS, FLOAT_SPEC, NOT_SENT


class Model(BaseModel):
    x: float = 1.0


def reference_is_plain(value: Any) -> bool:
    kind = type(value)
    if kind is dict:
        return all(type(key) is str and reference_is_plain(item) for key, item in value.items())
    if kind is list or kind is tuple:
        return all(reference_is_plain(item) for item in value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return not isinstance(value, BaseModel | Mapping)


def reference_rounded(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: reference_rounded(v) for k, v in value.items()}
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"non-finite number in snapshot: {value!r}")
        return round(value, FLOAT_DECIMALS)
    if isinstance(value, Mapping):
        return {k: reference_rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [reference_rounded(v) for v in value]
    return value


def reference_compact(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is not dict:
        if isinstance(value, float):
            return float(format(value, FLOAT_SPEC))
        if isinstance(value, list):
            return [reference_compact(v) for v in value]
        if not isinstance(value, dict):
            return value
    reasons = value.get("unavailable")
    explained = set(reasons) if isinstance(reasons, dict) else set()
    return {
        k: reference_compact(v)
        for k, v in value.items()
        if k not in NOT_SENT
        and not (v is None and k in explained)
        and not (k == "unavailable" and v == {})
    }


def same(a: Any, b: Any) -> bool:
    """Equal values of the very same types; floats bit for bit (the sign of a zero counts)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or a is b


def outcome(walk: Any, value: Any) -> tuple[str, Any]:
    try:
        return "value", walk(value)
    except Exception as exc:
        return type(exc).__name__, str(exc)


def hostile_snapshot() -> MarketSnapshot:
    """Outside data of odd shapes (tuples, int keys, a model, tiny and huge floats): the JSON dump
    and the rounding leave only what ``PlainJson`` promises."""
    return MarketSnapshot(
        at_ms=1_000,
        tickers={},
        btc_price=90_000.123456789,
        btc_change_1h_pct=-0.0,
        btc_change_24h_pct=None,
        open_interest={"BTC/USDT": {1: (1.5, 2), "m": Model(x=1e-12), "o": OrderedDict(a=1e300)}},
        regime=None,
        exposure_scale=1.0,
        open_positions=[],
        portfolio_value=10_000.0,
        cash=None,
        gate_wake_reasons=["test"],
        unavailable={"regime": "test", "cash": "test"},
    )

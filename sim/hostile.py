"""A hostile-frame corpus: every way a kline frame can be wrong, made from a good frame.

``hostile_frame(kind, template, now_ms, rng)`` turns a good combined-stream kline frame (a dict, as
the simulator or Binance sends it) into one bad frame of ``kind``. Each kind is bad whatever the
listener saw before (a future time is past the allowed skew, a spike is far out of any band), so a
test can require that every one of them is counted and none moves a stream. ``OVERSIZED`` only
makes sense over a socket (the websocket layer refuses it before any parsing).

``HostileProxy`` (``sim.hostile_proxy``) interleaves these with a real upstream's frames.
"""

from __future__ import annotations

import copy
import enum
import random
from typing import Any, Final

import orjson

#: beyond the listener's default allowed skew (300 s) and frame age (6 h)
FAR_MS: Final = 24 * 3_600_000


class HostileKind(enum.StrEnum):
    WRONG_TYPE = "wrong_type"
    MISSING_FIELD = "missing_field"
    NON_FINITE = "non_finite"  # "NaN", "Infinity" strings
    HUGE_NUMBER = "huge_number"  # 10**300 as a decimal (finite, absurd)
    LOOSE_NUMBER = "loose_number"  # " 105", "1_05", "1.05e2", fullwidth digits: float() reads them
    NEGATIVE_VOLUME = "negative_volume"
    NEGATIVE_PRICE = "negative_price"
    FUTURE_TIME = "future_time"
    PAST_TIME = "past_time"
    EARLY_CLOSE = "early_close"
    SPIKE = "spike"  # a consistent candle far away from the market
    INCONSISTENT = "inconsistent"  # high below low
    WRONG_SYMBOL = "wrong_symbol"
    UNICODE = "unicode"
    DEEP_NESTING = "deep_nesting"
    TRUNCATED = "truncated"
    DUPLICATED_KEYS = "duplicated_keys"  # the last (bad) value wins in orjson
    NOT_AN_OBJECT = "not_an_object"
    GARBAGE = "garbage"
    OVERSIZED = "oversized"


#: what can be sent through ``MarketListener.frames.on_frame`` (no websocket layer in between)
IN_PROCESS_KINDS: Final = tuple(k for k in HostileKind if k is not HostileKind.OVERSIZED)
_REQUIRED: Final = ("E", "s", "k", "k.t", "k.T", "k.i", "k.o", "k.h", "k.l", "k.c", "k.v", "k.x")
_PRICES: Final = ("o", "h", "l", "c")


def hostile_frame(
    kind: HostileKind,
    template: dict[str, Any],
    now_ms: int,
    rng: random.Random,
    *,
    oversized_bytes: int = (1 << 20) + 1,
) -> bytes:
    """One bad frame of ``kind`` made from the good combined frame ``template`` (not modified)."""
    frame = copy.deepcopy(template)
    data, k = frame["data"], frame["data"]["k"]
    if kind is HostileKind.WRONG_TYPE:
        field, value = rng.choice(
            [
                *(("E", str(data["E"])), ("E", float(data["E"])), ("x", "true"), ("x", 1)),
                *(("t", str(k["t"])), ("o", [k["o"]]), ("c", {"v": k["c"]}), ("v", None)),
                *(("h", True), ("s", 42)),
            ]
        )
        (data if field in ("E", "s") else k)[field] = value
    elif kind is HostileKind.MISSING_FIELD:
        path = rng.choice(_REQUIRED)
        del (k if path.startswith("k.") else data)[path.removeprefix("k.")]
    elif kind is HostileKind.NON_FINITE:
        k[rng.choice((*_PRICES, "v"))] = rng.choice(("NaN", "nan", "Infinity", "-inf", "inf"))
    elif kind is HostileKind.HUGE_NUMBER:  # written as Binance would: the guard must refuse it
        huge = rng.choice(("1" + "0" * 300, f"{1.7976931348623157e308:.0f}", "9" * 400))
        field = rng.choice(("c", "v"))
        k[field] = huge
        if field == "c":
            k["h"] = huge
    elif kind is HostileKind.NEGATIVE_VOLUME:
        k["v"] = f"-{rng.uniform(0.001, 1e6):.3f}"
    elif kind is HostileKind.NEGATIVE_PRICE:
        k[rng.choice(("o", "l"))] = rng.choice(("-1", "0", "-0.0", "0.00000000"))
        k["l"] = k["l"] if float(k["l"]) <= 0 else "0"
    elif kind is HostileKind.LOOSE_NUMBER:
        _respell(data, k, rng)
    elif kind is HostileKind.FUTURE_TIME:
        _future(data, k, now_ms, rng)
    elif kind is HostileKind.PAST_TIME:
        data["E"] = rng.choice((0, 1, now_ms - FAR_MS - rng.randrange(1, 10**9)))
    elif kind is HostileKind.EARLY_CLOSE:
        k["x"] = True
        data["E"] = min(data["E"], k["T"] - 60_000)
    elif kind is HostileKind.SPIKE:
        factor = rng.choice((50.0, 1e-4, 1e4, 0.01))
        value = f"{float(k['c']) * factor:.8g}"
        k.update(o=value, h=value, l=value, c=value)
    elif kind is HostileKind.INCONSISTENT:
        k["h"], k["l"] = f"{float(k['l']) * 0.5:.8g}", f"{float(k['h']) * 2:.8g}"
    elif kind is HostileKind.WRONG_SYMBOL:
        data["s"] = rng.choice(("ETHBTC", "XXXUSDT", "BTCUSDT_PERP", "", "BTC/USDT"))
        k["s"] = data["s"]
    elif kind is HostileKind.UNICODE:
        text = "".join(chr(rng.randrange(0x80, 0x2FFFF)) for _ in range(8))
        text = "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)
        target = rng.choice(("s", "k.i", "k.c", "stream"))
        if target == "stream":
            frame["stream"] = text
        else:
            (k if target.startswith("k.") else data)[target.removeprefix("k.")] = text
    else:
        return _raw(kind, frame, rng, oversized_bytes)
    return orjson.dumps(frame)


_DIGITS: Final = "0123456789"
_FULLWIDTH: Final = str.maketrans(_DIGITS, "".join(chr(0xFF10 + i) for i in range(10)))
_ARABIC_INDIC: Final = str.maketrans(_DIGITS, "".join(chr(0x0660 + i) for i in range(10)))


def _respell(data: dict[str, Any], k: dict[str, Any], rng: random.Random) -> None:
    """One number spelled loosely, a millisecond later: a parser that took the spelling would
    publish the frame (the same values at the same instant would be a duplicate instead)."""
    field = rng.choice((*_PRICES, "v"))
    k[field] = _loose(k[field], rng)
    data["E"] += 1


def _loose(decimal: str, rng: random.Random) -> str:
    """``decimal`` (as Binance writes it) spelled another way ``float()`` reads as the same value."""
    whole, dot, fraction = decimal.partition(".")
    spellings = [
        f" {decimal}",
        f"{decimal}\n",
        f"\u2003{decimal}",  # an em space: float() strips Unicode spaces too
        decimal.translate(_FULLWIDTH),
        decimal.translate(_ARABIC_INDIC),
        f"+{decimal}",
        f"{float(decimal):e}",
        f"{whole}{dot}{fraction}_0" if dot else f"{whole}_0e-1",
        f"{decimal}." if not dot else f"{whole}.{fraction}e0",
    ]
    if len(whole) > 1:
        spellings.append(f"{whole[0]}_{whole[1:]}{dot}{fraction}")
    return rng.choice(spellings)


def _future(data: dict[str, Any], k: dict[str, Any], now_ms: int, rng: random.Random) -> None:
    ahead = now_ms + FAR_MS + rng.randrange(0, 10**12)
    choice = rng.randrange(3)
    if choice == 0:
        data["E"] = rng.choice((ahead, 2**63 - 1))
    else:  # the candle itself lies ahead (aligned, so only the clock can tell)
        step = k["T"] - k["t"] + 1
        k["t"] = ahead - ahead % step
        k["T"] = k["t"] + step - 1
        data["E"] = k["t"] + 1_000 if choice == 1 else max(data["E"], k["t"])


def _raw(kind: HostileKind, frame: dict[str, Any], rng: random.Random, oversized: int) -> bytes:
    """Kinds that are bad bytes rather than a bad value."""
    good = orjson.dumps(frame)
    if kind is HostileKind.DEEP_NESTING:
        depth = rng.choice((600, 2_000, 50_000))
        return b'{"stream":' + b"[" * depth + b"]" * depth + b"}"
    if kind is HostileKind.TRUNCATED:
        return good[: rng.randrange(1, len(good) - 1)]
    if kind is HostileKind.DUPLICATED_KEYS:
        bad = copy.deepcopy(frame["data"])
        bad["k"]["c"] = "NaN"
        return (
            good[:-1]
            + b',"data":'
            + orjson.dumps(bad)
            + b"}"  # {"stream":..,"data":good,"data":bad}
        )
    if kind is HostileKind.NOT_AN_OBJECT:
        return rng.choice((b"[]", b"1", b'"kline"', b"null", b"true", b"[" + good + b"]"))
    if kind is HostileKind.GARBAGE:
        return rng.randbytes(rng.randrange(1, 200))
    if kind is HostileKind.OVERSIZED:
        pad = b" " * max(0, oversized - len(good))
        return good[:-1] + pad + b"}"
    raise ValueError(f"not a raw kind: {kind}")


__all__ = ["FAR_MS", "IN_PROCESS_KINDS", "HostileKind", "hostile_frame"]

"""market.parse: real captured frames, every rejection reason, and the fast path's equivalence."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from market_test_support import combined, kline_frame, kline_payload
from property_budget import examples

from core.events import MarketTick
from market import parse
from market.mark_price import MarkPrice, parse_mark_price_frame
from market.parse import (
    BinanceKline,
    ServerShutdown,
    decode_kline,
    parse_frame,
    parse_kline_frame,
)
from market.wire import FrameRejected, RejectReason, decode, payload_of, unified_ticker

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "binance-ws"


def _fixture_lines() -> list[str]:
    lines = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        lines += [line for line in path.read_text().splitlines() if line.strip()]
    return lines


def _is_kline(line: str) -> bool:
    message = orjson.loads(line)
    data = message.get("data") if isinstance(message, dict) else None
    return isinstance(data, dict) and data.get("e") == "kline"


KLINE_LINES = [line for line in _fixture_lines() if _is_kline(line)]
OTHER_LINES = [line for line in _fixture_lines() if not _is_kline(line)]


def test_fixtures_hold_both_kinds() -> None:
    assert len(KLINE_LINES) == 10  # 5 distinct kline frames, in both files
    assert len(OTHER_LINES) == 46


@pytest.mark.parametrize("line", KLINE_LINES)
def test_every_captured_kline_frame_decodes_exactly(line: str) -> None:
    data = orjson.loads(line)["data"]
    k = data["k"]
    kline = decode_kline(line)
    assert isinstance(kline, BinanceKline)
    assert kline.symbol == data["s"]
    assert kline.interval == k["i"]
    assert (kline.open_time_ms, kline.close_time_ms) == (k["t"], k["T"])
    assert (kline.open, kline.high, kline.low, kline.close, kline.volume) == tuple(
        float(k[key]) for key in "ohlcv"
    )
    assert kline.closed is k["x"]
    assert kline.event_time_ms == data["E"]


@pytest.mark.parametrize("line", KLINE_LINES)
def test_captured_klines_become_ticks_once_on_a_vigil_timeframe(line: str) -> None:
    """The captures are 1m / 1M, which vigil does not trade on: as captured they are rejected as
    such; re-timed to 15m (same prices, symbol, flags) they become exact MarketTicks."""
    with pytest.raises(FrameRejected) as rejected:
        parse_kline_frame(line)
    assert rejected.value.reason is RejectReason.UNKNOWN_INTERVAL

    message = orjson.loads(line)
    k = message["data"]["k"]
    k["i"], k["t"] = "15m", 1_653_818_400_000
    k["T"] = k["t"] + 900_000 - 1
    message["stream"] = message["stream"].rsplit("_", 1)[0] + "_15m"
    tick = parse_kline_frame(orjson.dumps(message))
    assert tick.ticker == unified_ticker(message["data"]["s"])
    assert tick.timeframe == "15m"
    assert tick.close == float(k["c"]) and tick.volume == float(k["v"])
    assert tick.open_time_ms == k["t"] and tick.close_time_ms == k["T"]


@pytest.mark.parametrize("line", OTHER_LINES)
def test_non_kline_captures_are_recognised(line: str) -> None:
    payload = orjson.loads(line)
    data = payload.get("data") if isinstance(payload, dict) else None
    if (isinstance(data, dict) and data.get("e") == "markPriceUpdate") or (
        isinstance(data, list) and all(d.get("e") == "markPriceUpdate" for d in data)
    ):
        marks = parse_frame(line)
        assert isinstance(marks, tuple)
        assert all(isinstance(m, MarkPrice) for m in marks)
        return
    with pytest.raises(FrameRejected) as rejected:
        parse_frame(line)
    assert rejected.value.reason is RejectReason.NOT_KLINE
    with pytest.raises(FrameRejected) as rejected:
        parse_kline_frame(line)
    assert rejected.value.reason is RejectReason.NOT_KLINE


def test_mark_price_frames_parse_with_optional_fields() -> None:
    usdm = next(line for line in OTHER_LINES if '"btcusdt@markPrice"' in line)
    (mark,) = parse_mark_price_frame(usdm)
    assert mark == MarkPrice(
        ticker="BTC/USDT",
        event_time_ms=1617308820003,
        mark_price=58940.14924532,
        index_price=58857.26693664,
        estimated_settle_price=58905.14663658,
        funding_rate=0.00058455,
        next_funding_time_ms=1617321600000,
    )
    coin_m = next(line for line in OTHER_LINES if '"btcusd_perp@markPrice"' in line)
    (mark,) = parse_mark_price_frame(coin_m)
    assert mark.ticker == "BTC/USD:BTC" and mark.index_price is None
    arrays = [line for line in OTHER_LINES if "!markPrice@arr" in line]
    assert [len(parse_mark_price_frame(line)) for line in arrays] == [2, 2]


def test_mark_price_rejects_non_finite_and_wrong_types() -> None:
    good = {"e": "markPriceUpdate", "E": 1, "s": "BTCUSDT", "p": "1.5", "r": "", "T": 0}
    assert parse_mark_price_frame(orjson.dumps(good))[0].funding_rate is None
    # an absent or "" settle price is unavailable (coin-margined contracts), not a bad one
    assert parse_mark_price_frame(orjson.dumps({**good, "P": ""}))[0].estimated_settle_price is None
    for bad, reason in [
        ({**good, "p": "NaN"}, RejectReason.NON_FINITE),
        ({**good, "p": "0"}, RejectReason.NON_POSITIVE_PRICE),
        ({**good, "i": "0"}, RejectReason.NON_POSITIVE_PRICE),
        ({**good, "P": "0"}, RejectReason.NON_POSITIVE_PRICE),
        ({**good, "P": "-1.5"}, RejectReason.NON_POSITIVE_PRICE),
        ({**good, "E": "1"}, RejectReason.MALFORMED),
        ({**good, "p": None}, RejectReason.MALFORMED),
    ]:
        with pytest.raises(FrameRejected) as rejected:
            parse_mark_price_frame(orjson.dumps(bad))
        assert rejected.value.reason is reason


@pytest.mark.parametrize(
    "frame",
    [
        {"e": "serverShutdown", "E": 1770123456789},
        {"event": {"e": "serverShutdown", "E": 1770123456789}},
        {"stream": "x", "data": {"e": "serverShutdown", "E": 1770123456789}},
    ],
)
def test_server_shutdown_in_every_wrapper(frame: dict[str, Any]) -> None:
    assert parse_frame(orjson.dumps(frame)) == ServerShutdown(event_time_ms=1770123456789)


def test_a_good_frame_parses_to_the_exact_tick() -> None:
    tick = parse_kline_frame(
        kline_frame(open_ms=1_740_787_200_000, event_ms=1_740_787_260_123, closed=True)
    )
    assert tick == MarketTick(
        ticker="BTC/USDT",
        timeframe="15m",
        open_time_ms=1_740_787_200_000,
        close_time_ms=1_740_788_099_999,
        open=100.0,
        high=110.0,
        low=90.0,
        close=105.0,
        volume=12.5,
        closed=True,
        event_time_ms=1_740_787_260_123,
    )
    raw_stream = orjson.dumps(kline_payload())  # /ws mode: no combined wrapper
    assert parse_kline_frame(raw_stream) == parse_kline_frame(kline_frame())
    assert parse_frame(kline_frame().decode()) == parse_kline_frame(kline_frame())


def _mutated(mutate: Any) -> bytes:
    frame = combined(kline_payload())
    mutate(frame)
    return orjson.dumps(frame)


def _set(path: str, value: Any) -> Any:
    def mutate(frame: dict[str, Any]) -> None:
        node = frame
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[key]
        if value is _DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value

    return mutate


_DELETE = object()

BAD_FRAMES = [
    (b"not json {", RejectReason.MALFORMED),
    (b"[1, 2]", RejectReason.MALFORMED),
    (b'{"stream": "x", "data": 5}', RejectReason.MALFORMED),
    (_mutated(_set("data.k", _DELETE)), RejectReason.MALFORMED),
    (_mutated(_set("data.k", [1])), RejectReason.MALFORMED),
    (_mutated(_set("data.E", _DELETE)), RejectReason.MALFORMED),
    (_mutated(_set("data.k.t", "1740787200000")), RejectReason.MALFORMED),
    (_mutated(_set("data.k.x", "false")), RejectReason.MALFORMED),
    (_mutated(_set("data.k.c", True)), RejectReason.MALFORMED),
    (_mutated(_set("data.k.c", "1.0abc")), RejectReason.MALFORMED),
    (_mutated(_set("data.k.v", None)), RejectReason.MALFORMED),
    (_mutated(_set("stream", 7)), RejectReason.MALFORMED),
    (_mutated(_set("data.e", "aggTrade")), RejectReason.NOT_KLINE),
    (_mutated(_set("data.k.c", "NaN")), RejectReason.NON_FINITE),
    (_mutated(_set("data.k.h", "inf")), RejectReason.NON_FINITE),
    (_mutated(_set("data.k.v", "-inf")), RejectReason.NON_FINITE),
    (_mutated(_set("data.k.l", "0")), RejectReason.NON_POSITIVE_PRICE),
    (_mutated(_set("data.k.c", "-1")), RejectReason.NON_POSITIVE_PRICE),
    (_mutated(_set("data.k.v", "-0.5")), RejectReason.NEGATIVE_VOLUME),
    (_mutated(_set("data.k.h", "80.0")), RejectReason.INCONSISTENT),  # high < low
    (_mutated(_set("data.k.c", "111.0")), RejectReason.INCONSISTENT),  # close above high
    (_mutated(_set("data.k.o", "89.0")), RejectReason.INCONSISTENT),  # open below low
    (_mutated(_set("data.k.T", 1_740_787_200_000 + 60_000)), RejectReason.INCONSISTENT),
    (_mutated(_set("data.k.s", "ETHUSDT")), RejectReason.INCONSISTENT),
    (_mutated(_set("stream", "ethusdt@kline_15m")), RejectReason.INCONSISTENT),
    (_mutated(_set("data.k.t", 1_740_787_200_000 + 60_000)), RejectReason.INCONSISTENT),
    (_mutated(_set("data.k.i", "7m")), RejectReason.UNKNOWN_INTERVAL),
    (_mutated(_set("data.s", "WHATEVER")), RejectReason.INCONSISTENT),
    (_mutated(_set("data.k.v", "-0")), RejectReason.NEGATIVE_VOLUME),  # was taken as -0.0
    (_mutated(_set("data.k.v", "-0.000")), RejectReason.NEGATIVE_VOLUME),
]


@pytest.mark.parametrize(("raw", "reason"), BAD_FRAMES)
def test_bad_frames_are_rejected_with_their_reason(raw: bytes, reason: RejectReason) -> None:
    for parser in (parse_kline_frame, parse_frame):
        with pytest.raises(FrameRejected) as rejected:
            parser(raw)
        assert rejected.value.reason is reason, rejected.value


def test_unknown_symbols_are_rejected() -> None:
    payload = kline_payload()
    payload["s"] = payload["k"]["s"] = "NOTASYMBOL"
    with pytest.raises(FrameRejected) as rejected:
        parse_kline_frame(orjson.dumps(payload))
    assert rejected.value.reason is RejectReason.UNKNOWN_SYMBOL


@pytest.mark.parametrize(
    ("symbol", "ticker"),
    [
        ("BTCUSDT", "BTC/USDT"),
        ("1000PEPEUSDT", "1000PEPE/USDT"),
        ("ETHUSDC", "ETH/USDC"),
        ("BTCUSDT_220624", "BTC/USDT:USDT-220624"),
        ("BTCUSD_PERP", "BTC/USD:BTC"),
        ("BTCUSD_220624", "BTC/USD:BTC-220624"),
    ],
)
def test_unified_tickers(symbol: str, ticker: str) -> None:
    assert unified_ticker(symbol) == ticker


# --- the fast path and the careful path must agree on every input ------------------------------


def _careful(raw: bytes) -> MarketTick:
    """Parse without the fast path: the reference behaviour."""
    stream, payload = payload_of(decode(raw))
    if type(payload) is not dict or payload.get("e") != "kline":
        raise FrameRejected(RejectReason.NOT_KLINE)
    return parse._tick(stream, payload)


_decimal = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64).map(repr),
    st.floats(min_value=-10, max_value=1e6, allow_nan=False).map(lambda x: f"{x:.4f}"),
    st.sampled_from(["0", "-0.0", "1e400", "NaN", "abc", ""]),
    # what float() reads and Binance never writes: neither path may take it
    st.sampled_from(
        [" 105 ", "\uff11\uff10\uff15", "1_05", "1.05e2", "+105", "105.", ".5", "-0", "105\n"]
    ),
    st.integers(-5, 10**6),
    st.booleans(),
    st.none(),
)


@settings(max_examples=examples(400), deadline=None)
@given(
    o=_decimal,
    h=_decimal,
    low=_decimal,
    c=_decimal,
    v=_decimal,
    closed=st.one_of(st.booleans(), st.sampled_from([0, 1, "true"])),
    interval=st.sampled_from(["5m", "15m", "1h", "4h", "1m", "1M", "2m"]),
    shift_ms=st.sampled_from([0, 1, 60_000]),
    event_ms=st.one_of(st.integers(0, 2**53), st.sampled_from(["1", 1.5])),
    stream_suffix=st.sampled_from(["", "x"]),
)
def test_fast_path_matches_careful_path(
    o: Any,
    h: Any,
    low: Any,
    c: Any,
    v: Any,
    closed: Any,
    interval: str,
    shift_ms: int,
    event_ms: Any,
    stream_suffix: str,
) -> None:
    payload = kline_payload(interval=interval, o=o, h=h, low=low, c=c, v=v)
    payload["k"]["x"] = closed
    payload["k"]["t"] += shift_ms
    payload["E"] = event_ms
    frame = combined(payload)
    frame["stream"] += stream_suffix
    raw = orjson.dumps(frame)
    # a good frame of the same stream first, so the fast path knows the stream and is in play
    parse_kline_frame(kline_frame(interval=interval if interval in {"5m", "1h", "4h"} else "15m"))

    def outcome(parser: Any) -> Any:
        try:
            return parser(copy.copy(raw))
        except FrameRejected as exc:
            return exc.reason

    fast, careful = outcome(parse_kline_frame), outcome(_careful)
    assert fast == careful
    if isinstance(fast, MarketTick):
        values = (fast.open, fast.high, fast.low, fast.close, fast.volume)
        assert all(math.isfinite(x) for x in values)
        assert 0 < fast.low <= min(fast.open, fast.close) <= max(fast.open, fast.close) <= fast.high
        assert fast.volume >= 0


def _binance_decimal(min_units: int, max_units: int, decimals: int) -> Any:
    """Decimal strings as Binance writes them: fixed decimals, or none (a whole number)."""
    fixed = st.integers(min_units, max_units).map(lambda n: f"{n / 10**decimals:.{decimals}f}")
    whole = st.integers(max(1, min_units // 10**decimals), max_units // 10**decimals).map(str)
    return st.one_of(fixed, whole)


_price = _binance_decimal(1, 10**17, 8)  # 0.00000001 .. 1,000,000,000


@settings(max_examples=examples(300), deadline=None)
@given(
    prices=st.lists(_price, min_size=4, max_size=4),
    v=st.one_of(st.just("0"), st.just("0.000"), _binance_decimal(0, 10**15, 3)),
    interval=st.sampled_from(["5m", "15m", "1h", "4h"]),
    bucket=st.integers(0, 10**6),
    closed=st.booleans(),
)
def test_fast_path_takes_every_valid_frame(
    prices: list[str], v: str, interval: str, bucket: int, closed: bool
) -> None:
    low, a, b, high = sorted(prices, key=float)
    step = {"5m": 300_000, "15m": 900_000, "1h": 3_600_000, "4h": 14_400_000}[interval]
    payload = kline_payload(
        interval=interval, open_ms=bucket * step, o=a, h=high, low=low, c=b, v=v, closed=closed
    )
    raw = orjson.dumps(combined(payload))
    parse_kline_frame(raw)  # the first frame of a stream registers it
    fast = parse._fast_tick(decode(raw))
    assert fast is not None
    assert fast == _careful(raw)
    expected = tuple(float(x) for x in (a, high, low, b, v))
    assert (fast.open, fast.high, fast.low, fast.close, fast.volume) == expected

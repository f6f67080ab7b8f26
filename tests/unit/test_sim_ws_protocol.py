"""The websocket server's pure parts: URL and stream parsing, frame shapes, the catch-up schedule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from market.timeframes import TIMEFRAME_MS
from sim.feed import KlineState
from sim.ws_streams import (
    KlineFormat,
    StreamSpec,
    Subscription,
    UnknownStreamError,
    due_instants,
    kline_payload,
    mark_price_payload,
    parse_request_path,
    parse_stream,
)

TICKERS = ("BTC/USDT", "ETH/USDT")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "binance-ws"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (
            "/stream?streams=btcusdt@kline_15m/ethusdt@kline_1h",
            (True, ["btcusdt@kline_15m", "ethusdt@kline_1h"]),
        ),
        ("/market/stream?streams=btcusdt@kline_4h", (True, ["btcusdt@kline_4h"])),
        ("/public/stream?streams=btcusdt@markPrice", (True, ["btcusdt@markPrice"])),
        ("/stream", (True, [])),
        ("/ws/btcusdt@kline_5m", (False, ["btcusdt@kline_5m"])),
        ("/market/ws/btcusdt@markPrice@1s", (False, ["btcusdt@markPrice@1s"])),
        ("/ws", (False, [])),
        ("/", None),
        ("/api/v3/klines", None),
        ("/streams?streams=btcusdt@kline_5m", None),
    ],
)
def test_request_paths(path: str, expected: tuple[bool, list[str]] | None) -> None:
    assert parse_request_path(path) == expected


def test_kline_and_mark_price_streams() -> None:
    assert parse_stream("btcusdt@kline_15m", TICKERS, 250) == StreamSpec(
        "btcusdt@kline_15m", "BTC/USDT", "BTCUSDT", "15m", 250
    )
    assert parse_stream("ETHUSDT@kline_4h", TICKERS, 250).name == "ethusdt@kline_4h"
    assert parse_stream("btcusdt@markPrice", TICKERS, 250).period_ms == 3000
    mark_1s = parse_stream("btcusdt@markPrice@1s", TICKERS, 250)
    assert (mark_1s.timeframe, mark_1s.period_ms) == (None, 1000)


@pytest.mark.parametrize(
    "name",
    [
        "btcusdt",  # no type
        "btcusdt@kline_1m",  # Binance has it, the recording does not
        "btcusdt@kline_1d",
        "btcusdt@aggTrade",
        "btcusdt@markPrice@2s",
        "solusdt@kline_5m",  # not served by this feed
        "btcusd_perp@kline_5m",  # coin-margined
        "@kline_5m",
    ],
)
def test_unknown_streams_are_refused_by_name(name: str) -> None:
    with pytest.raises(UnknownStreamError, match="invalid stream"):
        parse_stream(name, TICKERS, 250)


def _fixture_frame(stream_prefix: str) -> dict[str, Any]:
    for path in FIXTURES.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            frame: dict[str, Any] = orjson.loads(line)
            if frame.get("stream", "").startswith(stream_prefix):
                return frame
    raise AssertionError(f"no {stream_prefix} frame in {FIXTURES}")


def test_kline_frame_has_exactly_binance_fields_and_types() -> None:
    real = _fixture_frame("btcusdt@kline_")["data"]
    spec = parse_stream("btcusdt@kline_15m", TICKERS, 250)
    state = KlineState("BTC/USDT", "15m", 900_000, 1_799_999, 1.25, 2.5, 1.0, 2.0, 3.0004, False)
    ours = kline_payload(spec, state, 1_000_250, KlineFormat("%.2f", "%.3f"))
    assert ours.keys() == real.keys()
    assert ours["k"].keys() == real["k"].keys()
    for key, value in real["k"].items():
        assert type(ours["k"][key]) is type(value), key
    assert ours["k"]["o"] == "1.25" and ours["k"]["v"] == "3.000"  # to the step
    assert (ours["k"]["t"], ours["k"]["T"], ours["k"]["i"], ours["k"]["x"]) == (
        900_000,
        1_799_999,
        "15m",
        False,
    )
    assert (ours["k"]["n"], ours["k"]["q"], ours["k"]["V"], ours["k"]["Q"]) == (0, "0", "0", "0")


def test_mark_price_frame_has_binance_fields() -> None:
    real = _fixture_frame("btcusdt@markPrice")["data"]
    spec = parse_stream("btcusdt@markPrice", TICKERS, 250)
    ours = mark_price_payload(
        spec, 84_000.25, 0.0001, 28_800_000, 3000, KlineFormat("%.1f", "%.3f")
    )
    # index "i" and estimated settle "P" are not recorded: left out, never sent as "0"
    assert ours.keys() == real.keys() - {"i", "P"}
    assert ours == {
        "e": "markPriceUpdate",
        "E": 3000,
        "s": "BTCUSDT",
        "p": "84000.2",
        "r": "0.00010000",
        "T": 28_800_000,
    }


# --- the catch-up schedule ---

U = 15_000


def _subs(*names: str, since_ms: int = 0) -> list[Subscription]:
    return [Subscription(parse_stream(n, TICKERS, U), since_ms) for n in names]


def test_one_due_instant_per_stream_when_on_time() -> None:
    subs = _subs("btcusdt@kline_15m", "ethusdt@kline_1h", "btcusdt@markPrice")
    assert due_instants(subs, 29_999, 30_000) == [(30_000, 0), (30_000, 1), (30_000, 2)]
    assert due_instants(subs, 30_000, 30_000) == []
    assert due_instants(subs, 30_000, 32_999) == []
    assert due_instants(subs, 30_000, 33_000) == [(33_000, 2)]


def test_behind_the_clock_every_close_is_kept_and_the_rest_skipped() -> None:
    subs = _subs("btcusdt@kline_15m", "btcusdt@kline_1h", "btcusdt@markPrice")
    last, now = 0, 2 * 3_600_000 + 20_000
    due = due_instants(subs, last, now)
    closes_15m = [t for t, i in due if i == 0][:-1]
    assert closes_15m == [k * 900_000 - U for k in range(1, 9)]
    assert [t for t, i in due if i == 1] == [3_600_000 - U, 7_200_000 - U, 7_215_000]
    assert [t for t, i in due if i == 2] == [7_218_000]  # mark prices: only the latest
    assert due == sorted(due)


def test_streams_subscribed_later_start_after_their_subscription() -> None:
    subs = _subs("btcusdt@kline_15m") + _subs("btcusdt@kline_5m", since_ms=600_000)
    due = due_instants(subs, 0, 900_000)
    assert all(t > 600_000 for t, i in due if i == 1)
    assert (900_000 - U, 0) in due


@given(
    last=st.integers(0, 10**9),
    span=st.integers(0, 3 * 14_400_000),
    tf=st.sampled_from(tuple(TIMEFRAME_MS)),
)
def test_due_instants_never_miss_a_close_nor_leave_the_window(
    last: int, span: int, tf: str
) -> None:
    now = last + span
    due = due_instants(_subs(f"btcusdt@kline_{tf}"), last, now)
    times = [t for t, _ in due]
    assert times == sorted(set(times))
    assert all(last < t <= now and t % U == 0 for t in times)
    tf_ms = TIMEFRAME_MS[tf]
    closes = (
        {t for t in range(last + 1, now + 1) if (t + U) % tf_ms == 0} if span < 10**6 else set()
    )
    assert closes <= set(times)
    if times:
        assert times[-1] == now - now % U  # and the latest update is always sent

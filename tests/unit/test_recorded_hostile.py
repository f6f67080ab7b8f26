"""Recorded files a person wrote by hand or mangled: each is refused naming the file, never replayed
as if it had traded, and never a traceback (``market.recorded``'s loaders)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from market.recorded import (
    MIN_CANDLE_PRICE,
    MalformedDataError,
    load_fear_greed,
    load_funding,
    load_klines,
)

T0_MS = 1_740_787_200_000  # 2025-03-01 00:00 UTC
BAR_MS = 300_000
HEADER = "open_time_ms,open,high,low,close,volume\n"
GOOD_ROW = "{t},100.0,101.0,99.0,100.5,10.0\n"


def write_klines(data_dir: Path, rows: str) -> Path:
    folder = data_dir / "binance-usdm"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "BTCUSDT-5m.csv.gz"
    path.write_bytes(gzip.compress((HEADER + rows).encode()))
    return path


def good_rows(count: int) -> str:
    return "".join(GOOD_ROW.format(t=T0_MS + i * BAR_MS) for i in range(count))


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("99999999999999999999999,100,101,99,100,10", "Overflow"),
        ("253402300500000,100,101,99,100,10", "outside 2010 .. 2100"),  # year 9999 in ms
        ("1740787500,100,101,99,100,10", "outside 2010 .. 2100"),  # seconds
        ("-300000,100,101,99,100,10", "outside 2010 .. 2100"),
        ("{t},100,90,110,100,10", "high below low"),
        ("{t},120,110,90,100,10", "high below low"),  # open above high
        ("{t},100,110,90,80,10", "low above open or close"),  # close below low
        ("{t},0,0,0,0,10", "price <= 0"),
        ("{t},-5,101,-6,100,10", "price <= 0"),
        # the feed writes 8 decimals: every fill and decision of the replay failed on a 0
        ("{t},1e-9,1e-9,1e-9,1e-9,10", "a price under 1e-08"),
        ("{t},100,101,99,100,-1", "negative volume"),
    ],
)
def test_a_kline_row_that_cannot_be_a_candle_is_refused_naming_the_file(
    tmp_path: Path, row: str, reason: str
) -> None:
    path = write_klines(tmp_path, good_rows(3) + row.format(t=T0_MS + 3 * BAR_MS) + "\n")
    with pytest.raises(MalformedDataError, match=reason) as caught:
        load_klines("BTC/USDT", "5m", tmp_path)
    assert str(path) in str(caught.value)


def test_the_refusal_gives_the_count_and_the_first_bad_bar(tmp_path: Path) -> None:
    rows = [GOOD_ROW.format(t=T0_MS + i * BAR_MS) for i in range(10)]
    for i in (4, 7):
        rows[i] = f"{T0_MS + i * BAR_MS},100,90,110,100,10\n"
    write_klines(tmp_path, "".join(rows))
    with pytest.raises(MalformedDataError, match=r"2 row\(s\) .*\(2025-03-01 00:20 UTC\)"):
        load_klines("BTC/USDT", "5m", tmp_path)


def test_funding_and_fear_greed_out_of_range_or_overflowing_are_refused(tmp_path: Path) -> None:
    write_klines(tmp_path, good_rows(2))
    funding = tmp_path / "binance-usdm" / "BTCUSDT-funding.csv.gz"
    funding.write_bytes(gzip.compress(b"funding_time_ms,funding_rate\n1740787200,0.0001\n"))
    with pytest.raises(MalformedDataError, match="outside 2010"):
        load_funding("BTC/USDT", tmp_path)
    funding.write_bytes(gzip.compress(b"funding_time_ms,funding_rate\n1" + b"9" * 30 + b",0.1\n"))
    with pytest.raises(MalformedDataError, match="Overflow"):
        load_funding("BTC/USDT", tmp_path)
    fng = tmp_path / "alternative-me" / "fear-greed-daily.csv"
    fng.parent.mkdir()
    fng.write_text("timestamp_s,value,classification\n99999999999999999999,1,Fear\n")
    with pytest.raises(MalformedDataError, match=str(fng)):
        load_fear_greed(tmp_path)
    # milliseconds taken for seconds: the year 57,000, which data check calls an ERROR
    fng.write_text("timestamp_s,value,classification\n1740787200000,26,Fear\n")
    with pytest.raises(MalformedDataError, match="outside 2010"):
        load_fear_greed(tmp_path)
    fng.write_text("timestamp_s,value,classification\n-86400,26,Fear\n")
    with pytest.raises(MalformedDataError, match="outside 2010"):
        load_fear_greed(tmp_path)
    # alternative.me's index is 0 .. 100, as the live reader takes it: 500 left every replayed
    # snapshot's fear_greed null, with no reason given
    for value in (500, -1):
        fng.write_text(f"timestamp_s,value,classification\n1740787200,{value},Fear\n")
        with pytest.raises(MalformedDataError, match=r"a value outside 0 \.\. 100"):
            load_fear_greed(tmp_path)


PRICES = st.one_of(
    st.floats(min_value=-10.0, max_value=200.0, allow_nan=False),
    st.sampled_from([0.0, 99.0, 100.0, 101.0]),
)


@settings(max_examples=examples(200), deadline=None)
@given(bar=st.tuples(PRICES, PRICES, PRICES, PRICES, st.floats(-5.0, 50.0, allow_nan=False)))
def test_a_bar_loads_exactly_when_it_is_a_possible_candle(
    tmp_path_factory: pytest.TempPathFactory, bar: tuple[float, float, float, float, float]
) -> None:
    opened, high, low, close, volume = bar
    possible = (
        low >= MIN_CANDLE_PRICE
        and low <= min(opened, close)
        and high >= max(opened, close)
        and volume >= 0
    )
    data_dir = tmp_path_factory.mktemp("bar")
    write_klines(data_dir, good_rows(2) + f"{T0_MS + 2 * BAR_MS},{','.join(map(repr, bar))}\n")
    if possible:
        loaded = load_klines("BTC/USDT", "5m", data_dir)
        np.testing.assert_array_equal(loaded.iloc[-1].to_numpy(), np.array(bar))
    else:
        with pytest.raises(MalformedDataError, match="row"):
            load_klines("BTC/USDT", "5m", data_dir)

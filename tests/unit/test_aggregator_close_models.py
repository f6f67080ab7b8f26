"""A close's ``Candle`` and ``CandleClosed``, made without validation when the tick's values are
of their fields' types exactly, are the models validation makes of the same values; anything
else (ints, bools, numpy floats, float and str subclasses, an unknown timeframe, made into a
tick without validation) takes the validated path, errors included."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from model_support import assert_made_as_validated
from property_budget import examples
from pydantic import ValidationError

from core.events import Candle, CandleClosed, MarketTick
from market.close_models import candle_of, closed_event


class Price(float):
    pass


class Name(str):
    pass


FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1e-300, 104_000.5]),
)
ODD_NUMBERS = st.one_of(
    st.integers(-(10**6), 10**6),
    st.booleans(),
    FLOATS.map(np.float64),
    FLOATS.map(Price),
    st.just("1.5"),
)
NUMBERS = st.one_of(FLOATS, FLOATS, ODD_NUMBERS)
OPEN_MS = st.one_of(st.integers(0, 2**53), st.integers(0, 2**53), st.booleans(), FLOATS)
TICKERS = st.one_of(st.sampled_from(["BTC/USDT", "ETH/USDT"]), st.just(Name("SOL/USDT")))
TIMEFRAMES = st.one_of(
    st.sampled_from(["5m", "15m", "1h", "4h"]), st.sampled_from(["1m", Name("1h")])
)


def _outcome(make: Any) -> Any:
    try:
        return make()
    except ValidationError as exc:
        return ("refused", exc.errors(include_url=False))


@settings(max_examples=examples(500), deadline=None)
@given(OPEN_MS, NUMBERS, NUMBERS, NUMBERS, NUMBERS, NUMBERS, TICKERS, TIMEFRAMES)
def test_close_models_are_the_validated_ones(
    open_ms: Any, o: Any, h: Any, low: Any, c: Any, v: Any, ticker: Any, timeframe: Any
) -> None:
    tick = MarketTick.model_construct(
        ticker=ticker,
        timeframe=timeframe,
        open_time_ms=open_ms,
        close_time_ms=0,
        open=o,
        high=h,
        low=low,
        close=c,
        volume=v,
        closed=True,
        event_time_ms=0,
    )
    fields = {"open_time_ms": open_ms, "open": o, "high": h, "low": low, "close": c, "volume": v}
    want = _outcome(lambda: Candle(**fields))
    got = _outcome(lambda: candle_of(tick))
    if isinstance(want, tuple):
        assert got == want
        return
    assert_made_as_validated(got, want, Candle)
    want_closed = _outcome(lambda: CandleClosed(ticker=ticker, timeframe=timeframe, candle=got))
    got_closed = _outcome(lambda: closed_event(tick, got))
    if isinstance(want_closed, tuple):
        assert got_closed == want_closed
        return
    assert_made_as_validated(got_closed, want_closed, CandleClosed)
    assert got_closed.candle is want_closed.candle is got


def test_each_model_has_its_own_fields_set() -> None:
    tick = MarketTick(
        ticker="BTC/USDT",
        timeframe="15m",
        open_time_ms=0,
        close_time_ms=899_999,
        open=1.0,
        high=2.0,
        low=0.5,
        close=1.5,
        volume=3.0,
        closed=True,
        event_time_ms=899_999,
    )
    first, second = candle_of(tick), candle_of(tick)
    assert first.model_fields_set is not second.model_fields_set
    assert (
        closed_event(tick, first).model_fields_set
        is not closed_event(tick, second).model_fields_set
    )


def test_a_candle_of_a_subclass_is_validated_into_a_candle() -> None:
    class Wider(Candle):
        pass

    tick = MarketTick(
        ticker="BTC/USDT",
        timeframe="1h",
        open_time_ms=0,
        close_time_ms=1,
        open=1.0,
        high=1.0,
        low=1.0,
        close=1.0,
        volume=1.0,
        closed=True,
        event_time_ms=1,
    )
    wider = Wider(open_time_ms=0, open=1.0, high=1.0, low=1.0, close=1.0, volume=1.0)
    want = CandleClosed(ticker="BTC/USDT", timeframe="1h", candle=wider)
    assert_made_as_validated(closed_event(tick, wider), want, CandleClosed)


def test_each_value_of_another_type_takes_the_validated_path() -> None:
    exact: dict[str, Any] = {
        "ticker": "BTC/USDT",
        "timeframe": "15m",
        "open_time_ms": 900_000,
        "close_time_ms": 1_799_999,
        "open": 1.0,
        "high": 2.0,
        "low": 0.5,
        "close": 1.5,
        "volume": 3.0,
        "closed": True,
        "event_time_ms": 1_799_999,
    }
    odd: dict[str, list[Any]] = {
        "open_time_ms": [True, np.int64(900_000), 900_000.0],
        "open": [1, np.float64(1.0), Price(1.0)],
        "high": [2, np.float64(2.0), Price(2.0)],
        "low": [True, np.float64(0.5), Price(0.5)],
        "close": [1, np.float64(1.5), Price(1.5)],
        "volume": [3, np.float64(3.0), Price(3.0)],
        "ticker": [Name("BTC/USDT")],
        "timeframe": [Name("15m"), "1m"],
    }
    for name, values in odd.items():
        for value in values:
            tick = MarketTick.model_construct(**{**exact, name: value})
            candle = _outcome(lambda tick=tick: candle_of(tick))
            fields = {k: getattr(tick, k) for k in Candle.model_fields}
            want = _outcome(lambda fields=fields: Candle(**fields))
            if isinstance(want, tuple):
                assert candle == want, (name, value)
                continue
            assert_made_as_validated(candle, want, Candle)
            want_closed = _outcome(
                lambda tick=tick, candle=candle: CandleClosed(
                    ticker=tick.ticker, timeframe=tick.timeframe, candle=candle
                )
            )
            got_closed = _outcome(lambda tick=tick, candle=candle: closed_event(tick, candle))
            if isinstance(want_closed, tuple):
                assert got_closed == want_closed, (name, value)
            else:
                assert_made_as_validated(got_closed, want_closed, CandleClosed)

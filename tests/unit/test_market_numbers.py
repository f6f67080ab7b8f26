"""Numbers in websocket frames: only decimals as Binance writes them (ASCII digits, an optional
fraction, a minus where the parser's checks allow one). ``float()`` alone read more (" 105 ",
fullwidth digits, "1_05", "1.05e2"): those are malformed frames now, on the fast path and the
careful one; what ``float()`` reads as NaN or infinity stays ``non_finite``."""

from __future__ import annotations

import math
import re
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from market_test_support import combined, kline_frame, kline_payload

from market import parse
from market.mark_price import parse_mark_price_frame
from market.parse import decode_kline, parse_frame, parse_kline_frame
from market.wire import FrameRejected, RejectReason, decode, number

#: what float() reads but Binance never writes, each worth 105 (inside the frame's 90..110)
LOOSE_105 = [
    " 105 ",
    "105\n",
    "105.0\t",
    "\u3000105",  # an ideographic space
    "\uff11\uff10\uff15",  # fullwidth digits
    "\u0661\u0660\u0665",  # Arabic-Indic digits
    "1_05",
    "0105.0_0",
    "1.05e2",
    "1050E-1",
    "+105",
    "105.",
]


@pytest.mark.parametrize("field", ["o", "h", "l", "c", "v"])
@pytest.mark.parametrize("loose", LOOSE_105)
def test_a_number_binance_would_not_write_is_malformed_on_both_paths(
    field: str, loose: str
) -> None:
    payload = kline_payload(o="105", h="105", low="105", c="105", v="105")
    payload["k"][field] = loose
    raw = orjson.dumps(combined(payload))
    parse_kline_frame(kline_frame())  # the stream is known: the fast path is in play
    for parser in (parse_kline_frame, parse_frame, decode_kline):
        with pytest.raises(FrameRejected) as rejected:
            parser(raw)
        assert rejected.value.reason is RejectReason.MALFORMED, (parser, rejected.value)
        assert "not a decimal as Binance writes one" in str(rejected.value)
    assert parse._fast_tick(decode(raw)) is None


@pytest.mark.parametrize("spelled", ["NaN", "nan", "-Infinity", "inf", " inf ", "1e400", "9" * 400])
def test_what_float_reads_as_non_finite_stays_non_finite(spelled: str) -> None:
    with pytest.raises(FrameRejected) as rejected:
        parse_frame(orjson.dumps(combined(kline_payload(h=spelled))))
    assert rejected.value.reason is RejectReason.NON_FINITE


@pytest.mark.parametrize("value", ["105", "105.0", "105.00000000", "0105", 105, 105.0])
def test_decimals_as_binance_writes_them_and_json_numbers_are_taken(value: Any) -> None:
    payload = kline_payload(o=value, h="110", low="90", c=value, v=value)
    tick = parse_kline_frame(orjson.dumps(combined(payload)))
    assert (tick.open, tick.close, tick.volume) == (105.0, 105.0, 105.0)


def test_mark_price_numbers_are_strict_and_only_funding_may_be_negative() -> None:
    good = {"e": "markPriceUpdate", "E": 1, "s": "BTCUSDT", "p": "1.5", "i": "1.4", "P": "1.45"}
    (mark,) = parse_mark_price_frame(orjson.dumps({**good, "r": "-0.00010000"}))
    assert mark.funding_rate == -0.0001
    for field in ("p", "i", "P", "r"):
        for loose in (" 1.5", "1.5e0", "\uff11.\uff15", "1_0"):
            with pytest.raises(FrameRejected) as rejected:
                parse_mark_price_frame(orjson.dumps({**good, field: loose}))
            assert rejected.value.reason is RejectReason.MALFORMED, (field, loose)
    with pytest.raises(FrameRejected) as rejected:
        parse_mark_price_frame(orjson.dumps({**good, "p": "-1.5"}))
    assert rejected.value.reason is RejectReason.NON_POSITIVE_PRICE


#: text near a float: signs, spaces, underscores, exponents, non-ASCII digits, NaN and infinity
_FLOAT_LIKE = st.one_of(
    st.from_regex(
        r"\s?[+-]?[0-9_\uff10-\uff19\u0661\u0663]{0,4}\.?[0-9_]{0,3}(?:[eE][+-]?[0-9]{1,3})?\s?",
        fullmatch=True,
    ),
    st.text(alphabet="0123456789.-+eE_ \t\nnaftyiNIFY\u3000\uff10\uff15\u0661", max_size=12),
)
#: an independent statement of the grammar (``[0-9]``, never ``\d``: that takes any Unicode digit)
_BINANCE = re.compile(r"-?[0-9]+(\.[0-9]+)?")


@example("-0.0")
@example("9" * 400)
@example(" nan ")
@given(_FLOAT_LIKE)
def test_number_takes_binance_decimals_and_passes_only_non_finite_loose_text_on(text: str) -> None:
    try:
        got = number(text)
    except ValueError:  # refused: the frame is malformed
        assert _BINANCE.fullmatch(text) is None
        return
    if _BINANCE.fullmatch(text) is not None:
        assert got == float(text)  # 400 nines: infinity, for the non_finite check
    else:
        assert not math.isfinite(got)  # "nan", " inf ", "1e400": left for the non_finite check

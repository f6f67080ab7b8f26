"""Pure parsers and helpers: forceOrder frames, the liquidation window, name sanitising, ETF."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from fakes.context_bodies import (
    FORCE_ORDER_DOC_FRAME,
    FORCE_ORDER_DOC_ORDER,
    basis,
    open_interest_hist,
    premium_index,
    stablecoins,
    taker_ratio,
    top_long_short,
)
from fakes.etf_page import farside_page
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from core.clock import VirtualClock
from derivatives.binance import (
    BasisRow,
    LongShortRow,
    OpenInterestRow,
    PremiumIndexRow,
    TakerRow,
    zscore,
)
from derivatives.cache import SourceFailedError, SourceNotAvailableError
from derivatives.etf_flow import etf_flow_from_html, fetch_etf_flow
from derivatives.http import parse_body
from derivatives.liquidation_stream import LiquidationStream
from derivatives.liquidations import (
    MAX_EVENTS,
    NOT_CONNECTED,
    LiquidationWindow,
    fetch_liquidations,
    parse_force_order,
)
from derivatives.web_sources import _StablecoinsBody, clean_text

DOC_ORDER = FORCE_ORDER_DOC_ORDER
DOC_FRAME = FORCE_ORDER_DOC_FRAME


def frame(side: str, price: str, qty: str, at_ms: int) -> bytes:
    order = {**DOC_ORDER, "S": side, "ap": price, "z": qty, "T": at_ms}
    return orjson.dumps({**DOC_FRAME, "o": order})


def test_documented_force_order_frame() -> None:
    liq = parse_force_order(orjson.dumps(DOC_FRAME))
    assert (liq.ticker, liq.side, liq.price, liq.quantity) == ("BTC/USDT", "long", 9910.0, 0.014)
    assert liq.notional_usd == pytest.approx(138.74)
    assert liq.at_ms == 1568014460893


def test_combined_stream_frame_is_unwrapped() -> None:
    combined = orjson.dumps({"stream": "btcusdt@forceOrder", "data": DOC_FRAME})
    assert parse_force_order(combined).side == "long"


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b'{"e":"kline"}',
        orjson.dumps({**DOC_FRAME, "o": {**DOC_ORDER, "ap": "-1"}}),
        frame("SELL", "Infinity", "1", 0),
        frame("SELL", "100", "NaN", 0),
        frame("SELL", "1e400", "1", 0),
        frame("BUY", "1e9", "1000", 0),  # a notional of a trillion USD
        frame("BUY", "100", "1", -5),
    ],
)
def test_malformed_force_order_is_refused(raw: bytes) -> None:
    with pytest.raises(SourceFailedError, match="malformed forceOrder"):
        parse_force_order(raw)


def test_window_keeps_one_hour_and_flags_a_cascade() -> None:
    window = LiquidationWindow(cascade_usd=1_000_000.0)
    hour, t0 = 3_600_000, 1_740_787_200_000
    window.add(parse_force_order(frame("SELL", "100000", "5", t0)))  # 500k long, will age out
    window.add(parse_force_order(frame("BUY", "100000", "3", t0 + hour - 60_000)))  # 300k short
    window.add(parse_force_order(frame("SELL", "100000", "8", t0 + hour)))  # 800k long
    summary = window.summary(t0 + hour)
    assert summary["long_usd_1h"] == pytest.approx(800_000.0)
    assert summary["short_usd_1h"] == pytest.approx(300_000.0)
    assert summary["count_1h"] == 2
    assert summary["usd_5m"] == pytest.approx(1_100_000.0) and summary["cascade"] is True
    assert window.summary(t0 + hour + 300_000)["cascade"] is False


async def test_liquidations_without_a_stream_are_unavailable() -> None:
    with pytest.raises(SourceNotAvailableError, match="no forceOrder stream"):
        await fetch_liquidations(None, 0)
    assert "not in the recorded data" in NOT_CONNECTED


async def test_etf_flow_without_a_url_is_unavailable() -> None:
    with pytest.raises(SourceNotAvailableError, match="no URL configured"):
        await fetch_etf_flow(None, 0)


def test_etf_flow_of_a_stale_page_is_unavailable_not_todays() -> None:
    ten_days_later = 1_740_700_800_000 + 10 * 86_400_000  # 28 Feb 2025 + 10 days
    with pytest.raises(SourceNotAvailableError, match="2025-02-28, 10 days ago"):
        etf_flow_from_html(farside_page(), ten_days_later)


def test_etf_flow_of_a_page_without_the_table_is_a_failed_attempt() -> None:
    challenge = "<html><body><h1>Just a moment...</h1><table><tr><td>x</td></tr></table></body>"
    with pytest.raises(SourceFailedError, match="malformed page"):
        etf_flow_from_html(challenge, 0)
    header_only = "<table><tr><th></th><th>IBIT</th><th>Total</th></tr></table>"
    with pytest.raises(SourceNotAvailableError, match="no reported day"):
        etf_flow_from_html(header_only, 0)


def test_clean_text_drops_control_bidi_and_markup() -> None:
    assert clean_text("Pepe\u202e\x00<b>Coin</b>\n", 32) == "PepebCoinb"
    assert clean_text("Dogwifhat (WIF)", 32) == "Dogwifhat (WIF)"


@given(st.text(), st.integers(min_value=0, max_value=64))
def test_clean_text_is_bounded_and_printable(text: str, limit: int) -> None:
    out = clean_text(text, limit)
    assert len(out) <= limit
    assert out.isprintable()
    assert not set(out) & set('<>{}[]"`$\\/:;=')


def test_zscore_needs_history_and_spread() -> None:
    assert zscore([1.0, 2.0]) is None
    assert zscore([1.0] * 10) is None
    assert zscore([1.0, 1.0, 1.0, 1.0, 3.0]) == pytest.approx(2.0)  # mean 1.4, pstdev 0.8


def test_a_late_frame_of_an_older_liquidation_ages_out_by_its_time() -> None:
    window = LiquidationWindow(cascade_usd=1e12)
    hour, t0 = 3_600_000, 1_740_787_200_000
    window.add(parse_force_order(frame("SELL", "100", "1", t0 + hour)))
    window.add(parse_force_order(frame("SELL", "100", "2", t0)))  # arrived late, behind it
    assert window.summary(t0 + hour + 1)["count_1h"] == 1
    assert window.summary(t0 + hour + 1)["long_usd_1h"] == pytest.approx(100.0)


def test_a_frame_from_the_future_is_refused_and_counted() -> None:
    now_ms = 1_740_787_200_000
    window = LiquidationWindow(cascade_usd=1.0)
    stream = LiquidationStream(
        VirtualClock(epoch_ms=now_ms), window, base_url="ws://127.0.0.1:9", tickers=["BTC/USDT"]
    )
    stream.on_frame(frame("SELL", "100", "1", now_ms + 10 * 86_400_000))  # flagged for ten days
    stream.on_frame(frame("SELL", "100", "1", now_ms + 60_000))  # skew within the allowance
    assert (stream.rejected, stream.received) == (1, 1)
    assert window.summary(now_ms)["count_1h"] == 1


def _stablecoins_with(bad: str) -> dict[str, Any]:
    body = stablecoins()
    first = {**body["peggedAssets"][0], "circulating": {"peggedUSD": bad}}
    return {**body, "peggedAssets": [first, *body["peggedAssets"][1:]]}


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-inf"])
@pytest.mark.parametrize(
    ("model", "body"),
    [
        (PremiumIndexRow, lambda bad: {**premium_index("BTCUSDT"), "lastFundingRate": bad}),
        (PremiumIndexRow, lambda bad: {**premium_index("BTCUSDT"), "markPrice": bad}),
        (OpenInterestRow, lambda bad: {**open_interest_hist("BTCUSDT")[0], "sumOpenInterest": bad}),
        (TakerRow, lambda bad: {**taker_ratio()[0], "buySellRatio": bad}),
        (LongShortRow, lambda bad: {**top_long_short("BTCUSDT")[0], "longShortRatio": bad}),
        (BasisRow, lambda bad: {**basis("BTCUSD")[0], "basisRate": bad}),
        (_StablecoinsBody, _stablecoins_with),
    ],
)
def test_a_number_that_is_not_finite_is_a_malformed_body(
    model: type[BaseModel], body: Callable[[str], Any], bad: str
) -> None:
    """pydantic's float reads "NaN" and "Infinity": a funding rate of NaN was a value."""
    with pytest.raises(SourceFailedError, match="malformed body"):
        parse_body(model, body(bad), what="a source")


def test_a_frame_flood_keeps_the_window_bounded() -> None:
    """Binance sends at most one a symbol a second; a flood was kept whole until the next poll."""
    now_ms = 1_740_787_200_000
    window = LiquidationWindow(cascade_usd=1e12)
    stream = LiquidationStream(
        VirtualClock(epoch_ms=now_ms), window, base_url="ws://127.0.0.1:9", tickers=["BTC/USDT"]
    )
    flood = frame("SELL", "100", "1", now_ms)
    for _ in range(MAX_EVENTS + 1_000):
        stream.on_frame(flood)
    assert window.summary(now_ms)["count_1h"] == MAX_EVENTS


def test_a_frame_of_a_symbol_not_subscribed_is_refused_and_counted() -> None:
    """A liquidation of a symbol the stream did not ask for was added to the totals."""
    now_ms = 1_740_787_200_000
    window = LiquidationWindow(cascade_usd=1.0)
    stream = LiquidationStream(
        VirtualClock(epoch_ms=now_ms), window, base_url="ws://127.0.0.1:9", tickers=["BTC/USDT"]
    )
    order = {**DOC_ORDER, "s": "ETHUSDT", "T": now_ms}
    stream.on_frame(orjson.dumps({**DOC_FRAME, "o": order}))
    assert (stream.rejected, stream.received) == (1, 0)
    assert window.summary(now_ms)["count_1h"] == 0


def test_a_flood_of_old_frames_cannot_push_out_the_last_hour() -> None:
    """Frames older than the window were kept until a poll pruned them: 50,000 of them pushed the
    hour's real liquidations out of the capped window."""
    now_ms = 1_740_787_200_000
    window = LiquidationWindow(cascade_usd=1e12)
    stream = LiquidationStream(
        VirtualClock(epoch_ms=now_ms), window, base_url="ws://127.0.0.1:9", tickers=["BTC/USDT"]
    )
    stream.on_frame(frame("SELL", "100", "1", now_ms - 60_000))
    old = frame("SELL", "100", "1", now_ms - 2 * 3_600_000)
    for _ in range(MAX_EVENTS):
        stream.on_frame(old)
    assert window.summary(now_ms)["count_1h"] == 1
    assert (stream.received, stream.rejected) == (1, MAX_EVENTS)

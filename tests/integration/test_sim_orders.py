"""The sim's signed order endpoints over raw HTTP: authentication, clock window, Binance errors,
and the matching engine's money rules (a hypothesis property over random order flows)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from test_ccxt_broker_support import CcxtSim, ccxt_sim

from sim.order_book import OrderBook, OrderRejected, SimAccountConfig
from sim.orders import TEST_API_KEY, TEST_API_SECRET


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[CcxtSim]:
    async with ccxt_sim(tmp_path) as running:
        yield running


async def signed(
    sim: CcxtSim,
    method: str,
    path: str,
    *,
    secret: str = TEST_API_SECRET,
    key: str = TEST_API_KEY,
    skew_ms: int = 0,
    **params: Any,
) -> tuple[int, Any]:
    params.setdefault("timestamp", sim.clock.now_ms() + skew_ms)
    query = urlencode({k: str(v) for k, v in params.items()})
    signature = hmac.new(secret.encode(), query.encode(), hashlib.sha256).hexdigest()
    payload = f"{query}&signature={signature}"
    headers = {"X-MBX-APIKEY": key}
    url = sim.server.url + path
    async with aiohttp.ClientSession() as session:
        if method == "POST":
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            request = session.post(url, data=payload, headers=headers)
        else:
            request = session.request(method, f"{url}?{payload}", headers=headers)
        async with request as response:
            return response.status, await response.json(content_type=None)


def limit_buy(price: float, qty: str = "0.010", cid: str = "t-1") -> dict[str, Any]:
    return {
        "symbol": "BTCUSDT",
        "side": "BUY",
        "type": "LIMIT",
        "timeInForce": "GTC",
        "quantity": qty,
        "price": f"{price:.1f}",
        "newClientOrderId": cid,
    }


async def test_bad_key_signature_and_timestamps_are_refused(sim: CcxtSim) -> None:
    assert await signed(sim, "GET", "/fapi/v3/account", key="nope") == (
        401,
        {"code": -2015, "msg": "Invalid API-key, IP, or permissions for action."},
    )
    status, body = await signed(sim, "GET", "/fapi/v3/account", secret="wrong")
    assert (status, body["code"]) == (400, -1022)
    for skew_ms in (-6_000, 1_500):  # older than the default 5 s window; > 1 s ahead
        status, body = await signed(sim, "GET", "/fapi/v3/account", skew_ms=skew_ms)
        assert (status, body["code"]) == (400, -1021)
    status, body = await signed(sim, "GET", "/fapi/v3/account", skew_ms=-6_000, recvWindow=10_000)
    assert status == 200 and body["availableBalance"] == "10000.0"


async def test_limit_rests_fills_on_trade_through_and_shows_everywhere(sim: CcxtSim) -> None:
    price = sim.server.orders.book.price("BTC/USDT")
    status, order = await signed(sim, "POST", "/fapi/v1/order", **limit_buy(price))
    assert status == 200 and order["status"] == "NEW" and order["clientOrderId"] == "t-1"
    status, dup = await signed(sim, "POST", "/fapi/v1/order", **limit_buy(price))
    assert (status, dup["code"]) == (400, -4116)
    _, open_orders = await signed(sim, "GET", "/fapi/v1/openOrders", symbol="BTCUSDT")
    assert [o["orderId"] for o in open_orders] == [order["orderId"]]

    await sim.market.trade("BTC/USDT", low=price - 1, high=price, close=price - 0.5)
    _, filled = await signed(
        sim, "GET", "/fapi/v1/order", symbol="BTCUSDT", origClientOrderId="t-1"
    )
    assert filled["status"] == "FILLED" and float(filled["avgPrice"]) == float(f"{price:.1f}")
    _, trades = await signed(
        sim, "GET", "/fapi/v1/userTrades", symbol="BTCUSDT", orderId=order["orderId"]
    )
    assert [t["maker"] for t in trades] == [True]
    assert float(trades[0]["commission"]) == pytest.approx(0.010 * float(f"{price:.1f}") * 0.0002)
    _, (position,) = await signed(sim, "GET", "/fapi/v3/positionRisk")
    assert (position["symbol"], float(position["positionAmt"])) == ("BTCUSDT", 0.01)
    status, gone = await signed(
        sim, "DELETE", "/fapi/v1/order", symbol="BTCUSDT", origClientOrderId="t-1"
    )
    assert (status, gone["code"]) == (400, -2011)


async def test_reduce_only_without_position_and_unknown_orders(sim: CcxtSim) -> None:
    status, body = await signed(
        sim,
        "POST",
        "/fapi/v1/order",
        symbol="ETHUSDT",
        side="SELL",
        type="MARKET",
        quantity="0.5",
        reduceOnly="true",
    )
    assert (status, body["code"]) == (400, -2022)
    status, body = await signed(
        sim, "GET", "/fapi/v1/order", symbol="ETHUSDT", origClientOrderId="nope"
    )
    assert (status, body["code"]) == (400, -2013)
    below = sim.server.orders.book.price("BTC/USDT") * 0.99  # within the percent-price band
    status, body = await signed(sim, "POST", "/fapi/v1/order", **limit_buy(below, qty="1"))
    assert (status, body["code"]) == (400, -2019)


async def test_a_limit_outside_the_percent_price_band_is_refused(sim: CcxtSim) -> None:
    price = sim.server.orders.book.price("BTC/USDT")
    for factor, code in ((1.06, -4016), (0.94, -4024), (1e-6, -4024), (1e6, -4016)):
        status, body = await signed(
            sim, "POST", "/fapi/v1/order", **limit_buy(price * factor, qty="0.001")
        )
        assert (status, body["code"]) == (400, code)
    assert sim.server.orders.book.open_orders(None) == []
    assert sim.server.orders.rejections == {-4016: 2, -4024: 2}


async def test_accepted_then_5xx_still_places_the_order(sim: CcxtSim) -> None:
    sim.server.orders.fail_after_accept(1, 502)
    price = sim.server.orders.book.price("BTC/USDT")
    status, _ = await signed(sim, "POST", "/fapi/v1/order", **limit_buy(price, cid="t-5xx"))
    assert status == 502
    assert [o.client_order_id for o in sim.server.orders.book.open_orders(None)] == ["t-5xx"]


# -- the matching engine's money, as a property ---------------------------------------------------

steps = st.lists(
    st.tuples(
        st.sampled_from(["limit_buy", "market_buy", "market_sell", "trade", "cancel"]),
        st.floats(0.9, 1.1),  # price factor
        st.floats(0.01, 0.5),  # quantity
    ),
    max_size=25,
)


@settings(max_examples=examples(150), deadline=None)
@given(steps)
def test_money_is_conserved_whatever_the_order_flow(flow: list[tuple[str, float, float]]) -> None:
    price = {"X/USDT": 100.0}
    config = SimAccountConfig(starting_balance_usd=1_000.0)
    book = OrderBook({"XUSDT": "X/USDT"}, price.get, lambda: 1, config)
    ids = iter(range(1_000_000))
    for action, factor, qty in flow:
        now = book.price("X/USDT")
        try:
            if action == "limit_buy":
                book.place(
                    symbol="XUSDT", side="BUY", order_type="LIMIT", quantity=qty,
                    price=now * factor, client_order_id=f"c{next(ids)}", reduce_only=False,
                )  # fmt: skip
            elif action in ("market_buy", "market_sell"):
                book.place(
                    symbol="XUSDT", side="BUY" if action == "market_buy" else "SELL",
                    order_type="MARKET", quantity=qty, price=None,
                    client_order_id=f"c{next(ids)}", reduce_only=action == "market_sell",
                )  # fmt: skip
            elif action == "trade":
                close = now * factor
                book.trade("X/USDT", low=min(now, close), high=max(now, close), close=close)
            elif book.open_orders(None):
                book.cancel(book.open_orders(None)[0])
        except OrderRejected as exc:
            assert exc.code in (-2019, -2022, -4016, -4024)  # -40xx: outside 0.95 .. 1.05
        fees = sum(t.commission_usd for t in book.trades("XUSDT", None))
        realized = sum(t.realized_pnl_usd for t in book.trades("XUSDT", None))
        assert book.wallet_usd() == pytest.approx(1_000.0 - fees + realized, abs=1e-9)
        assert book.margin_balance_usd() == pytest.approx(
            book.wallet_usd() + book.unrealized_usd("XUSDT"), abs=1e-9
        )
        held = book.open_order_margin_usd()
        assert held >= 0 and book.available_usd() >= -1e-6  # never spends margin it lacks
        assert book.available_usd() == pytest.approx(
            book.margin_balance_usd() - book.position_margin_usd("XUSDT") - held, abs=1e-9
        )


def test_resting_orders_fill_from_the_feed_once_it_trades_through() -> None:
    feed_price = {"X/USDT": 100.0}
    book = OrderBook({"XUSDT": "X/USDT"}, feed_price.get, lambda: 1, SimAccountConfig())
    order = book.place(
        symbol="XUSDT", side="BUY", order_type="LIMIT", quantity=1.0, price=99.0,
        client_order_id="rest", reduce_only=False,
    )  # fmt: skip
    feed_price["X/USDT"] = 99.0  # a touch
    book.sweep()
    assert order.status == "NEW"
    feed_price["X/USDT"] = 98.5  # through
    book.sweep()
    assert (order.status, order.avg_price, order.executed_qty) == ("FILLED", 99.0, 1.0)
    (trade,) = book.trades("XUSDT", order.order_id)
    assert trade.maker and trade.commission_usd == pytest.approx(99.0 * 0.0002)

"""``PaperBook.opening_buy``: remembered between order changes, always the scan's answer; and
the position details made from it (without validation) are the details validation makes."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from broker.paper import PaperBroker
from broker.port import Action, PositionDetail
from contract.broker_harness import make_intent
from core.clock import VirtualClock

EPOCH_MS = 1_740_787_200_000
TICKERS = ("BTC/USDT", "ETH/USDT")

#: one step: (ticker index, buy / sell / expire a resting limit / move the price, price)
steps = st.lists(
    st.tuples(
        st.integers(0, 1),
        st.sampled_from(["buy", "sell", "rest", "price"]),
        st.sampled_from([90.0, 100.0, 110.0]),
    ),
    max_size=25,
)


async def _place(
    broker: PaperBroker,
    ticker: str,
    action: Action,
    notional: float,
    price: float,
    signals: dict[str, float] | None = None,
) -> None:
    intent = make_intent(
        ticker, action, notional_usd=notional, reference_price=price, signal_weights=signals
    )
    await broker.execute_decisions([intent])


async def _trade_at_a_second_later(
    broker: PaperBroker, clock: VirtualClock, ticker: str, price: float
) -> None:
    await clock.advance(1.0)
    broker.on_market_price(ticker, price, at_ms=clock.now_ms())


async def _run(plan: list[tuple[int, str, float]]) -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock, limit_ttl_secs=30, history_limit=4)  # trims too
    book = broker._book  # the book itself: the scan is its private plain answer
    for index, (which, what, price) in enumerate(plan):
        ticker = TICKERS[which]
        if what == "price":
            broker.on_market_price(ticker, price, at_ms=clock.now_ms())
        else:
            action = Action.SELL if what == "sell" else Action.BUY
            limit = price * 0.5 if what == "rest" else price  # far below: rests, then expires
            await _place(broker, ticker, action, 200.0, limit, {"rsi": index / 100})
        await clock.advance(20.0)
        for ticker_, position in broker.ledger.positions.items():
            for _ in range(2):  # the second ask is the remembered one
                found = book.opening_buy(ticker_, position.opened_at_ms)
                assert found == book._first_buy_filled_since(ticker_, position.opened_at_ms)
        details = {d.ticker: d for d in await broker.get_positions_detail()}
        for detail in details.values():
            _is_validated(detail)
        for ticker_, position in broker.ledger.positions.items():
            entry = book._first_buy_filled_since(ticker_, position.opened_at_ms)
            expected = dict(entry.signal_weights) if entry is not None else {}
            assert details[ticker_].signals == expected


def _is_validated(detail: PositionDetail) -> None:
    fields = {name: getattr(detail, name) for name in PositionDetail.model_fields}
    validated = PositionDetail(**fields)
    assert detail == validated
    assert detail.model_dump_json() == validated.model_dump_json()
    assert detail.model_fields_set == validated.model_fields_set
    assert [type(v) for v in fields.values()] == [type(getattr(validated, n)) for n in fields]


@settings(max_examples=examples(60), deadline=None)
@given(steps)
def test_opening_buy_is_the_scan_after_every_change(plan: list[tuple[int, str, float]]) -> None:
    asyncio.run(_run(plan))


async def test_a_position_reopened_reports_the_new_entry_signals() -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock)
    btc = TICKERS[0]
    for weights in ({"rsi": 0.25}, {"momentum": -0.5}):
        await _place(broker, btc, Action.BUY, 500.0, 100.0, weights)
        await _trade_at_a_second_later(broker, clock, btc, 99.0)
        (detail,) = await broker.get_positions_detail()
        assert detail.signals == weights
        await _place(broker, btc, Action.SELL, 10_000.0, 99.0)
        await clock.advance(1.0)
        assert await broker.get_positions_detail() == []


async def test_an_opening_buy_trimmed_from_the_history_is_forgotten() -> None:
    """The remembered answer follows the orders: with the history trimmed past the opening buy,
    the scan finds nothing, and so does ``opening_buy``."""
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock, history_limit=2)
    btc, eth = TICKERS
    await _place(broker, btc, Action.BUY, 500.0, 100.0, {"rsi": 0.5})
    await _trade_at_a_second_later(broker, clock, btc, 99.0)
    (detail,) = await broker.get_positions_detail()
    assert detail.signals == {"rsi": 0.5}
    for _ in range(2):
        await _place(broker, eth, Action.BUY, 100.0, 100.0)
        await _trade_at_a_second_later(broker, clock, eth, 99.0)
    btc_detail = {d.ticker: d for d in await broker.get_positions_detail()}[btc]
    assert btc_detail.signals == {}

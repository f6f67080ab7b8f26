"""The percent-price band at its edges: the paper book and the simulator's order book refuse a limit
exactly when it lies outside 0.95 .. 1.05 of the last price (edges allowed), as Binance's
PERCENT_PRICE filter does. Each is compared with the band worked out in exact fractions."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from broker.book import PaperBook
from broker.fills import PERCENT_PRICE_REFUSAL, PaperTerms
from broker.ledger import Ledger
from broker.port import Action, OrderIntent
from sim.order_book import OrderBook, OrderRejected, SimAccountConfig

DOWN, UP = Fraction(95, 100), Fraction(105, 100)
_marks = st.floats(1e-6, 1e9, allow_nan=False, allow_infinity=False)


@st.composite
def _limits(draw: st.DrawFn, mark: float) -> float:
    """Anywhere near the market, or within a few floats of either edge of the band."""
    if draw(st.booleans()):
        return mark * draw(st.floats(0.8, 1.2))
    limit = mark * draw(st.sampled_from([0.95, 1.05]))
    for _ in range(draw(st.integers(0, 3))):
        limit = math.nextafter(limit, draw(st.sampled_from([0.0, math.inf])))
    return limit


@st.composite
def _mark_and_limit(draw: st.DrawFn) -> tuple[float, float]:
    mark = draw(_marks)
    return mark, draw(_limits(mark))


def _paper_refuses(mark: float, limit: float) -> str:
    terms = PaperTerms(quantity_step=Decimal("1e-15"))
    book = PaperBook(terms, Ledger.fresh(Decimal(1_000_000)))
    book.on_market("X/USDT", mark, at_ms=1)
    intent = OrderIntent(
        decision_id="d", ticker="X/USDT", action=Action.BUY, notional_usd=100.0,
        reference_price=limit, position_pct=0.1,
    )  # fmt: skip
    order, _ = book.execute(intent, now_ms=2)
    return order.reason if order.status == "rejected" else ""


@settings(max_examples=examples(400), deadline=None)
@given(_mark_and_limit())
@example((84_321.5, 84_321.5 * 0.95))
@example((84_321.5, 1e-300))
@example((84_321.5, 1e300))
def test_the_paper_book_refuses_exactly_the_limits_outside_the_band(
    mark_limit: tuple[float, float],
) -> None:
    mark, limit = mark_limit
    # the paper book takes floats as the decimals they print as
    last, asked = Fraction(repr(mark)), Fraction(repr(limit))
    inside = last * DOWN <= asked <= last * UP
    reason = _paper_refuses(mark, limit)
    assert reason.startswith(PERCENT_PRICE_REFUSAL) == (not inside), reason
    if inside:
        assert reason == ""


@settings(max_examples=examples(400), deadline=None)
@given(_mark_and_limit(), st.sampled_from(["BUY", "SELL"]))
@example((100.0, 105.0), "BUY")
@example((100.0, 95.0), "SELL")
def test_the_sim_refuses_exactly_the_limits_outside_the_band(
    mark_limit: tuple[float, float], side: str
) -> None:
    mark, limit = mark_limit
    book = OrderBook({"XUSDT": "X/USDT"}, {"X/USDT": mark}.get, lambda: 1, SimAccountConfig())
    code = 0
    try:
        book.place(
            symbol="XUSDT", side=side, order_type="LIMIT",  # type: ignore[arg-type]
            quantity=10.0 / mark, price=limit, client_order_id="c", reduce_only=False,
        )  # fmt: skip
    except OrderRejected as exc:
        code = exc.code
    asked, market = Fraction(limit), Fraction(mark)
    expected = -4016 if asked > market * UP else -4024 if asked < market * DOWN else 0
    assert code == expected

"""The paper ledger is exact: the identity holds to the last unit through any sequence of orders.

starting cash + realised PnL - fees == cash + reserved + cost basis of open positions
"""

from __future__ import annotations

import random
from decimal import Decimal

import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from property_budget import examples

from broker.book import PaperBook
from broker.fills import PaperTerms
from broker.ledger import InsufficientCashError, Ledger, LedgerError, money
from broker.paper_store import parse_document, render_document
from broker.port import Action
from contract.broker_harness import make_intent

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
START_PRICES = {"BTC/USDT": 84_321.5, "ETH/USDT": 2_217.37, "SOL/USDT": 142.83}
TERMS = PaperTerms(
    quantity_steps={"BTC/USDT": Decimal("0.001"), "SOL/USDT": Decimal("0.01")},
    limit_ttl_secs=600,
)


def assert_book_consistent(book: PaperBook) -> None:
    ledger = book.ledger
    assert ledger.identity_gap_usd() == 0  # exact: no tolerance anywhere
    ledger.check_consistent()
    open_orders = book.open_orders()
    assert ledger.reserved_usd == sum((o.reserved_usd for o in open_orders), Decimal(0))
    assert ledger.cash_usd >= 0
    for order in open_orders:
        step = book.terms.step_for(order.ticker)
        assert order.quantity > 0 and (order.quantity / step) % 1 == 0
    for position in ledger.positions.values():
        assert position.quantity > 0 and position.cost_basis_usd >= 0


class PaperBookMachine(RuleBasedStateMachine):
    """Random orders, market moves, cancels and expiries against one PaperBook."""

    @initialize(cash=st.integers(min_value=100, max_value=1_000_000))
    def start(self, cash: int) -> None:
        self.book = PaperBook(TERMS, Ledger.fresh(Decimal(cash)))
        self.now_ms = 1_740_787_200_000
        self.prices = dict(START_PRICES)
        self.fills = 0
        for ticker, price in self.prices.items():
            self.book.on_market(ticker, price, at_ms=self.now_ms)

    def _tick(self, ms: int = 1000) -> int:
        self.now_ms += ms
        return self.now_ms

    @rule(
        ticker=st.sampled_from(TICKERS),
        share=st.floats(min_value=0.0, max_value=1.2),  # of the free cash; > 1 must be refused
        factor=st.floats(min_value=0.97, max_value=1.03),
        digits=st.integers(min_value=0, max_value=6),
    )
    def buy(self, ticker: str, share: float, factor: float, digits: int) -> None:
        notional = max(0.01, float(self.book.ledger.cash_usd) * share)
        limit = round(self.prices[ticker] * factor, digits) or self.prices[ticker]
        intent = make_intent(ticker, Action.BUY, notional_usd=notional, reference_price=limit)
        order, fills = self.book.execute(intent, self._tick())
        event(f"buy {order.status}")
        assert order.status in {"open", "rejected"} and not fills

    @rule(
        ticker=st.sampled_from(TICKERS),
        move=st.floats(min_value=-0.03, max_value=0.03),
        dip=st.floats(min_value=0.0, max_value=0.03),
    )
    def market(self, ticker: str, move: float, dip: float) -> None:
        price = round(self.prices[ticker] * (1 + move), 4)
        self.prices[ticker] = price
        update = self.book.on_market(
            ticker, price, low=price * (1 - dip), high=price * 1.001, at_ms=self._tick()
        )
        self.fills += len(update.fills)
        event("market update filled orders" if update.fills else "market update filled nothing")
        for fill in update.fills:
            assert fill.order.limit_price is not None
            assert fill.order.average_price == fill.order.limit_price
            assert fill.order.limit_price > Decimal(repr(price * (1 - dip)))

    @rule(pick=st.integers(min_value=0), fraction=st.floats(min_value=0.001, max_value=1.5))
    def sell(self, pick: int, fraction: float) -> None:
        tickers = sorted(self.book.ledger.positions)
        if not tickers:
            return
        ticker = tickers[pick % len(tickers)]
        held = self.book.ledger.positions[ticker].quantity
        price = self.prices[ticker]
        intent = make_intent(
            ticker, Action.SELL, notional_usd=float(held) * price * fraction, reference_price=price
        )
        order, fills = self.book.execute(intent, self._tick())
        assert order.status in {"filled", "rejected"}
        event(f"sell {order.status}")
        if order.status == "filled":
            self.fills += 1
            assert fills and fills[0].order == order
            assert order.realised_pnl_usd is not None and order.closed_cost_basis_usd is not None
            assert order.realised_pnl_usd == money(order.realised_pnl_usd)

    @rule(pick=st.integers(min_value=0))
    def cancel(self, pick: int) -> None:
        open_orders = self.book.open_orders()
        if not open_orders:
            return
        target = open_orders[pick % len(open_orders)]
        cancelled = self.book.cancel(target.client_order_id, self._tick())
        assert cancelled is not None and cancelled.status == "cancelled"

    @rule(secs=st.integers(min_value=1, max_value=900))
    def wait(self, secs: int) -> None:
        now = self._tick(secs * 1000)
        for order in self.book.expire_due(now):
            assert order.status == "cancelled" and order.reason.startswith("expired")
        assert all(
            o.expires_at_ms is not None and o.expires_at_ms > now for o in self.book.open_orders()
        )

    @invariant()
    def ledger_is_exact(self) -> None:
        assert_book_consistent(self.book)

    @invariant()
    def the_saved_form_resumes_exactly(self) -> None:
        document = parse_document(render_document(self.book.to_document(self.now_ms)))
        resumed = PaperBook.from_document(document, TERMS)
        assert resumed.ledger == self.book.ledger
        assert resumed.orders() == self.book.orders()


PaperBookMachine.TestCase.settings = settings(
    max_examples=examples(60), stateful_step_count=80, deadline=None
)
TestPaperBookMachine = PaperBookMachine.TestCase


@settings(max_examples=examples(6), deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32))
@example(seed=20250301)
def test_thousands_of_random_fills_keep_the_identity_exact(seed: int) -> None:
    """Long random walks (about 1,400 fills each), checked exactly after every operation."""
    rng = random.Random(seed)
    book = PaperBook(TERMS, Ledger.fresh(Decimal("100000")))
    prices = dict(START_PRICES)
    now_ms = 1_740_787_200_000
    fills = 0
    for step in range(2500):
        now_ms += 1000
        ticker = rng.choice(TICKERS)
        roll = rng.random()
        if roll < 0.45:
            limit = round(prices[ticker] * rng.uniform(0.995, 1.0), rng.randint(1, 6))
            intent = make_intent(
                ticker, Action.BUY, notional_usd=rng.uniform(5, 3000), reference_price=limit
            )
            book.execute(intent, now_ms)
        elif roll < 0.85:
            prices[ticker] = round(prices[ticker] * rng.uniform(0.99, 1.01), 5)
            low = prices[ticker] * (1 - rng.uniform(0, 0.01))
            update = book.on_market(ticker, prices[ticker], low=low, at_ms=now_ms)
            fills += len(update.fills)
        elif ticker in book.ledger.positions:
            held = book.ledger.positions[ticker].quantity
            notional = float(held) * prices[ticker] * rng.choice([0.3, 0.5, 1.0])
            intent = make_intent(
                ticker, Action.SELL, notional_usd=notional, reference_price=prices[ticker]
            )
            order, _ = book.execute(intent, now_ms)
            fills += order.status == "filled"
        assert book.ledger.identity_gap_usd() == 0, f"after step {step}"
    assert_book_consistent(book)
    assert fills >= 800
    assert book.ledger.fees_paid_usd > 0 and book.ledger.realised_pnl_usd != 0


# ---- the ledger's own rules


def test_reserving_more_than_the_free_cash_is_refused() -> None:
    ledger = Ledger.fresh(Decimal(100))
    reserved = ledger.reserve(Decimal("60.00000001"))
    with pytest.raises(InsufficientCashError, match="insufficient cash"):
        reserved.reserve(Decimal(40))
    assert reserved.cash_usd == Decimal("39.99999999")
    assert reserved.release(Decimal("60.00000001")) == ledger


def test_amounts_finer_than_the_money_unit_are_refused() -> None:
    with pytest.raises(LedgerError, match="whole number"):
        Ledger.fresh(Decimal(100)).reserve(Decimal("0.000000001"))


def test_releasing_more_than_is_reserved_is_refused() -> None:
    ledger = Ledger.fresh(Decimal(100)).reserve(Decimal(10))
    with pytest.raises(LedgerError, match="more than"):
        ledger.release(Decimal(11))


def test_a_partial_sell_closes_its_share_of_the_cost_basis() -> None:
    ledger = Ledger.fresh(Decimal(100)).reserve(Decimal("10.01"))
    ledger = ledger.settle_buy(
        "X",
        reserved_usd=Decimal("10.01"),
        quantity=Decimal(3),
        cost_usd=Decimal(10),
        fee_usd=Decimal("0.01"),
        at_ms=5,
    )
    ledger, closed = ledger.settle_sell(
        "X", quantity=Decimal(1), proceeds_usd=Decimal(4), fee_usd=Decimal("0.002")
    )
    assert closed == Decimal("3.33333333")  # a third of 10, rounded once
    assert ledger.positions["X"].cost_basis_usd == Decimal("6.66666667")
    assert ledger.realised_pnl_usd == Decimal("0.66666667")
    assert ledger.identity_gap_usd() == 0
    ledger, closed = ledger.settle_sell(
        "X", quantity=Decimal(2), proceeds_usd=Decimal(7), fee_usd=Decimal("0.0035")
    )
    assert closed == Decimal("6.66666667") and ledger.positions == {}
    assert ledger.realised_pnl_usd == Decimal(1)  # 11 proceeds - 10 cost, exactly
    assert ledger.identity_gap_usd() == 0


def test_selling_more_than_is_held_is_refused() -> None:
    with pytest.raises(LedgerError, match="no position"):
        Ledger.fresh(Decimal(100)).settle_sell(
            "X", quantity=Decimal(1), proceeds_usd=Decimal(1), fee_usd=Decimal(0)
        )


def test_an_unbalanced_ledger_is_detected() -> None:
    ledger = Ledger.fresh(Decimal(100)).model_copy(update={"cash_usd": Decimal("100.01")})
    with pytest.raises(LedgerError, match="does not balance"):
        ledger.check_consistent()

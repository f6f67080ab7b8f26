"""CcxtBroker against a sim exchange whose answers are garbled (``RestFaults.rewrite_next``): a
position of NaN, a balance of "inf", a row missing its symbol, an HTML page where JSON belongs.
Each is a ``MalformedAnswerError`` naming the request and field, nothing is acted on, and the next
(good) answer is read as usual; a garbled answer to a placed order is looked up, never placed
twice; a garbled fee falls back to the configured rate."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_ccxt_broker_fills import buy, trade_through
from test_ccxt_broker_support import CcxtSim, ccxt_sim, running_broker

from agent.risk import RiskContext
from broker.ccxt_broker import CcxtBroker
from broker.exchange_answer import MalformedAnswerError
from broker.port import Action
from contract.broker_harness import make_intent
from core.errors import RefuseToStartError

BTC = "BTC/USDT"
POSITIONS = "/fapi/v3/positionRisk"
ACCOUNT = "/fapi/v3/account"
ORDER = "/fapi/v1/order"
FILLS = "/fapi/v1/userTrades"
POSITION_MODE = "/fapi/v1/positionSide/dual"

Rewrite = Callable[[Any], Any]


def in_held_row(field: str, value: object) -> Rewrite:
    """The positions answer with ``field`` of the held (non-zero) row set to ``value``; the
    field removed when ``value`` is ``...``."""

    def rewrite(body: Any) -> Any:
        rows = copy.deepcopy(body)
        (held,) = [row for row in rows if float(row["positionAmt"]) != 0.0]
        if value is ...:
            del held[field]
        else:
            held[field] = value
        return rows

    return rewrite


HOSTILE_POSITIONS: list[tuple[str, Rewrite, str]] = [
    ("nan quantity", in_held_row("positionAmt", "NaN"), "positionAmt is not a number"),
    ("infinite quantity", in_held_row("positionAmt", "Infinity"), "positionAmt"),
    ("overflowing quantity", in_held_row("positionAmt", "1" + "0" * 400), "positionAmt"),
    ("exponent quantity", in_held_row("positionAmt", "1e3"), "positionAmt"),
    ("padded quantity", in_held_row("positionAmt", " 0.01"), "positionAmt"),
    ("fullwidth quantity", in_held_row("positionAmt", "\uff11"), "positionAmt"),
    ("bool quantity", in_held_row("positionAmt", True), "positionAmt"),
    ("list quantity", in_held_row("positionAmt", ["0.01"]), "positionAmt"),
    ("absurd quantity", in_held_row("positionAmt", "1000000000000000000"), "within"),
    ("no quantity", in_held_row("positionAmt", ...), "has no positionAmt"),
    ("zero entry price", in_held_row("entryPrice", "0"), "entryPrice must be > 0"),
    ("negative entry price", in_held_row("entryPrice", "-5"), "entryPrice"),
    ("negative mark", in_held_row("markPrice", "-1"), "markPrice must be >= 0"),
    ("no symbol", in_held_row("symbol", ...), "symbol is not a non-empty string"),
    ("numeric symbol", in_held_row("symbol", 5), "symbol"),
    ("negative time", in_held_row("updateTime", -1), "updateTime is not a whole number"),
    ("the held row twice", lambda body: body + body, "two rows for BTCUSDT"),
    ("a row that is a list", lambda body: [["BTCUSDT", "0.01"]], "is not an object"),
    ("an object, not a list", lambda body: {"positions": body}, "is not a list"),
    ("a string", lambda body: "BTCUSDT", "is not a list"),
    ("null", lambda body: None, "is not a list"),
]


async def held_position(sim: CcxtSim, broker: CcxtBroker) -> None:
    await broker.execute_decisions([buy(sim)])
    await trade_through(sim)
    assert len(await broker.get_positions_detail()) == 1


async def test_garbled_positions_are_refused_and_the_next_answer_is_read(tmp_path: Path) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        await held_position(sim, broker)
        (truth,) = await broker.get_positions_detail()
        for name, rewrite, says in HOSTILE_POSITIONS:
            sim.server.faults.rewrite_next(rewrite, path=POSITIONS)
            with pytest.raises(MalformedAnswerError, match="answer to positions") as raised:
                await broker.get_positions_detail()
            assert says in str(raised.value), (name, str(raised.value))
            assert await broker.get_positions_detail() == [truth], name
        assert sim.server.faults.injected["rewrite"] == len(HOSTILE_POSITIONS)


@pytest.mark.parametrize(
    ("rewrite", "says"),
    [
        (lambda body: {**body, "availableBalance": "NaN"}, "availableBalance is not a number"),
        (lambda body: {**body, "availableBalance": None}, "has no availableBalance"),
        (lambda body: {**body, "totalMarginBalance": "inf"}, "totalMarginBalance"),
        (lambda body: [body], "is not an object"),
    ],
)
async def test_a_garbled_balance_is_refused(tmp_path: Path, rewrite: Rewrite, says: str) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        before = (await broker.get_cash(), await broker.get_portfolio_value())
        sim.server.faults.rewrite_next(rewrite, count=2, path=ACCOUNT)
        refusals: list[str] = []
        for read in (broker.get_cash, broker.get_portfolio_value):
            try:
                await read()
            except MalformedAnswerError as exc:
                refusals.append(str(exc))
        assert any(says in refusal for refusal in refusals), refusals
        assert all("answer to account" in refusal for refusal in refusals), refusals
        assert (await broker.get_cash(), await broker.get_portfolio_value()) == before


@pytest.mark.parametrize(
    "rewrite",
    [
        lambda body: {**body, "avgPrice": "NaN", "executedQty": "NaN"},
        lambda body: {**body, "status": None},
        lambda body: {**body, "side": "HOLD"},
        lambda body: {k: v for k, v in body.items() if k != "clientOrderId"},
        lambda body: b"<html><body>maintenance</body></html>",
    ],
    ids=["nan-fill", "no-status", "odd-side", "no-client-id", "html"],
)
async def test_a_garbled_answer_to_a_placed_order_is_looked_up_not_placed_again(
    tmp_path: Path, rewrite: Rewrite, caplog: pytest.LogCaptureFixture
) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        await broker.reconcile()
        sim.server.faults.rewrite_next(rewrite, path=ORDER)  # the POST: placed, answer garbled
        (placed,) = await broker.execute_decisions([buy(sim)])
        assert placed.status == "open", placed
        orders = sim.server.orders.book.open_orders(None)
        assert [o.client_order_id for o in orders] == [placed.client_order_id]
        assert sim.server.requests[ORDER] == 2  # the POST and one lookup
        assert any("looking it up" in record.getMessage() for record in caplog.records)


async def test_a_garbled_fee_falls_back_to_the_configured_rate(tmp_path: Path) -> None:
    def nan_commission(body: Any) -> Any:
        return [{**fill, "commission": "NaN"} for fill in body]

    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        await held_position(sim, broker)
        sim.server.faults.rewrite_next(nan_commission, path=FILLS)
        price = sim.server.orders.book.price(BTC)
        sell = make_intent(BTC, Action.SELL, notional_usd=1_000.0, reference_price=price)
        (sold,) = await broker.execute_decisions([sell])
        assert sold.status == "filled" and sold.fee_estimated
        assert sold.fee_usd > 0 and sold.fee_usd == pytest.approx(
            sold.filled_quantity * (sold.average_price or 0.0) * 0.05 / 100
        )


@pytest.mark.parametrize(
    ("rewrite", "says"),
    [
        (lambda body: [body], "is not an object"),
        (lambda body: "one-way", "is not an object"),
        (lambda body: {}, "dualSidePosition"),
        (lambda body: {"dualSidePosition": "maybe"}, "dualSidePosition"),
        (lambda body: {"dualSidePosition": None}, "dualSidePosition"),
    ],
    ids=["list", "string", "no-field", "odd-value", "null"],
)
async def test_a_garbled_position_mode_is_refused_and_the_next_answer_is_read(
    tmp_path: Path, rewrite: Rewrite, says: str
) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        sim.server.faults.rewrite_next(rewrite, path=POSITION_MODE)
        with pytest.raises(MalformedAnswerError, match="answer to position mode") as raised:
            await broker.reconcile()
        assert says in str(raised.value)
        assert (await broker.reconcile()).positions == ()


@pytest.mark.parametrize("hedged", [True, "true"])
async def test_an_account_in_hedge_mode_refuses_to_start(tmp_path: Path, hedged: object) -> None:
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        sim.server.faults.rewrite_next(
            lambda body: {"dualSidePosition": hedged}, path=POSITION_MODE
        )
        with pytest.raises(RefuseToStartError, match="hedge mode"):
            await broker.reconcile()


async def test_a_negative_balance_is_no_cash_and_a_negative_equity_is_refused(
    tmp_path: Path,
) -> None:
    """The risk caps take cash and portfolio value as >= 0 (``agent.risk.RiskContext`` refuses a
    negative one, failing the decision, SELLs too)."""
    async with ccxt_sim(tmp_path) as sim, running_broker(sim) as broker:
        equity = await broker.get_portfolio_value()
        sim.server.faults.rewrite_next(
            lambda body: {**body, "availableBalance": "-50.5"}, path=ACCOUNT
        )
        assert await broker.get_cash() == 0.0
        sim.server.faults.rewrite_next(
            lambda body: {**body, "totalMarginBalance": "-50.5"}, path=ACCOUNT
        )
        with pytest.raises(MalformedAnswerError, match="totalMarginBalance must be >= 0"):
            await broker.get_portfolio_value()
        assert await broker.get_portfolio_value() == equity
        RiskContext(
            whitelist=(BTC,),
            portfolio_value_usd=equity,
            cash_usd=await broker.get_cash(),
        )

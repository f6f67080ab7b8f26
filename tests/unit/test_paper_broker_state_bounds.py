"""A paper state file whose figures a person (or a bad disk) made absurd: amounts with more
digits than the ledger keeps exactly, an open order filled beyond its quantity, a mark that is no
price. Each refuses to start naming the file, and the file is left untouched."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_paper_broker_persistence import EPOCH_MS, _edit, _refuses, busy_account

from core.clock import VirtualClock

Change = Callable[[dict[str, Any]], None]


def in_ledger(field: str, value: str) -> Change:
    return lambda document: document["ledger"].update({field: value})


def in_position(field: str, value: str) -> Change:
    def change(document: dict[str, Any]) -> None:
        (position,) = document["ledger"]["positions"].values()
        position[field] = value

    return change


@pytest.mark.parametrize(
    "change",
    [
        in_ledger("cash_usd", "1E+100"),
        in_ledger("starting_cash_usd", "1E+100"),
        in_ledger("realised_pnl_usd", "-1E+999999"),
        in_ledger("fees_paid_usd", "1E+60"),
        in_position("cost_basis_usd", "1E+100"),
    ],
    ids=["cash", "starting-cash", "realised-pnl", "fees", "cost-basis"],
)
async def test_an_amount_beyond_the_ledgers_digits_refuses_to_start(
    tmp_path: Path, change: Change
) -> None:
    path = tmp_path / "paper_broker.json"
    await busy_account(path, VirtualClock(EPOCH_MS))
    _edit(path, change)
    _refuses(path, "digits")


def in_open_order(field: str, value: str) -> Change:
    def change(document: dict[str, Any]) -> None:
        (order,) = [o for o in document["orders"] if o["status"] == "open"]
        order[field] = value

    return change


@pytest.mark.parametrize(
    "change",
    [
        in_open_order("filled_quantity", "1E+100"),
        in_open_order("filled_quantity", "0.01"),
        in_open_order("quantity", "0"),
        in_open_order("quantity", "-0.2"),
        in_open_order("quantity", "1E+100"),
        in_open_order("limit_price", "0"),
        in_open_order("limit_price", "-2217.37"),
        in_open_order("limit_price", "1E+30"),
    ],
    ids=[
        "overfilled",
        "part-filled",
        "no-quantity",
        "negative-quantity",
        "huge-quantity",
        "zero-limit",
        "negative-limit",
        "limit-beyond-its-reservation",
    ],
)
async def test_an_open_order_its_reservation_cannot_fill_refuses_to_start(
    tmp_path: Path, change: Change
) -> None:
    """Loaded, each failed every read of the open orders or every tick that traded through it,
    with its cash reserved until it expired."""
    path = tmp_path / "paper_broker.json"
    await busy_account(path, VirtualClock(EPOCH_MS))
    _edit(path, change)
    _refuses(path, "open order")


@pytest.mark.parametrize("price", ["NaN", "Infinity", "-Infinity", -5.0, 0.0, 1e308], ids=str)
async def test_a_saved_mark_that_is_no_price_refuses_to_start(
    tmp_path: Path, price: object
) -> None:
    """Loaded, a NaN or infinite mark failed every BUY of its ticker (ValueError) until a new
    price came, and a position was valued at any of them."""
    path = tmp_path / "paper_broker.json"
    await busy_account(path, VirtualClock(EPOCH_MS))
    _edit(path, lambda document: document["marks"].update({"BTC/USDT": [price, EPOCH_MS]}))
    _refuses(path, "mark")


@pytest.mark.parametrize("quantity", ["1E+100", "1E+16", "1E-100"])
async def test_a_saved_position_of_no_tradable_size_refuses_to_start(
    tmp_path: Path, quantity: str
) -> None:
    """Loaded, 1E+100 BTC valued the account at 1e102 and its SELL raised decimal.Inexact, and
    1E-100 BTC for its cost basis was an entry price of 7e102."""
    path = tmp_path / "paper_broker.json"
    await busy_account(path, VirtualClock(EPOCH_MS))
    _edit(path, in_position("quantity", quantity))
    _refuses(path, "position")

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

"""The API on loopback against hostile input and broken state-dir files: every answer is JSON a
strict parser reads (no NaN or Infinity literal), and a file it cannot read or trust is a clear
answer naming it (409, or the figure null with its reason), never a 500."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes.allocation_peak import allocation_peak
from fakes.api_support import serve_api
from fakes.fifo import released_fifo


def strict_json(text: str) -> object:
    """``json.loads`` refusing NaN, Infinity and -Infinity, as JSON.parse and most clients do."""

    def refuse(literal: str) -> object:
        raise ValueError(f"{literal} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_a_422_quoting_a_non_finite_number_is_strict_json(
    state_dir: Path, literal: str
) -> None:
    """FastAPI's validation errors echo the input, and Python's json wrote a NaN it read back
    as the literal NaN: a body no JSON parser but Python's reads."""
    routes = (("PUT", "/api/memory/notes", "notes"), ("POST", "/api/trading/halt", "reason"))
    async with serve_api(state_dir) as api:
        for method, route, name in routes:
            body = f'{{"{name}": {literal}}}'.encode()
            headers = {**api.auth, "content-type": "application/json"}
            async with api.session.request(
                method, api.url + route, data=body, headers=headers
            ) as r:
                assert r.status == 422, route
                (issue,) = strict_json(await r.text())["detail"]  # type: ignore[index]
            assert issue["loc"] == ["body", name]
            assert issue["input"] in {"NaN", "Infinity", "-Infinity"}


def edit_paper_account(state_dir: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = state_dir / "paper_broker.json"
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))


def set_mark(price: float) -> Callable[[dict[str, Any]], None]:
    return lambda document: document["marks"]["ETH/USDT"].__setitem__(0, price)


@pytest.mark.parametrize("price", [float("nan"), float("inf"), 0.0, -2200.0])
async def test_a_saved_mark_that_is_not_a_price_makes_equity_unavailable_with_why(
    state_dir: Path, price: float
) -> None:
    """json reads NaN and Infinity in paper_broker.json as floats: the equity was served as null
    with no reason (NaN serialised), and a mark of 0 or below as a -100 % or worse position."""
    edit_paper_account(state_dir, set_mark(price))
    async with serve_api(state_dir) as api:
        for route in ("/api/positions", "/api/status"):
            async with api.session.get(api.url + route, headers=api.auth) as r:
                assert r.status == 200, route
                body = strict_json(await r.text())
            assert isinstance(body, dict)
            assert body["equity_usd"] is None, route
            assert "ETH/USDT" in body["unavailable"]["equity_usd"], route
            if route == "/api/positions":
                (eth,) = body["positions"]
                assert eth["mark_price"] is None and eth["unrealised_pnl_pct"] is None
                assert eth["notional_usd"] == pytest.approx(840.0)  # at cost, as unmarked


async def test_a_position_of_no_cost_is_not_a_500(state_dir: Path) -> None:
    """A cost basis of 0 is an entry price of 0: the PnL percentage divided by it, a 500 on
    /api/positions and /api/status."""

    def no_cost(document: dict[str, Any]) -> None:
        ledger = document["ledger"]
        ledger["positions"]["ETH/USDT"]["cost_basis_usd"] = "0.00"
        ledger["starting_cash_usd"] = ledger["cash_usd"]  # still balanced

    edit_paper_account(state_dir, no_cost)
    async with serve_api(state_dir) as api:
        code, status = await api.get("/api/status")
        assert code == 200 and isinstance(status, dict) and status["equity_usd"] == 10040.0
        code, body = await api.get("/api/positions")
    assert code == 200 and isinstance(body, dict)
    (eth,) = body["positions"]
    assert eth["entry_price"] == 0.0 and eth["unrealised_pnl_pct"] is None


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("cost_basis_usd", "0.00", "does not balance"),  # the cost gone from the books
        ("quantity", "1e400", "not a quantity"),  # float: inf
        ("quantity", "1e-400", "not a quantity"),  # float: 0, an entry price of inf
        ("cash_usd", "1e400", "too large to be money"),  # decimal's InvalidOperation
    ],
)
async def test_a_paper_account_the_daemon_would_refuse_is_unavailable_with_why(
    state_dir: Path, field: str, value: str, reason: str
) -> None:
    """The API showed what the daemon refuses to load (a ledger that does not balance), an
    unbalanced zero cost as a 500, and quantities past a float's range as null figures."""

    def damage(document: dict[str, Any]) -> None:
        ledger = document["ledger"]
        target = ledger if field == "cash_usd" else ledger["positions"]["ETH/USDT"]
        target[field] = value

    edit_paper_account(state_dir, damage)
    async with serve_api(state_dir) as api:
        for route in ("/api/positions", "/api/status"):
            async with api.session.get(api.url + route, headers=api.auth) as r:
                assert r.status == 200, route
                body = strict_json(await r.text())
            assert isinstance(body, dict) and body["equity_usd"] is None
            why = body["unavailable"]["account" if route == "/api/positions" else "equity_usd"]
            assert "paper_broker.json" in why and reason in why, route


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: p.write_bytes(b"\xff\xfe garbage\n"), "not UTF-8"),
        (lambda p: (p.unlink(), p.mkdir()), "cannot be read"),
        (lambda p: p.write_text(p.read_text().replace("84000.0", "nan")), "line 2: price"),
        (lambda p: p.write_text(p.read_text().replace("0.425", "-inf")), "line 3: fee_usd"),
    ],
)
async def test_a_trades_file_that_cannot_be_read_is_a_409_naming_it(
    state_dir: Path, damage: Callable[[Path], object], reason: str
) -> None:
    """Bytes that are not UTF-8 and a folder in its place were 500s; a NaN price (the writer
    refuses one: only damage puts it there) was served as a price of null."""
    path = state_dir / "logs" / "trades.csv"
    damage(path)
    async with (
        serve_api(state_dir) as api,
        api.session.get(api.url + "/api/trades", headers=api.auth) as r,
    ):
        assert r.status == 409
        detail = strict_json(await r.text())["detail"]  # type: ignore[index]
    assert "trades.csv" in detail and reason in detail


async def test_a_fifo_at_the_trades_file_is_a_409_not_a_request_that_never_ends(
    state_dir: Path,
) -> None:
    """trades.csv was opened with a plain open, which waits on a FIFO for a writer: the request
    never answered, and each one held a worker thread for ever."""
    path = state_dir / "logs" / "trades.csv"
    path.unlink()
    os.mkfifo(path)
    with released_fifo(path) as released:
        async with serve_api(state_dir) as api:
            code, body = await api.get("/api/trades")
    assert not released(), "the API blocked on the FIFO"
    assert code == 409 and isinstance(body, dict)
    assert f"{path} cannot be read" in body["detail"] and "(a FIFO)" in body["detail"]


async def test_a_trades_file_ending_in_zeros_is_a_409_in_bounded_memory(state_dir: Path) -> None:
    """The zeros a crash can leave after the last row (512 MB here) were read as one line, whole,
    then decoded, before csv refused the NUL in it."""
    path = state_dir / "logs" / "trades.csv"
    os.truncate(path, path.stat().st_size + (512 << 20))
    async with serve_api(state_dir) as api:
        with allocation_peak() as allocated:
            code, body = await api.get("/api/trades")
    assert code == 409 and isinstance(body, dict) and "trades.csv" in body["detail"]
    assert allocated.peak_bytes < 128 << 20

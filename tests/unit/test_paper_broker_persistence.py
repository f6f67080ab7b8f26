"""PaperBroker state file: every change saved, a restart resumes exactly, an untrustworthy file
refuses to start (naming it) and is never overwritten."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fakes.fsync_counter import count_fsyncs

from broker.paper import PaperBroker
from broker.paper_store import SCHEMA_VERSION, parse_document
from broker.port import Action, OrderResult
from contract.broker_harness import make_intent
from core.clock import VirtualClock
from core.errors import RefuseToStartError

EPOCH_MS = 1_740_787_200_000
BTC, ETH, SOL = "BTC/USDT", "ETH/USDT", "SOL/USDT"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "paper_broker.json"


async def busy_account(path: Path, clock: VirtualClock, *, durable: bool = True) -> PaperBroker:
    """A filled BUY (position), a partial SELL (realised PnL), an open BUY and a rejection."""
    broker = PaperBroker(clock, state_path=path, durable=durable)
    buy = make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)
    await broker.execute_decisions([buy])
    await clock.advance(1)
    broker.on_market_price(BTC, 99.5, at_ms=clock.now_ms())
    await clock.advance(1)
    broker.on_market_price(BTC, 103.25, at_ms=clock.now_ms())
    await broker.execute_decisions(
        [
            make_intent(BTC, Action.SELL, notional_usd=309.75, reference_price=103.25),
            make_intent(ETH, Action.BUY, notional_usd=500.0, reference_price=2217.37),
            make_intent(SOL, Action.SELL, notional_usd=50.0, reference_price=142.0),
        ]
    )
    return broker


async def test_a_new_broker_on_the_same_file_resumes_exactly(path: Path) -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = await busy_account(path, clock)
    assert broker.ledger.realised_pnl_usd != 0 and broker.ledger.reserved_usd > 0

    resumed = PaperBroker(clock, state_path=path, starting_cash_usd=1)  # the file's cash wins
    assert resumed.ledger == broker.ledger
    assert resumed.open_orders() == broker.open_orders()
    assert await resumed.get_cash() == await broker.get_cash()
    assert await resumed.get_positions_detail() == await broker.get_positions_detail()
    assert await resumed.get_portfolio_value() == await broker.get_portfolio_value()
    for order in parse_document(path.read_bytes()).orders:
        assert await resumed.lookup(order.client_order_id) == await broker.lookup(
            order.client_order_id
        )


async def test_a_decision_replayed_after_a_restart_is_not_placed_again(path: Path) -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock, state_path=path)
    intent = make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)
    (first,) = await broker.execute_decisions([intent])
    del broker  # "crash"

    resumed = PaperBroker(clock, state_path=path)
    (again,) = await resumed.execute_decisions([intent])
    assert again == first
    assert len(resumed.open_orders()) == 1 and resumed.ledger.reserved_usd == Decimal("1000.2")


async def test_a_resumed_open_order_still_fills_and_keeps_its_expiry(path: Path) -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock, state_path=path, limit_ttl_secs=600)
    intent = make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)
    (placed,) = await broker.execute_decisions([intent])

    resumed = PaperBroker(clock, state_path=path, limit_ttl_secs=10_000)
    (open_order,) = resumed.open_orders()
    assert open_order.expires_at_ms == EPOCH_MS + 600_000
    await clock.advance(1)
    resumed.on_market_price(BTC, 99.0, at_ms=clock.now_ms())
    assert BTC in resumed.ledger.positions
    assert parse_document(path.read_bytes()).ledger == resumed.ledger
    found = await resumed.lookup(placed.client_order_id)
    assert found is not None and found.status == "filled"


async def test_every_change_is_on_disk_before_it_is_reported(path: Path) -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock, state_path=path)
    assert parse_document(path.read_bytes()).ledger == broker.ledger  # the fresh account too
    (placed,) = await broker.execute_decisions(
        [make_intent(BTC, Action.BUY, notional_usd=1000.0, reference_price=100.0)]
    )
    saved = parse_document(path.read_bytes())
    assert [o.client_order_id for o in saved.orders] == [placed.client_order_id]
    assert saved.ledger == broker.ledger
    await broker.cancel(placed.client_order_id)
    saved = parse_document(path.read_bytes())
    assert saved.orders[0].status == "cancelled" and saved.ledger.reserved_usd == 0


async def test_market_prices_alone_do_not_rewrite_the_file(path: Path) -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock, state_path=path)
    before = path.stat().st_mtime_ns, path.read_bytes()
    for n in range(50):
        broker.on_market_price(BTC, 100.0 + n, at_ms=clock.now_ms() + n)
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


async def test_finished_orders_beyond_the_history_limit_are_forgotten_oldest_first(
    path: Path,
) -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = PaperBroker(clock, state_path=path, history_limit=3)
    (kept_open,) = await broker.execute_decisions(
        [make_intent(BTC, Action.BUY, notional_usd=100.0, reference_price=100.0)]
    )
    rejected: list[OrderResult] = []
    for _ in range(5):
        await clock.advance(1)
        rejected += await broker.execute_decisions(
            [make_intent(SOL, Action.SELL, notional_usd=10.0, reference_price=140.0)]
        )
    saved = parse_document(path.read_bytes())
    assert [o.client_order_id for o in saved.orders] == [kept_open.client_order_id] + [
        r.client_order_id for r in rejected[-3:]
    ]
    assert await broker.lookup(rejected[0].client_order_id) is None
    assert await broker.lookup(kept_open.client_order_id) is not None


def _refuses(path: Path, match: str) -> None:
    before = path.read_bytes()
    with pytest.raises(RefuseToStartError, match=match) as caught:
        PaperBroker(VirtualClock(EPOCH_MS), state_path=path)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == before  # never overwritten


async def test_a_torn_file_refuses_to_start_and_is_left_alone(path: Path) -> None:
    await busy_account(path, VirtualClock(EPOCH_MS))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _refuses(path, "not JSON")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"kind": "vigil.paper_broker"}', "schema_version None"),
        (json.dumps({"schema_version": SCHEMA_VERSION + 1}).encode(), "newer vigil"),
        (json.dumps({"schema_version": 0}).encode(), "not one this vigil reads"),
        (json.dumps({"schema_version": SCHEMA_VERSION}).encode(), "invalid content"),
        # json's own limits: a ValueError and a RecursionError, not JSONDecodeErrors
        (b'{"schema_version": ' + b"1" * 5000 + b"}", "not JSON this vigil can read .*too long"),
        (b"[" * 100_000, "not JSON this vigil can read .*nested too deeply"),
        # valid JSON, but half a surrogate pair: loaded, it failed every later save
        (b'{"schema_version": 1, "x": "\\ud800"}', "half of a surrogate pair"),
    ],
)
def test_a_file_that_is_not_a_paper_state_refuses_to_start(
    path: Path, content: bytes, match: str
) -> None:
    path.write_bytes(content)
    _refuses(path, match)


def _edit(path: Path, change: Any) -> None:
    document = json.loads(path.read_bytes())
    change(document)
    path.write_text(json.dumps(document))


async def test_a_ledger_that_does_not_balance_refuses_to_start(path: Path) -> None:
    await busy_account(path, VirtualClock(EPOCH_MS))
    _edit(path, lambda d: d["ledger"].update(cash_usd="99999.00000000"))
    _refuses(path, "does not balance")


async def test_reserved_cash_that_open_orders_do_not_explain_refuses_to_start(path: Path) -> None:
    await busy_account(path, VirtualClock(EPOCH_MS))

    def drop_open_orders(document: dict[str, Any]) -> None:
        document["orders"] = [o for o in document["orders"] if o["status"] != "open"]

    _edit(path, drop_open_orders)
    _refuses(path, "reserve")


async def test_negative_cash_refuses_to_start(path: Path) -> None:
    PaperBroker(VirtualClock(EPOCH_MS), state_path=path)
    _edit(path, lambda d: d["ledger"].update(cash_usd="-1"))
    _refuses(path, "invalid content")


def test_stale_temporary_files_of_a_crashed_save_are_removed(path: Path) -> None:
    PaperBroker(VirtualClock(EPOCH_MS), state_path=path)
    stale = path.with_name(f".{path.name}.0123456789abcdef.tmp")
    stale.write_bytes(b"half a sa")
    PaperBroker(VirtualClock(EPOCH_MS), state_path=path)
    assert not stale.exists()


def test_a_state_file_that_cannot_be_written_refuses_to_start(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "paper_broker.json"
    with pytest.raises(RefuseToStartError, match="cannot write"):
        PaperBroker(VirtualClock(EPOCH_MS), state_path=missing)


async def test_save_writes_the_latest_marks_that_alone_never_trigger_a_save(path: Path) -> None:
    clock = VirtualClock(EPOCH_MS)
    broker = await busy_account(path, clock)
    await clock.advance(60)
    broker.on_market_price(BTC, 111.0, at_ms=clock.now_ms())  # no order crossed: marks only
    before = parse_document(path.read_bytes())
    assert before.marks[BTC].price != 111.0
    broker.save()  # the daemon's shutdown hook
    after = parse_document(path.read_bytes())
    assert after.marks[BTC].price == 111.0
    assert after.ledger == before.ledger
    resumed = PaperBroker(clock, state_path=path)
    assert resumed.portfolio_value_usd() == broker.portfolio_value_usd()


async def test_a_broker_that_is_not_durable_saves_the_same_file_without_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay's paper account (``durable=False``): the same account, saved without fsync (the
    bytes are the same function's of the same document; order ids are random here)."""
    synced = count_fsyncs(monkeypatch)
    durable_path, quick_path = tmp_path / "durable.json", tmp_path / "quick.json"
    durable = await busy_account(durable_path, VirtualClock(EPOCH_MS))
    assert synced
    synced.clear()
    quick = await busy_account(quick_path, VirtualClock(EPOCH_MS), durable=False)
    assert synced == []
    resumed = PaperBroker(VirtualClock(EPOCH_MS), state_path=quick_path)
    assert resumed.ledger == quick.ledger == durable.ledger
    assert await resumed.get_positions_detail() == await quick.get_positions_detail()
    assert resumed.open_orders() == quick.open_orders()

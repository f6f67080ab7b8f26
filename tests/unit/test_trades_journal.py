"""trades.csv: one row per fill even when brokers announce their fills again on start, the
``fee_estimated`` column, and a file from an older vigil widened instead of refused."""

from __future__ import annotations

from pathlib import Path

from api.metrics import DaemonMetrics
from core.bus import EventBus
from core.events import OrderFilled
from runner.subscriptions import trades_row_writer
from state.csv_widen import widen_csv_columns
from state.journal import CsvJournal, read_csv_rows
from state.records import TRADE_COLUMNS, TRADE_COLUMNS_V1


def fill(cid: str, *, estimated: bool = False) -> OrderFilled:
    return OrderFilled(
        at_ms=1,
        client_order_id=cid,
        ticker="BTC/USDT",
        side="buy",
        quantity=0.5,
        price=100.0,
        fee=0.01,
        fee_estimated=estimated,
    )


def test_a_fill_announced_again_gets_one_row_even_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    for _run in range(2):  # the second run is a restart announcing the recorded fills again
        bus = EventBus()
        with CsvJournal(path, TRADE_COLUMNS, fsync=False) as trades:
            bus.subscribe("order.filled", trades_row_writer(trades), name="trades")
            bus.publish(fill("a"))
            bus.publish(fill("a"))
            bus.publish(fill("b", estimated=True))
    rows = read_csv_rows(path)
    assert [(r["client_order_id"], r["fee_estimated"]) for r in rows] == [
        ("a", "false"),
        ("b", "true"),
    ]


def test_an_older_trades_file_is_widened_not_refused(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    with CsvJournal(path, TRADE_COLUMNS_V1, fsync=False) as old:
        old.append({c: "1" for c in TRADE_COLUMNS_V1} | {"client_order_id": "x"})
    path.write_bytes(path.read_bytes() + b"1,torn")  # an interrupted row stays for the repair
    assert widen_csv_columns(path, TRADE_COLUMNS_V1, TRADE_COLUMNS)
    bus = EventBus()
    with CsvJournal(path, TRADE_COLUMNS, fsync=False) as trades:
        bus.subscribe("order.filled", trades_row_writer(trades), name="trades")
        bus.publish(fill("x"))  # already journaled by the older vigil
        bus.publish(fill("y"))
    rows = read_csv_rows(path)
    assert [(r["client_order_id"], r["fee_estimated"]) for r in rows] == [("x", ""), ("y", "false")]
    assert not widen_csv_columns(path, TRADE_COLUMNS_V1, TRADE_COLUMNS)  # already the new one


def test_a_fill_announced_again_on_start_is_not_counted_again() -> None:
    metrics = DaemonMetrics()
    metrics.on_event(fill("a"))
    metrics.on_event(fill("a").model_copy(update={"recovered": True}))
    assert metrics.fills.labels("buy")._value.get() == 1.0

"""Files people open in a terminal or a pager: ``report.json`` (``vigil report``), the ccxt broker's
order journal and the exits outbox. orjson writes DEL and U+0080..U+009F raw, so a decider's
reason or an exchange's error text holding U+009B (a terminal's CSI) drove the terminal of whoever
read them; they are now written as ``\\u`` escapes (the same JSON), as ``decisions.jsonl`` is, and
each file reads back as it was written."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from fakes.report_support import DECISIONS, decision_line, write_run

from broker.order_journal import JournalIntent, OrderJournal
from broker.port import OrderResult
from runner.cli import main
from state.outbox import Outbox

HOSTILE = "rejected\x9b2J\x7f\u0085 by the exchange"
#: DEL and C1 in UTF-8 (C0 orjson escapes already)
_RAW = re.compile(b"\x7f|\xc2[\x80-\x9f]")


def test_report_json_escapes_del_and_c1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [decision_line(*d) for d in DECISIONS]
    lines[0]["decider_reason"] = HOSTILE
    run = write_run(tmp_path / "run", lines)
    assert main(["--state-dir", str(tmp_path / "state"), "report", str(run)]) == 0
    written = (run / "report.json").read_bytes()
    assert _RAW.search(written) is None, written[:2000]
    reasons = {row["decider_reason"] for row in orjson.loads(written)["deciders"]}
    assert HOSTILE in reasons, capsys.readouterr()


def test_the_order_journal_escapes_del_and_c1_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "orders.jsonl"
    journal = OrderJournal(path)
    journal.load()
    intent = JournalIntent(
        client_order_id="vgb-1",
        decision_id="d1",
        ticker="BTC/USDT",
        side="buy",
        requested_notional_usd=1_000.0,
        at_ms=1_740_787_200_000,
        regime=HOSTILE,
    )
    journal.record_intent(intent)
    rejected = OrderResult(
        client_order_id="vgb-1",
        ticker="BTC/USDT",
        side="buy",
        status="rejected",
        requested_notional_usd=1_000.0,
        reason=HOSTILE,
        at_ms=1_740_787_200_000,
    )
    journal.record_final(rejected)
    assert _RAW.search(path.read_bytes()) is None, path.read_bytes()
    again = OrderJournal(path)
    again.load()
    assert again.get("vgb-1") == journal.get("vgb-1")


def test_the_exits_outbox_escapes_del_and_c1_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "exits.outbox.jsonl"
    outbox = Outbox(path)
    outbox.load()
    entry = outbox.append("x1", "exit", 1_740_787_200_000, {"reason": HOSTILE})
    assert _RAW.search(path.read_bytes()) is None, path.read_bytes()
    again = Outbox(path)
    again.load()
    assert again.entries() == [entry]

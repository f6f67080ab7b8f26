"""``state.outbox``: durable, keyed, replayed on start, one acknowledgement cursor per consumer."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import RefuseToStartError
from core.events import PositionExit
from learner.online import OnlineLearner
from state.outbox import Outbox, OutboxEntry


def opened(path: Path) -> Outbox:
    outbox = Outbox(path)
    outbox.load()
    return outbox


def test_an_entry_is_kept_once_per_key_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "outbox" / "exits.jsonl"
    first = opened(path)
    a = first.append("sell-1", "position.exit", 10, {"pnl_pct": 1.0})
    assert first.append("sell-1", "position.exit", 11, {"pnl_pct": 2.0}) == a
    again = opened(path)
    assert again.append("sell-1", "position.exit", 12, {}) == a
    b = again.append("sell-2", "position.exit", 13, {})
    assert [(e.seq, e.key) for e in opened(path).entries()] == [(1, "sell-1"), (2, "sell-2")]
    assert b.seq == 2


def test_each_consumer_takes_what_it_has_not_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "exits.jsonl"
    outbox = opened(path)
    taken: list[str] = []
    outbox.subscribe("learner", lambda e: taken.append(e.key))
    outbox.append("a", "k", 1, {})
    outbox.append("b", "k", 2, {})
    assert outbox.deliver() == 2 and taken == ["a", "b"]

    restarted = opened(path)
    later: list[str] = []
    restarted.subscribe("learner", lambda e: later.append(e.key))
    memory: list[str] = []
    restarted.subscribe("memory", lambda e: memory.append(e.key))  # a consumer added later
    restarted.append("c", "k", 3, {})
    restarted.deliver()
    assert later == ["c"] and memory == ["a", "b", "c"]
    assert (tmp_path / "exits.jsonl.memory.ack").read_text() == "3\n"


def test_a_failing_consumer_gets_the_same_entry_again_and_others_go_on(tmp_path: Path) -> None:
    outbox = opened(tmp_path / "exits.jsonl")
    fails = [True]
    got: list[str] = []

    def flaky(entry: OutboxEntry) -> None:
        if fails.pop(0) if fails else False:
            raise RuntimeError("store down")
        got.append(entry.key)

    other: list[str] = []
    outbox.subscribe("flaky", flaky)
    outbox.subscribe("steady", lambda e: other.append(e.key))
    outbox.append("a", "k", 1, {})
    outbox.append("b", "k", 2, {})
    assert outbox.deliver() == 2  # steady took both; flaky none
    assert [e.key for e in outbox.pending("flaky")] == ["a", "b"]
    outbox.deliver()
    assert got == ["a", "b"] and other == ["a", "b"]


def test_a_torn_last_line_is_dropped_and_a_damaged_one_refuses(tmp_path: Path) -> None:
    path = tmp_path / "exits.jsonl"
    outbox = opened(path)
    outbox.append("a", "k", 1, {})
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"seq":2,"key":"b"')
    assert [e.key for e in opened(path).entries()] == ["a"]
    assert path.read_bytes() == whole
    path.write_bytes(b"garbage\n" + whole)
    with pytest.raises(RefuseToStartError, match="line 1"):
        opened(path)


def test_the_learner_recognises_an_exit_delivered_again(tmp_path: Path) -> None:
    """The kill fell after the learner saved the trade and before the cursor moved."""
    event = PositionExit(
        at_ms=5,
        ticker="BTC/USDT",
        reason="STOP LOSS",
        pnl_pct=-3.0,
        holding_secs=60.0,
        regime="high_volatility",
        signals={"rsi": 0.5},
    )
    model = tmp_path / "online_learner.json"
    OnlineLearner(model).on_position_exit(event, trade_id="vgs-BTCUSDT-1")
    again = OnlineLearner(model)
    again.on_position_exit(event, trade_id="vgs-BTCUSDT-1")
    assert len(again.recent_trades()) == 1
    assert again.posteriors(None)["signals"]["rsi"]["trades"] == 1

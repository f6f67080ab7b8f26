"""Write-back: exits through the durable outbox into the store, reflections, filters, rollups."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fakes.memory_support import T0, make_writer, open_and_exit
from fakes.virtual_time import drive

from core.bus import EventBus, Overflow
from core.clock import VirtualClock
from core.events import PositionExit, Topic
from memory.config import MemoryConfig, WriteConfig
from memory.embeddings import HashedNgramEmbedder
from memory.insights import apply_summary_policy, cut_at_sentence
from memory.model import Trade
from memory.outbox import MemoryOutbox
from memory.port import StoreUnavailableError
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter


async def test_an_exit_becomes_a_trade_and_a_reflection(tmp_path: Path) -> None:
    writer = make_writer(tmp_path)
    open_and_exit(writer, 0)
    assert writer.pending() == 1  # durable before any store write
    assert await writer.flush() == 1
    assert writer.pending() == 0
    store = writer._store
    (stats,) = await store.regime_stats(ticker="SOL/USDT", regime=None)
    assert (stats.n, stats.wins) == (1, 0)
    trade = await store.get_trade((await store.export())[0]["trade_id"])
    assert trade is not None
    assert trade.entry_price == 150.0
    assert trade.exit_price == pytest.approx(150.0 * (1 - 0.042))
    assert trade.fees_usd == pytest.approx(0.10)
    assert (trade.decision_id, trade.decided_by, trade.confidence) == ("d0", "fallback", 0.7)
    assert trade.situation is not None
    (insight,) = await store.list_insights()
    assert (
        insight.text
        == "[SOL] medium_volatility, RSI 71 entry, -4.2 % in 9 h: stop loss; momentum signal wrong"
    )
    assert (insight.author, insight.summary_source, insight.trade_id) == (
        "rules",
        "rules",
        trade.trade_id,
    )


async def test_an_exit_without_a_seen_entry_says_so(tmp_path: Path) -> None:
    writer = make_writer(tmp_path)
    writer.on_exit(
        PositionExit(
            at_ms=T0,
            ticker="BTC/USDT",
            reason="trailing_stop",
            pnl_pct=9.0,
            holding_secs=3600,
            regime="low_volatility",
        )
    )
    await writer.flush()
    (row,) = [r for r in await writer._store.export() if r["type"] == "trade"]
    assert row["entry_price"] is None and row["situation"] is None
    assert "entry" in row["unavailable"]
    assert len(await writer._store.list_insights()) == 1  # never an empty lesson


async def test_store_down_keeps_the_row_pending(tmp_path: Path) -> None:
    class DownThenUp(SqliteMemoryStore):
        down = True

        async def put_trade(self, trade: Trade) -> bool:
            if self.down:
                raise StoreUnavailableError("down")
            return await super().put_trade(trade)

    store = DownThenUp(tmp_path / "memory.db")
    clock = VirtualClock(T0)
    writer = MemoryWriter(
        clock, store, MemoryOutbox(tmp_path / "o.jsonl"), MemoryConfig(), HashedNgramEmbedder()
    )
    open_and_exit(writer, 0)
    assert await drive(clock, writer.flush()) == 0  # the retries sleep on the virtual clock
    assert writer.pending() == 1 and writer.stats.store_failures == 1
    store.down = False
    assert await writer.flush() == 1


async def test_duplicates_are_filtered_and_old_lessons_rolled_up(tmp_path: Path) -> None:
    config = MemoryConfig(write=WriteConfig(max_per_ticker_regime=10, rollup_count=5))
    writer = make_writer(tmp_path, config)
    for n in range(14):
        open_and_exit(writer, n, pnl=-4.2 if n % 2 else 3.1)
    await writer.flush()
    store = writer._store
    counts = await store.counts()
    assert counts["trades"] == 14
    rollups = await store.list_insights(kind="rollup")
    assert len(rollups) == 1 and len(rollups[0].summarises) == 5
    assert "rollup of 5 lessons" in rollups[0].text
    live = await store.list_insights(kind="reflection", limit=100)
    assert len(live) <= 10


async def test_write_filters(tmp_path: Path) -> None:
    from contract.memory_contract import make_insight

    writer = make_writer(tmp_path)
    embed = HashedNgramEmbedder().embed_now
    first = make_insight("Do not buy SOL after a funding spike above 0.05 %.", kind="person")
    first = first.model_copy(update={"author": "person", "embedding": embed([first.text])[0]})
    assert await writer.accept(first)
    await writer._store.put_insight(first)
    again = make_insight(
        "Do not buy SOL after a funding spike above 0.05 % .",
        kind="person",
        created_ms=T0 + 5 * 86_400_000,
    )
    again = again.model_copy(update={"author": "person", "embedding": embed([again.text])[0]})
    assert not await writer.accept(again)  # near-duplicate text of the same ticker and kind
    short = make_insight("too short", kind="person", created_ms=T0 + 1)
    assert not await writer.accept(short)
    assert (writer.stats.skipped_duplicate, writer.stats.skipped_short) == (1, 1)


def test_summary_policy_order() -> None:
    assert apply_summary_policy("long text.", "short", budget=300, kind="reflection") == (
        "short",
        "model_summary",
    )
    text = "First sentence here. Second sentence is much longer than the budget allows."
    assert apply_summary_policy(text, None, budget=30, kind="reflection") == (
        "First sentence here.",
        "sentence_cut",
    )
    assert apply_summary_policy("", None, budget=30, kind="rollup")[1] == "default"
    assert cut_at_sentence("no sentence end but many words here", 20).endswith("…")


def test_kill_minus_9_during_write_back_loses_no_trade(tmp_path: Path) -> None:
    """A child process records exits into the outbox and is killed (SIGKILL) while it writes them
    to the store; a new writer then drains the outbox: every exit is a Trade, exactly once."""
    script = textwrap.dedent(
        f"""
        import asyncio, os, signal, sys
        sys.path[:0] = {[str(Path.cwd()), str(Path.cwd() / "tests")]!r}
        from pathlib import Path
        from fakes.memory_support import make_writer, open_and_exit
        async def main():
            writer = make_writer(Path({str(tmp_path)!r}))
            for n in range(40):
                open_and_exit(writer, n, pnl=float(n % 5) - 2)
            print("recorded", flush=True)
            # a failpoint: the process dies inside the 7th store write
            from memory.sqlite_store import SqliteMemoryStore
            class Dying(SqliteMemoryStore):
                count = 0
                async def put_insight(self, insight):
                    Dying.count += 1
                    if Dying.count == 7:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return await super().put_insight(insight)
            writer._store = Dying(Path({str(tmp_path)!r}) / "memory.db")
            await writer.flush()
        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert done.returncode == -9, done.stderr
    assert "recorded" in done.stdout

    async def drain() -> dict[str, int]:
        writer = make_writer(tmp_path)
        assert 0 < writer.pending() < 40  # some were written before the kill, the rest wait
        await writer.flush()
        assert writer.pending() == 0
        return await writer._store.counts()

    import asyncio

    counts = asyncio.run(drain())
    assert counts["trades"] == 40


def test_queued_wakeups_coalesce(tmp_path: Path) -> None:
    bus = EventBus()
    writer = make_writer(tmp_path)
    bus.subscribe_queued(
        Topic.POSITION_EXIT,
        writer.on_wake,
        name="w",
        maxsize=4,
        overflow=Overflow.COALESCE,
        key=lambda _e: "wake",
    )
    for n in range(3):
        bus.publish(
            PositionExit(
                at_ms=T0 + n, ticker="SOL/USDT", reason="x", pnl_pct=1.0, holding_secs=1, regime="r"
            )
        )
    assert bus.stats()["position.exit:w"]["queued"] == 1


async def test_an_exit_the_outbox_cannot_take_reaches_the_store_when_the_disk_frees(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A memory outbox that cannot be appended to (a link to ``/dev/full`` in its place, never
    followed: ELOOP, as a full disk's ENOSPC): the exit is kept in memory and said once, not
    raised into the bus, and the next wake-up after the link goes records it and writes it to
    the store."""
    writer = make_writer(tmp_path)
    outbox = tmp_path / "outbox" / "memory.jsonl"
    outbox.parent.mkdir(parents=True, exist_ok=True)
    outbox.symlink_to("/dev/full")
    for hours in (1, 2):
        writer.on_exit(
            PositionExit(
                at_ms=T0 + hours * 3_600_000,
                ticker="BTC/USDT",
                reason="trailing_stop",
                pnl_pct=9.0,
                holding_secs=3600,
                regime="low_volatility",
            )
        )
    assert await writer.flush() == 0
    assert len([r for r in caplog.records if "could not be recorded" in r.getMessage()]) == 1

    outbox.unlink()
    assert await writer.flush() == 2
    trades = [r for r in await writer._store.export() if r["type"] == "trade"]
    assert len(trades) == 2 and writer.pending() == 0


async def test_an_entry_the_outbox_cannot_take_is_kept_for_its_trade(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The memory outbox on a full disk from before the entry until after the exit, the handlers
    called through the bus as the daemon wires them: the entry (price, fees, situation, decision)
    is kept in memory with the exit, said once, and the trade written after the disk frees is the
    whole trade. The OSError went into the bus handler's traceback at each fill and entry, and
    the trade was written as 'the entry was not seen by this memory'."""
    writer = make_writer(tmp_path)
    bus = EventBus()
    bus.subscribe(Topic.DECISION_MADE, writer.on_decision, name="memory_decisions")
    bus.subscribe(Topic.ORDER_FILLED, writer.on_fill, name="memory_fees")
    bus.subscribe(Topic.POSITION_OPENED, writer.on_opened, name="memory_entries")
    bus.subscribe(Topic.POSITION_EXIT, writer.on_exit, name="memory_outbox")
    outbox = tmp_path / "outbox" / "memory.jsonl"
    outbox.parent.mkdir(parents=True, exist_ok=True)
    outbox.symlink_to("/dev/full")

    class Publishing:
        """open_and_exit's events, through the bus."""

        def note_situation(self, *args: object) -> None:
            writer.note_situation(*args)  # type: ignore[arg-type]

        def __getattr__(self, name: str) -> object:
            return bus.publish

    open_and_exit(Publishing(), 0)  # type: ignore[arg-type]
    assert not [r for r in caplog.records if r.name == "core.bus"]
    assert len([r for r in caplog.records if "could not be recorded" in r.getMessage()]) == 1
    assert await writer.flush() == 0

    outbox.unlink()
    assert await writer.flush() == 1
    (trade,) = [r for r in await writer._store.export() if r["type"] == "trade"]
    assert trade["unavailable"] == {}
    assert trade["entry_price"] == 150.0 and trade["fees_usd"] == pytest.approx(0.10)
    assert trade["decision_id"] == "d0" and trade["situation"] is not None
    assert writer._outbox.entry("SOL/USDT") is None  # closed in the file too
    reopened = MemoryOutbox(outbox)
    assert reopened.entry("SOL/USDT") is None and reopened.pending_count() == 0


async def test_a_trade_row_that_is_not_a_trade_is_passed_and_the_later_ones_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A trade row of the memory outbox that is not a Trade (a hand edit, another program's
    line): it is left in the file, passed with one warning naming it, and the trades after it
    reach the store. Its ValidationError ended every wake-up's flush with a traceback, so no
    later trade was ever written to memory."""
    import orjson

    outbox = tmp_path / "outbox" / "memory.jsonl"
    outbox.parent.mkdir(parents=True)
    row = {"seq": 1, "key": "t-x", "kind": "trade", "at_ms": 1, "payload": {"pnl_pct": "abc"}}
    outbox.write_bytes(orjson.dumps(row) + b"\n")
    writer = make_writer(tmp_path)
    open_and_exit(writer, 0)
    assert await writer.flush() == 1
    assert await writer.flush() == 0 and writer.pending() == 0
    (said,) = [r for r in caplog.records if "t-x" in r.getMessage()]
    assert said.levelname == "WARNING" and not said.exc_info
    assert len([r for r in await writer._store.export() if r["type"] == "trade"]) == 1
    assert outbox.read_bytes().startswith(orjson.dumps(row))


@pytest.mark.parametrize(
    "edit",
    [
        {"entry_price": "abc"},
        {"fees_usd": "x"},
        {"fees_usd": "x", "_then": "a good entry before it"},
        {"signals": 5},
        {"situation": {"regime": 1}},
        {"entry_price": -150.0},
        {"confidence": "high"},
        {"macro": None},
    ],
    ids=[
        "price text",
        "fees text",
        "after a good one",
        "signals a number",
        "situation",
        "price < 0",
        "conf",
        "macro",
    ],
)
async def test_an_entry_row_of_fields_it_cannot_be_is_left_out_and_the_exit_written(
    tmp_path: Path, edit: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    """The memory outbox's open entry, read back at start, edited into what no writer records
    (a hand edit, another program's line): the exit's trade raised from it (TypeError,
    ValidationError) inside the exit's bus handler, so the exit was never recorded and its
    trade never reached memory; a fill of the ticker raised at each fee. The entry is left
    out with a warning (kept in the file) and the trade is written as one whose entry was not
    seen."""
    import orjson

    from core.events import OrderFilled, PositionExit

    outbox = tmp_path / "outbox" / "memory.jsonl"
    if edit.pop("_then", None):  # the last entry wins, even one that cannot be read
        MemoryOutbox(outbox).put_entry("SOL/USDT", {"entry_ms": T0 - 1, "entry_price": 149.0})
    MemoryOutbox(outbox).put_entry(
        "SOL/USDT", {"entry_ms": T0, "entry_price": 150.0, "fees_usd": 0.03, **edit}
    )
    writer = make_writer(tmp_path)  # a restart: the entry is read from the file
    writer.on_fill(
        OrderFilled(
            at_ms=T0 + 1,
            client_order_id="s0",
            ticker="SOL/USDT",
            side="sell",
            quantity=1,
            price=143.7,
            fee=0.07,
        )
    )
    writer.on_exit(
        PositionExit(
            at_ms=T0 + 9 * 3_600_000,
            ticker="SOL/USDT",
            reason="stop_loss",
            pnl_pct=-4.2,
            holding_secs=9 * 3600,
            regime="medium_volatility",
        )
    )
    assert await writer.flush() == 1
    (trade,) = [r for r in await writer._store.export() if r["type"] == "trade"]
    assert trade["entry_price"] is None and "entry" in trade["unavailable"]
    assert any("left out (kept in the file)" in r.getMessage() for r in caplog.records)
    rows = [orjson.loads(line) for line in outbox.read_bytes().splitlines()]
    assert [r["payload"]["body"] for r in rows if r["kind"] == "entry"][-1]["entry_ms"] == T0
    await writer._store.close()


@pytest.mark.parametrize("exit_ms", [10**17, 4_102_444_800_000, -(10**15)])
async def test_a_trade_row_dated_where_no_clock_is_is_passed_and_the_later_ones_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, exit_ms: int
) -> None:
    """A trade row of the memory outbox that is a Trade but dated where no run's clock can be
    (an exit_ms past 2100 or before 1970: a hand edit, another program's line): its lesson's
    UTC day was datetime's ValueError ('year is out of range') out of the flush at every
    wake-up, before the trades after it, so no later trade reached memory; past 2100 and under
    year 9999 its lesson was stored where every read leaves it out. It is passed like a row
    that is not a trade, with one warning, and stays in the file."""
    import orjson

    from contract.memory_contract import make_trade

    outbox = tmp_path / "outbox" / "memory.jsonl"
    outbox.parent.mkdir(parents=True)
    body = orjson.loads(make_trade(0).model_dump_json()) | {"exit_ms": exit_ms}
    row = {"seq": 1, "key": "t-odd", "kind": "trade", "at_ms": 1, "payload": body}
    outbox.write_bytes(orjson.dumps(row) + b"\n")
    writer = make_writer(tmp_path)
    open_and_exit(writer, 0)
    assert await writer.flush() == 1
    assert writer.pending() == 0
    (said,) = [r for r in caplog.records if "t-odd" in r.getMessage()]
    assert said.levelname == "WARNING" and not said.exc_info
    trades = [r for r in await writer._store.export() if r["type"] == "trade"]
    assert [t["exit_ms"] for t in trades] != [exit_ms] and len(trades) == 1
    assert outbox.read_bytes().startswith(orjson.dumps(row))
    await writer._store.close()


async def test_a_rollup_over_a_lesson_of_another_vector_length_is_written(tmp_path: Path) -> None:
    """A live reflection whose situation vector is not the 12 features' (imported, or written
    by another vigil): rolling the oldest lessons up averaged the vectors with zip(strict=True),
    a ValueError out of the writer's flush at every wake-up that rolled, so the trades after it
    never reached memory. The rollup's vector is the mean of the comparable ones."""
    from contract.memory_contract import make_insight

    config = MemoryConfig(write=WriteConfig(max_per_ticker_regime=10, rollup_count=5))
    writer = make_writer(tmp_path, config)
    odd = make_insight(
        "SOL: the oldest lesson, of a vector of three values",
        created_ms=1_700_000_000_000,
        vector=(0.1, 0.2, 0.3),
    )
    await writer._store.put_insight(odd)
    for n in range(11):
        open_and_exit(writer, n, pnl=-4.2 if n % 2 else 3.1)
    assert await writer.flush() == 11
    (rollup,) = await writer._store.list_insights(kind="rollup")
    assert odd.insight_id in rollup.summarises
    assert rollup.situation_vector is not None and len(rollup.situation_vector) == 12
    await writer._store.close()

"""Trading memory: retrieval p95 over 100k insights + 50k trades in SQLite, write-back cost per
exit, memory.db size per 10k trades. ``python -m bench memory [--insights N --trades N]``."""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from agent.memory_view import MemoryInsights
from core.clock import VirtualClock
from core.events import PositionExit, PositionOpened
from memory.config import MemoryConfig
from memory.embeddings import HashedNgramEmbedder
from memory.model import REGIME_LABELS, SITUATION_FEATURES, Insight, Situation, Trade
from memory.outbox import MemoryOutbox
from memory.retrieval import Retriever
from memory.sqlite_schema import bulk_insert, insight_row, trade_row
from memory.sqlite_store import SqliteMemoryStore
from memory.writeback import MemoryWriter

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")
T0 = 1_700_000_000_000
HOUR = 3_600_000
_MEASURED = 1_000  # single writes timed before the bulk fill


def _situation(rng: random.Random) -> Situation:
    features = {name: centre + rng.gauss(0, scale) for name, centre, scale in SITUATION_FEATURES}
    return Situation.from_features(features, rng.choice(REGIME_LABELS))


def _trade(n: int, rng: random.Random) -> Trade:
    situation = _situation(rng)
    ticker = TICKERS[n % 3]
    entry = T0 + n * HOUR
    return Trade(
        trade_id=Trade.make_id(ticker, entry, entry + 9 * HOUR), ticker=ticker, entry_ms=entry,
        exit_ms=entry + 9 * HOUR, entry_price=100.0, exit_price=101.0, pnl_pct=rng.gauss(0, 4),
        fees_usd=0.1, holding_secs=32_400, exit_reason="stop_loss", signals={"rsi": 0.4},
        confidence=0.6, decided_by="fallback", decision_id=f"d{n}", regime=situation.regime,
        situation=situation,
    )  # fmt: skip


def _insight(
    n: int, rng: random.Random, trades: int, insights: int, text: str, emb: tuple[float, ...]
) -> Insight:
    situation = _situation(rng)
    created = T0 + n * (trades * HOUR // max(insights, 1))
    return Insight(
        insight_id=Insight.make_id("reflection", created, TICKERS[n % 3], text), text=text,
        kind="reflection", salience=rng.random(), author="rules", summary_source="rules",
        created_ms=created, ticker=TICKERS[n % 3], regime=situation.regime,
        situation_vector=situation.vector, embedding=emb,
    )  # fmt: skip


async def _fill(path: Path, trades: int, insights: int) -> None:
    """The first ``_MEASURED`` trades and insights go through ``put_trade`` / ``put_insight``
    (one transaction each, timed); the rest are bulk-inserted with the same rows in one
    transaction, so filling 150k items takes seconds, not the ~10 minutes of single writes."""
    rng, embed = random.Random(7), HashedNgramEmbedder().embed_now
    texts = [
        f"[{TICKERS[n % 3][:3]}] lesson {n}: RSI {rng.randint(20, 80)} entry, stop loss"
        for n in range(insights)
    ]
    embeddings = embed(texts)
    store = SqliteMemoryStore(path)
    started, measured = time.perf_counter(), 0
    trade_rows, insight_rows = [], []
    for n in range(trades):
        trade = _trade(n, rng)
        if n < _MEASURED:
            await store.put_trade(trade)
            measured += 1
        else:
            trade_rows.append(trade_row(trade))
    for n, (text, emb) in enumerate(zip(texts, embeddings, strict=True)):
        insight = _insight(n, rng, trades, insights, text, emb)
        if n < _MEASURED:
            await store.put_insight(insight)
            measured += 1
        else:
            insight_rows.append(insight_row(insight))
    single = time.perf_counter() - started
    await store.close()
    started = time.perf_counter()
    bulk_insert(path, trade_rows, insight_rows)
    print(f"filled {trades:,} trades + {insights:,} insights: {measured:,} single writes "
          f"({single / max(measured, 1) * 1e3:.2f} ms per write, one transaction each), "
          f"{len(trade_rows) + len(insight_rows):,} bulk-inserted in {time.perf_counter() - started:.1f} s")  # fmt: skip


async def _retrieval(path: Path, trades: int, insights: int, queries: int, reuse: bool) -> None:
    if reuse:
        print(f"reusing {path} (delete it to fill again)")
    else:
        await _fill(path, trades, insights)
    store = SqliteMemoryStore(path)
    config = MemoryConfig(retrieval=MemoryConfig().retrieval.model_copy(update={"ttl_days": 3650}))
    retriever = Retriever(store, config.retrieval)
    view = MemoryInsights(store, retriever, config)
    rng = random.Random(11)
    now = T0 + trades * HOUR
    started = time.perf_counter()
    await retriever.retrieve(now_ms=now, ticker="SOL/USDT", vector=_situation(rng).vector)
    print(f"first retrieval (loads the index): {(time.perf_counter() - started) * 1e3:.0f} ms")
    one, full = [], []
    for _ in range(queries):
        situation = _situation(rng)
        t = time.perf_counter()
        await retriever.retrieve(now_ms=now, ticker=rng.choice(TICKERS), vector=situation.vector)
        one.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        ticker = rng.choice(TICKERS)
        await store.neighbour_trades(
            ticker=ticker, regime=situation.regime, vector=situation.vector, n=20
        )
        await store.regime_stats(ticker=ticker, regime=situation.regime)
        full.append(one[-1] + (time.perf_counter() - t) * 1e3)
    for name, series in (
        ("retrieval (top-k insights)", one),
        ("one ticker's snapshot items", full),
    ):
        q = statistics.quantiles(series, n=100)
        print(
            f"{name}: p50 {q[49]:.2f} ms  p95 {q[94]:.2f} ms  max {max(series):.2f} ms  ({queries} queries)"
        )
    del view
    await store.close()


async def _size_and_writeback(root: Path, trades: int) -> None:
    clock = VirtualClock(T0)
    store = SqliteMemoryStore(root / "memory.db")
    writer = MemoryWriter(
        clock, store, MemoryOutbox(root / "outbox.jsonl"), MemoryConfig(), HashedNgramEmbedder()
    )
    rng = random.Random(3)
    inline, flush = [], []
    for n in range(trades):
        ticker = TICKERS[n % 3]
        entry = T0 + n * HOUR
        writer.note_situation(ticker, _situation(rng), "unavailable")
        t = time.perf_counter()
        writer.on_opened(
            PositionOpened(at_ms=entry, ticker=ticker, quantity=1.0, entry_price=100.0)
        )
        writer.on_exit(PositionExit(at_ms=entry + 9 * HOUR, ticker=ticker, reason="stop_loss",
                                    pnl_pct=rng.gauss(0, 4), holding_secs=32_400, regime="medium_volatility",
                                    signals={"rsi": 0.4, "momentum": -0.2}))  # fmt: skip
        inline.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        await writer.flush()
        flush.append((time.perf_counter() - t) * 1e3)
    await store.close()
    for name, series in (
        ("inline (entry + exit to the outbox)", inline),
        ("store write per exit", flush),
    ):
        q = statistics.quantiles(series, n=100)
        print(f"write-back {name}: mean {statistics.fmean(series):.2f} ms  p95 {q[94]:.2f} ms")
    size = _db_bytes(root)
    counts = writer.stats
    print(f"memory.db: {size / 1e6:.1f} MB for {trades:,} trades + {counts.insights_written:,} "
          f"reflections + {counts.rollups_written} rollups ({size / trades * 10_000 / 1e6:.1f} MB per 10k trades)")  # fmt: skip


def _db_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("memory.db*"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench memory")
    parser.add_argument("--insights", type=int, default=100_000)
    parser.add_argument("--trades", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--size-trades", type=int, default=10_000)
    parser.add_argument("--db", type=Path, help="keep the filled store here and reuse it")
    parser.add_argument("--skip-writeback", action="store_true")
    args = parser.parse_args(argv or [])
    if args.db is not None:
        reuse = args.db.exists()
        asyncio.run(_retrieval(args.db, args.trades, args.insights, args.queries, reuse))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(
                _retrieval(Path(tmp) / "memory.db", args.trades, args.insights, args.queries, False)
            )
    if args.skip_writeback:
        return
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_size_and_writeback(Path(tmp), args.size_trades))


if __name__ == "__main__":
    main()

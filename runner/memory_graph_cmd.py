"""``vigil memory list|search|show|add|forget|export|import|stats``: read and edit the trading memory of a state dir (``--state-dir``) from a shell.

list, search "text" [--ticker --regime], show ID, add "text" (a person's insight, salience 1),
forget ID, export --format jsonl|cypher, import FILE (jsonl), stats. Works on the store the daemon
uses (SQLite memory.db, or Neo4j when configured), safely while the daemon runs (SQLite WAL; the
daemon's retrieval notices another process's write).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from core.clock import WallClock
from core.regular_file import open_regular_file
from memory.config import InsightKind
from memory.embeddings import TextEmbedder
from memory.model import Insight, Trade
from memory.port import MemoryStore, StoreUnavailableError
from memory.retrieval import Retriever
from memory.sqlite_rows import check_trade, created_time
from runner.cli_text import regime_name, usdt_ticker
from runner.config import Settings
from runner.memory_wiring import build_embedder, open_store
from state.line_text import as_one_line, line_text_problem, terminal_safe_json


def run_graph_command(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_run(args, settings))


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    try:
        store = open_store(settings)
        try:
            command = _COMMANDS[args.memory_command]
            return await command(args, store, build_embedder(settings), settings)
        finally:
            await store.close()
    # a file that is no database (or a page of it that is not): the daemon turns memory off with
    # this reason; the file is left for the person to move away
    except (StoreUnavailableError, sqlite3.DatabaseError) as exc:
        print(f"vigil memory: memory store unavailable: {exc}", file=sys.stderr)
        return 1


def _line(insight: Insight, extra: str = "") -> str:
    """One line per insight, control characters escaped: a model's words (a debate role's, a
    lesson's), an imported file or an edit of memory.db may hold ESC, NUL or a line break."""
    scope = " ".join(x for x in (insight.ticker, insight.regime) if x) or "global"
    line = f"{insight.insight_id}  {insight.kind:<10} {scope:<28} {extra}{insight.text}"
    return as_one_line(line)


async def _list(
    args: argparse.Namespace, store: MemoryStore, _e: TextEmbedder, _s: Settings
) -> int:
    for insight in await store.list_insights(
        ticker=args.ticker,
        regime=args.regime,
        kind=args.kind,
        include_archived=args.all,
        limit=args.limit,
    ):
        print(_line(insight))
    return 0


async def _search(
    args: argparse.Namespace, store: MemoryStore, embedder: TextEmbedder, settings: Settings
) -> int:
    config = settings.memory.retrieval.model_copy(update={"score_cutoff": -1.0})
    retriever = Retriever(store, config, embedder)
    now_ms, source = await store_now_ms(store)
    print(f"ages measured against {_iso(now_ms)} ({source})", file=sys.stderr)
    hits = await retriever.retrieve(
        now_ms=now_ms,
        ticker=args.ticker,
        regime=args.regime,
        text=args.text,
        k=args.limit,
    )
    for hit in hits:
        p = hit.parts
        print(
            _line(hit.insight, f"score {p.score:+.3f} (sim {p.sim:.2f}, age {p.age_days:.0f} d)  ")
        )
    return 0


async def store_now_ms(store: MemoryStore) -> tuple[int, str]:
    """The store's clock: the newest reflection, rollup or debate note, whose times come from the
    clock of the run that wrote them (the daemon's, or a replay's simulated 2025). Ages and TTLs measured
    against wall time would hide every insight of a replay older than the TTL. A person's insight
    is stamped with wall time, so it is not a reading of the run's clock and does not count; with
    no run-written insight the wall clock is the reference."""
    run_kinds: tuple[InsightKind, ...] = ("reflection", "rollup", "debate")
    newest = [
        insight.created_ms
        for kind in run_kinds
        for insight in await store.list_insights(kind=kind, include_archived=True, limit=1)
    ]
    if newest:
        return max(newest), "the newest insight a run wrote"
    return WallClock().now_ms(), "wall clock: no insight written by a run"


def _iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


async def _show(
    args: argparse.Namespace, store: MemoryStore, _e: TextEmbedder, _s: Settings
) -> int:
    item: Insight | Trade | None = await store.get_insight(args.id) or await store.get_trade(
        args.id
    )
    if item is None:
        print(f"vigil memory: no insight or trade {args.id}", file=sys.stderr)
        return 1
    body = item.model_dump(mode="json", exclude={"embedding"})
    print(json.dumps(body, indent=2, sort_keys=True))
    return 0


async def _add(
    args: argparse.Namespace, store: MemoryStore, embedder: TextEmbedder, settings: Settings
) -> int:
    text = " ".join(args.text.split())
    refusal = _add_refusal(text, args, settings.memory.write.min_text_chars)
    if refusal is not None:
        print(f"vigil memory: {refusal}", file=sys.stderr)
        return 2
    now = WallClock().now_ms()
    (embedding,) = await embedder.embed([text])
    insight = Insight(
        insight_id=Insight.make_id("person", now, args.ticker, text),
        text=text,
        kind="person",
        salience=1.0,
        author="person",
        summary_source="person",
        created_ms=now,
        ttl_days=args.ttl_days,
        ticker=args.ticker,
        regime=args.regime,
        embedding=embedding,
    )
    await store.put_insight(insight)
    print(insight.insight_id)
    return 0


def _add_refusal(text: str, args: argparse.Namespace, min_chars: int) -> str | None:
    """Why ``memory add`` refuses its arguments; None: it does not."""
    if not min_chars <= len(text) <= 300:
        return f"an insight is {min_chars}..300 characters"
    # the text's line breaks are folded; what is left (NUL, ESC...), or any in --ticker, reached
    # `vigil memory list`'s one line per insight and the terminal showing it (--regime is one of
    # the regime names: its argparse type, runner.cli_text.regime_name, takes no other)
    for name, value in (("the text", text), ("--ticker", args.ticker)):
        problem = None if value is None else line_text_problem(value)
        if problem is not None:
            return f"{name} {problem}"
    return None


async def _forget(
    args: argparse.Namespace, store: MemoryStore, _e: TextEmbedder, _s: Settings
) -> int:
    if await store.forget(args.id):
        print(f"forgot {args.id}")
        return 0
    print(f"vigil memory: no insight or trade {args.id}", file=sys.stderr)
    return 1


async def _export(
    args: argparse.Namespace, store: MemoryStore, _e: TextEmbedder, _s: Settings
) -> int:
    rows = await store.export()
    for row in rows:
        print(_jsonl(row) if args.format == "jsonl" else _cypher(row))
    return 0


def _jsonl(row: dict[str, Any]) -> str:
    """The row as one JSON line, U+0080..U+009F escaped (``state.line_text``)."""
    return terminal_safe_json(orjson.dumps(row).decode())


def _cypher(row: dict[str, Any]) -> str:
    """A MERGE statement per node (natural keys: re-running the script changes nothing)."""
    body = {k: v for k, v in row.items() if k != "type"}
    if row["type"] == "trade":
        return (
            f"MERGE (t:Trade {{trade_id: {json.dumps(body['trade_id'])}}}) SET t.ticker = "
            f"{json.dumps(body['ticker'])}, t.regime = {json.dumps(body['regime'])}, t.pnl_pct = "
            f"{body['pnl_pct']}, t.exit_reason = {json.dumps(body['exit_reason'])}, t.body = "
            f"{json.dumps(json.dumps(body))} MERGE (k:Ticker {{name: {json.dumps(body['ticker'])}}}) "
            f"MERGE (r:Regime {{name: {json.dumps(body['regime'])}}}) MERGE (t)-[:OF]->(k) "
            "MERGE (t)-[:IN]->(r);"
        )
    about = "".join(
        f" MERGE (a{n}:{label} {{name: {json.dumps(body[key])}}}) MERGE (i)-[:ABOUT]->(a{n})"
        for n, (label, key) in enumerate((("Ticker", "ticker"), ("Regime", "regime")))
        if body.get(key)
    )
    taught = (
        f" WITH i MATCH (t:Trade {{trade_id: {json.dumps(body['trade_id'])}}}) MERGE (t)-[:TAUGHT]->(i)"
        if body.get("trade_id")
        else ""
    )
    return (
        f"MERGE (i:Insight {{insight_id: {json.dumps(body['insight_id'])}}}) SET i.text = "
        f"{json.dumps(body['text'])}, i.kind = {json.dumps(body['kind'])}, i.body = "
        f"{json.dumps(json.dumps(body))}{about}{taught};"
    )


async def _import(
    args: argparse.Namespace, store: MemoryStore, _e: TextEmbedder, _s: Settings
) -> int:
    added = {"trade": 0, "insight": 0}
    try:  # regular files only: a FIFO blocked, a directory or unreadable file was a traceback
        handle = open_regular_file(args.file)
    except OSError as exc:
        print(f"vigil memory: cannot import {args.file}: {exc}", file=sys.stderr)
        return 2
    number = 0
    with handle:
        try:  # one line held at a time: the file was read whole, decoded and split (3 copies)
            while line := handle.readline(IMPORT_LINE_MAX_BYTES + 1):
                number += 1
                imported = await _import_line(store, line)
                if imported is not None:
                    added[imported[0]] += imported[1]
        except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
            print(f"vigil memory: {args.file}:{number}: {exc}", file=sys.stderr)
            return 2
    print(
        f"imported {added['trade']} trades, {added['insight']} insights (others were already there)"
    )
    return 0


#: the longest line an import reads: an exported row is a few kB (an insight's text, vectors)
IMPORT_LINE_MAX_BYTES = 1 << 20


async def _import_line(store: MemoryStore, line: bytes) -> tuple[str, int] | None:
    """Store one line's row; its kind and whether it was new, None for a blank line.
    ``ValueError`` naming what is wrong with it."""
    if len(line) > IMPORT_LINE_MAX_BYTES:
        raise ValueError(f"a line over {IMPORT_LINE_MAX_BYTES:,} bytes is no exported row")
    text = line.decode("utf-8")
    if not text.strip():
        return None
    # a line that is not a JSON object was a traceback, the lines before it imported
    row = orjson.loads(text)
    if not isinstance(row, dict):
        raise ValueError(f"not a JSON object: {text[:40]!r}")
    kind = row.pop("type", None)
    if kind == "trade":
        trade = Trade.model_validate(row)
        check_trade(trade)  # else every read leaves it out
        return "trade", int(await store.put_trade(trade))
    if kind == "insight":
        insight = Insight.model_validate(row)
        created_time(insight.created_ms)  # stored, every read would leave it out
        _about_what_a_decision_is_sent(insight)
        return "insight", int(await store.put_insight(insight))
    raise ValueError(f"unknown type {kind!r}")


def _about_what_a_decision_is_sent(insight: Insight) -> None:
    """The ticker and regime ``memory add`` takes (its own argument checks): ``bogus`` or
    ``sol/usdt`` was imported, a lesson no decision is ever sent, where ``add`` refused the
    same (exit 2)."""
    for what, value, check in (
        ("ticker", insight.ticker, usdt_ticker),
        ("regime", insight.regime, regime_name),
    ):
        if value is not None:
            try:
                check(value)
            except argparse.ArgumentTypeError as exc:
                raise ValueError(f"{what} {exc}") from None


async def _stats(
    _args: argparse.Namespace, store: MemoryStore, _e: TextEmbedder, _s: Settings
) -> int:
    out = {
        "store": store.name,
        "counts": await store.counts(),
        "per_regime": [
            s.model_dump(mode="json") for s in await store.regime_stats(ticker=None, regime=None)
        ],
    }
    print(json.dumps(out, indent=2, sort_keys=True))
    return 0


_COMMANDS = {
    "list": _list,
    "search": _search,
    "show": _show,
    "add": _add,
    "forget": _forget,
    "export": _export,
    "import": _import,
    "stats": _stats,
}
